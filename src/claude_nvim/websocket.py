"""trio-websocket, with two fixes the protocol needs (RFC 6455 and protocol doc §0), and
coalesced writes.

* The message limit counts UTF-8 bytes, as on the wire; trio-websocket counts characters, which
  lets a text message of 4-byte characters buffer four times the limit.
* A text frame that is not UTF-8 closes the connection with 1007 *sent to the peer*;
  trio-websocket drops the TCP connection without a close frame (the peer sees 1006).

All three live in private methods of trio-websocket 0.12, so the version is pinned below 0.13 and
tests/test_server.py checks both behaviours.
"""

from __future__ import annotations

import contextlib
from typing import Any

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, WebSocketServer
from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import CloseConnection, TextMessage


class _Connection(WebSocketConnection):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._unsent: list[bytes] = []
        self._send_failed = False

    async def _send(self, event: Any) -> None:
        # Under load many answers are ready in one scheduler pass: the first sender to get
        # the stream writes everything queued so far in one syscall, and the senders behind
        # it find their bytes already gone. Order is kept: frames queue in send order.
        self._unsent.append(self._wsproto.send(event))
        async with self._stream_lock:
            if not self._unsent:
                if self._send_failed:
                    raise ConnectionClosed(self._close_reason)
                return
            data = b"".join(self._unsent) if len(self._unsent) > 1 else self._unsent[0]
            self._unsent.clear()
            try:
                await self._stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._send_failed = True
                await self._abort_web_socket()
                raise ConnectionClosed(self._close_reason) from None

    async def _handle_message_event(self, event: Any) -> None:
        if isinstance(event, TextMessage):
            # The base class adds len(str); add the rest of the UTF-8 length.
            self._message_size += len(event.data.encode("utf-8", "surrogatepass")) - len(
                event.data)
        await super()._handle_message_event(event)

    async def _handle_close_connection_event(self, event: CloseConnection) -> None:
        if self._wsproto.state == ConnectionState.OPEN:
            # wsproto failed a frame itself (1007 invalid UTF-8, 1002 protocol error): the
            # peer did not close, so tell it why before the connection goes.
            with contextlib.suppress(ConnectionClosed):
                await self._send(CloseConnection(code=event.code, reason=event.reason))
        await super()._handle_close_connection_event(event)


class Server(WebSocketServer):
    """A WebSocketServer whose connections are :class:`_Connection`."""

    async def _handle_connection(self, stream: trio.abc.Stream) -> None:
        async with trio.open_nursery() as nursery:
            connection = _Connection(
                stream, WSConnection(ConnectionType.SERVER),
                message_queue_size=self._message_queue_size,
                max_message_size=self._max_message_size,
                receive_buffer_size=self._receive_buffer_size)
            nursery.start_soon(connection._reader_task)
            with trio.move_on_after(self._connect_timeout) as handshake:
                request = await connection._get_request()
            if handshake.cancelled_caught:  # a slow or silent client: drop it
                nursery.cancel_scope.cancel()
                await stream.aclose()
                return
            try:
                await self._handler(request)
            finally:
                with trio.move_on_after(self._disconnect_timeout):
                    await connection.aclose()


async def abort(ws: WebSocketConnection) -> None:
    """Drop a connection at once, without a close handshake: its peer is not reading."""
    await ws._abort_web_socket()
    await ws._close_stream()


async def serve(handler: Any, port: int, *, max_message_size: int, handshake_timeout: float,
                task_status: trio.TaskStatus[WebSocketServer] = trio.TASK_STATUS_IGNORED,
                ) -> None:
    """Serve WebSockets on 127.0.0.1 only; ``started`` with the server (its ``port``)."""
    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    server = Server(handler, listeners, max_message_size=max_message_size,
                    connect_timeout=handshake_timeout, receive_buffer_size=1 << 16)
    await server.run(task_status=task_status)
