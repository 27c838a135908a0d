"""The server side of RFC 6455 WebSocket on trio: as much of it as the IDE protocol needs.

Two layers, as in h11 and wsproto: :mod:`.frames` turns bytes into events and back without
I/O, as :mod:`.handshake` does for the upgrade request; here :class:`Connection` runs one
client on a trio stream, and :func:`serve` accepts them.

Why not trio-websocket on this side (the ``claude-nvim mcp`` relay and the tests still use it
as a client): a tool call is a few hundred bytes each way, and on a Neovim round trip of about
0.1 ms its per-message path cost more than all the rest. wsproto parses one small frame in
27 µs and builds one in 8; a reader task handing each message through a memory channel, a lock
and a timeout scope per send came on top (py-spy: a third of the server's CPU per call).
Here a message costs a few µs, is dispatched from the task that read it, and answers queued
together leave in one write.

What a client gets (docs/protocol.md §5.3): text messages up to ``max_message_size`` bytes, else
close 1009 before the rest is buffered; invalid UTF-8 closes 1007, a broken frame 1002, always
with a close frame sent first. Binary messages are passed on (the MCP layer refuses them).

What no client (with the token or without) can do: make the server hold more than a message
in progress (its payload, in at most ``MAX_FRAGMENTS`` fragments), one pending pong and the
send backlog per connection; keep more than ``MAX_UNFINISHED`` connections in the handshake
(the oldest is dropped); or make the read loop run ahead of its handler (``on_message`` says
when to wait).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from .._socket_io import send_all
from .early import Early
from .frames import (
    CLOSE,
    PING,
    PONG,
    TEXT,
    CloseReason,
    Control,
    Event,
    Failure,
    FrameReader,
    Message,
    close_payload,
    frame,
    parse_close,
)
from .handshake import Handshake, Refusal, accept_response, http_error

log = logging.getLogger(__name__)

MAX_UNFINISHED = 256
"""Connections that may be in the opening handshake at once (fewer with few open files)."""
REFUSAL_QUIET_SECONDS = 60.0
"""Out of file descriptors, the refusal is logged at most this often."""
RECEIVE_BYTES = 256 * 1024
WRITE_CHUNK = 256 * 1024
"""A peer must take this much within the stall timeout, or it is dropped."""
HIGH_WATER = 1024 * 1024
"""Queued bytes above which a sender waits for the peer to take them (so a big answer is
held until it is sent, and a peer that does not read cannot make us buffer)."""
CLOSE_GRACE = 2.0
"""Seconds the closing handshake may take before the TCP connection is dropped."""
DISCARD_LIMIT = 1024 * 1024
"""Bytes read and thrown away after a protocol failure, waiting for the peer to close."""


class ConnectionClosed(Exception):
    """The connection is closed (or closing); ``reason`` says how."""

    def __init__(self, reason: CloseReason) -> None:
        super().__init__(str(reason))
        self.reason = reason


# ---------------------------------------------------------------------------------------------
# The opening handshake


@dataclass
class Request:
    """A client's upgrade request; the handler answers it with :meth:`accept` or
    :meth:`reject`."""

    path: str
    headers: list[tuple[bytes, bytes]]
    """(name, value), names lower-cased, in the order sent."""
    proposed_subprotocols: list[str]
    _key: bytes
    _stream: trio.SocketStream
    _leftover: bytes
    _server: Server
    _answered: bool = field(default=False, repr=False)
    initialized: dict[str, Any] | None = None
    """``initialize``'s params, when the early answers (:mod:`.early`) answered the upgrade
    and ``initialize`` already; :meth:`accept` then sends nothing."""

    async def accept(self, *, subprotocol: str | None = None) -> Connection:
        if not self._answered:
            await self._stream.send_all(accept_response(self._key, subprotocol))
        self._answered = True
        return Connection(self._stream, subprotocol, self._server, self._leftover)

    async def reject(self, status: int, *, body: bytes = b"",
                     headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
        self._answered = True
        await _send_http_error(self._stream, http_error(status, body, headers))


async def _send_http_error(stream: trio.SocketStream, response: bytes) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.send_all(response)


async def _read_request(stream: trio.SocketStream, server: Server, received: bytes = b""
                        ) -> Request | None:
    """Read and check the upgrade request (``received``: its start, read already); answers a
    bad one itself (and returns ``None``)."""
    handshake = Handshake()
    while True:
        chunk, received = received or await stream.receive_some(4096), b""
        if not chunk:
            return None
        request = handshake.receive(chunk)
        if isinstance(request, Refusal):
            await _send_http_error(stream, request.response())
            return None
        if request is not None:
            return Request(request.path, request.headers, request.subprotocols, request.key,
                           stream, request.leftover, server)


# ---------------------------------------------------------------------------------------------
# One connection


class Connection:
    """One accepted client: :meth:`serve` reads it, :meth:`send` writes to it."""

    def __init__(self, stream: trio.SocketStream, subprotocol: str | None, server: Server,
                 received: bytes = b"") -> None:
        self.stream = stream
        # The hot paths use the socket itself: the stream's wrappers cost 2-4 µs a call.
        self._socket = stream.socket
        self.subprotocol = subprotocol
        self.closed: CloseReason | None = None
        """Set once the connection is over: why."""
        self._server = server
        self._reader = FrameReader(server.max_message_size)
        self._received = received  # what came after the upgrade request
        self._outgoing: list[bytes] = []
        self._queued = 0
        self._wake_writer = trio.Event()
        self._written = trio.Event()  # set, and replaced, after each write
        self._pongs: dict[bytes, trio.Event] = {}
        self._pong_at: int | None = None  # where in _outgoing a pong waits to be written
        self._room_wait: trio.CancelScope | None = None  # the read loop waits for its handler
        self._closing = False  # our close frame is queued: nothing more may be sent
        self._writing = False
        self._finished = trio.Event()

    async def send(self, text: str | bytes, *, wait: bool = True) -> None:
        """Queue one text message (as ``bytes``: UTF-8 already); while the peer has a backlog
        (``HIGH_WATER``), wait for room first, unless ``wait`` is false (the caller waited).

        Room is waited for before queueing, not after: a sender whose message is queued is
        done, and does not hold its memory while other messages keep the backlog up.
        Raises :class:`ConnectionClosed` when the connection is over.
        """
        if wait:
            await self.room()
        self._queue(frame(TEXT, text if isinstance(text, bytes) else text.encode("utf-8")))

    def has_room(self) -> bool:
        """Whether :meth:`send` would queue at once: the backlog is under ``HIGH_WATER`` (or
        the connection is over, and sending fails at once)."""
        return self._queued <= HIGH_WATER or self.closed is not None

    async def room(self) -> None:
        """Wait until :meth:`has_room`."""
        while not self.has_room():
            await self._written.wait()

    async def ping(self) -> None:
        """Send a ping and wait for its pong."""
        payload = os.urandom(8)
        pong = self._pongs[payload] = trio.Event()
        try:
            self._queue(frame(PING, payload))
            await pong.wait()
        finally:
            del self._pongs[payload]
        if self.closed is not None:
            raise ConnectionClosed(self.closed)

    async def aclose(self, code: int = 1000, reason: str = "") -> None:
        """Start the closing handshake and wait (``CLOSE_GRACE`` at most) for it to end."""
        if not self._closing:
            self._queue(frame(CLOSE, close_payload(code, reason)))
            self._closing = True
        with trio.move_on_after(CLOSE_GRACE):
            await self._finished.wait()
        if not self._finished.is_set():
            self._end(CloseReason(1006, "the peer did not finish the close"))
            await self.stream.aclose()

    def _queue(self, data: bytes) -> None:
        if self._closing or self.closed is not None:
            raise ConnectionClosed(self.closed or CloseReason(1000, "closing"))
        self._outgoing.append(data)
        self._queued += len(data)
        self._wake_writer.set()

    def _end(self, reason: CloseReason) -> None:
        if self.closed is None:
            self.closed = reason
        self._written.set()  # senders waiting for room learn it is over
        for pong in self._pongs.values():
            pong.set()
        if self._room_wait is not None:
            self._room_wait.cancel()

    async def serve(self, on_message: OnMessage) -> None:
        """Read messages until the connection is over, calling ``on_message`` for each one
        (from this task: start a task there for anything that waits). When it returns an
        event, nothing more is read until that event is set: backpressure."""
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write_loop)
                await self._read_loop(on_message)
                # The writer sends what is queued (a close frame, say), then ends.
                self._closing = True
                self._wake_writer.set()
                nursery.cancel_scope.deadline = trio.current_time() + CLOSE_GRACE
        finally:
            self._end(CloseReason(1006))
            self._finished.set()
            with trio.CancelScope(shield=True):
                await self.stream.aclose()

    async def _read_loop(self, on_message: OnMessage) -> None:
        data, self._received = self._received, b""
        while True:
            events = self._reader.feed(data)
            events.reverse()  # taken from the end: a handled message is held by nobody
            while isinstance(ended := self._take(events, on_message), trio.Event):
                await self._wait_for_room(ended)
                if self.closed is not None:
                    return
            if isinstance(ended, Failure):
                await self._fail(ended)
            if ended:
                return
            if self._reader.more:  # a flood of small frames: let other tasks run in between
                data = b""
                await trio.lowlevel.checkpoint()
                continue
            try:
                data = await self._socket.recv(RECEIVE_BYTES)
            except (OSError, trio.ClosedResourceError):
                data = b""
            if not data:
                self._end(CloseReason(1006, "the connection was dropped"))
                return

    async def _wait_for_room(self, room: trio.Event) -> None:
        """Wait until ``room`` is set or the connection ends. A peer that closes while its
        calls wait (all blocked, say) is noticed too, unless bytes it sent are still unread:
        those are read, up to its end, once there is room."""
        with trio.CancelScope() as self._room_wait:  # _end cancels it
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._notice_eof)
                await room.wait()
                nursery.cancel_scope.cancel()
        self._room_wait = None

    async def _notice_eof(self) -> None:
        try:
            await trio.lowlevel.wait_readable(self._socket)
            if await self._socket.recv(1, socket.MSG_PEEK):
                await trio.sleep_forever()  # unread bytes: the end comes after them
        except (OSError, trio.ClosedResourceError):
            pass
        self._end(CloseReason(1006, "the connection was dropped"))

    def _take(self, events: list[Event], on_message: OnMessage) -> bool | Failure | trio.Event:
        """Handle ``events`` (taken from the end); ``True`` or a failure when the connection is
        over, the handler's event when it has no room for more.

        Its own function so that nothing holds the last message afterwards: freeing megabytes
        takes a millisecond or more, which the next message would otherwise wait.
        """
        while events:
            event = events.pop()
            if isinstance(event, Message):
                room = on_message(event.data)
                if room is not None:
                    return room
            elif isinstance(event, Control):
                if self._control(event):
                    return True
            else:
                return event
        return False

    def _control(self, event: Control) -> bool:
        """Handle a control frame; ``True`` when the connection is over."""
        if event.opcode == PING:
            if not self._closing and self.closed is None:
                self._pong(event.payload)
        elif event.opcode == PONG:
            pong = self._pongs.get(event.payload)
            if pong is not None:
                pong.set()
        else:
            reason = parse_close(event.payload)
            if isinstance(reason, Failure):
                self._fail_now(reason)
                return True
            if not self._closing:  # the peer closes: echo its code
                code = reason.code if reason.code != 1005 else 1000
                self._queue(frame(CLOSE, close_payload(code)))
                self._closing = True
            self._end(reason)
            return True
        return False

    def _pong(self, payload: bytes) -> None:
        """Queue a pong, or replace the one still queued: one pong answers every ping not
        answered yet (RFC 6455 5.5.3), so a client that pings and does not read makes us
        hold one, not gigabytes."""
        pong = frame(PONG, payload)
        if self._pong_at is None:
            self._pong_at = len(self._outgoing)
            self._queue(pong)
        else:
            self._queued += len(pong) - len(self._outgoing[self._pong_at])
            self._outgoing[self._pong_at] = pong

    def _fail_now(self, failure: Failure) -> None:
        log.info("closing a connection: %d %s", failure.code, failure.reason)
        if not self._closing:
            self._queue(frame(CLOSE, close_payload(failure.code, failure.reason)))
            self._closing = True
        self._end(CloseReason(failure.code, failure.reason))

    async def _fail(self, failure: Failure) -> None:
        self._fail_now(failure)
        # Let the close frame go out and the peer read it, then drop the connection; what it
        # still sends (the rest of an oversized message, say) is read only this far.
        with trio.move_on_after(CLOSE_GRACE):
            discarded = 0
            while discarded < DISCARD_LIMIT:
                try:
                    data = await self.stream.receive_some(RECEIVE_BYTES)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    break
                if not data:
                    break
                discarded += len(data)

    async def _write_loop(self) -> None:
        # One writer sends whatever has queued since its last write in one go. A peer that
        # takes no bytes for the stall timeout is dropped: it would otherwise hold its answers,
        # and the big-read slot, forever. Moving a deadline costs a few µs, so it is pushed
        # ahead only when a write starts with less than 90 % of the timeout left; one that
        # passed while nothing was being written only starts a fresh scope.
        timeout = self._server.stall_timeout
        while True:
            with trio.CancelScope() as stall:
                while True:
                    if not self._outgoing:
                        if self._closing or self.closed is not None:
                            return
                        await self._wake_writer.wait()
                        self._wake_writer = trio.Event()
                        continue
                    if stall.cancel_called:  # its deadline passed while idle
                        break
                    data = b"".join(self._outgoing) if len(self._outgoing) > 1 \
                        else self._outgoing[0]
                    self._outgoing.clear()
                    self._pong_at = None
                    view = memoryview(data)
                    try:
                        for start in range(0, len(data), WRITE_CHUNK):
                            now = trio.current_time()
                            if not now + 0.9 * timeout <= stall.deadline <= now + timeout:
                                stall.deadline = now + timeout
                            self._writing = True
                            await send_all(self._socket, view[start:start + WRITE_CHUNK])
                            self._writing = False
                            self._queued -= min(WRITE_CHUNK, len(data) - start)
                            self._written.set()
                            self._written = trio.Event()
                    except (OSError, trio.ClosedResourceError):
                        self._end(CloseReason(1006, "the connection was dropped"))
                        return
                    # Free a big answer now, not when the next small one wakes us: unmapping
                    # megabytes takes milliseconds, which that answer would wait.
                    del data, view
            if self._writing:
                break
        log.warning("dropping a client that took nothing for %g s", timeout)
        self._end(CloseReason(1006, "the client stopped reading"))
        await self.stream.aclose()  # ends the read loop too


# ---------------------------------------------------------------------------------------------
# The server


Handler = Callable[[Request], Awaitable[None]]
OnMessage = Callable[[str | bytes], trio.Event | None]
"""Takes a message; returns ``None``, or an event to wait for before the next one is read."""
_NO_ROOM_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


@dataclass
class Server:
    handler: Handler
    max_message_size: int
    handshake_timeout: float
    """Seconds a client has to send its upgrade request (slow or silent ones are dropped)."""
    stall_timeout: float
    """Seconds a client may take no bytes of what we send before it is dropped."""
    max_unfinished: int = MAX_UNFINISHED
    _unfinished: dict[trio.CancelScope, None] = field(default_factory=dict, repr=False)
    """The handshakes under way, oldest first."""

    async def adopt(self, early: Early) -> None:
        """Serve a connection the early answers took, from where it stands."""
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(early.socket))
        upgrade = early.upgrade
        answered = None if upgrade is None else Request(
            upgrade.path, upgrade.headers, upgrade.subprotocols, upgrade.key, stream,
            early.received, self, _answered=True, initialized=early.initialize)
        await self.handle(stream, early.received, answered)

    async def handle(self, stream: trio.SocketStream, received: bytes = b"",
                     request: Request | None = None) -> None:
        """Serve one connection: ``received`` is the start of its request, read already;
        ``request``, its request answered already (:meth:`adopt`)."""
        # Whatever one connection does, the server and the other connections go on.
        try:
            if request is None:
                request = await self._read_request(stream, received)
            if request is not None:  # else: a bad, slow or silent client, answered if at all
                await self.handler(request)
                if not request._answered:
                    await request.reject(500, body=b"The server did not answer the upgrade")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # gone mid-handshake: normal life
        except Exception:
            log.exception("a connection failed")
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _read_request(self, stream: trio.SocketStream, received: bytes
                            ) -> Request | None:
        """The upgrade request, within the handshake timeout, or None."""
        with trio.move_on_after(self.handshake_timeout) as handshake:
            self._unfinished[handshake] = None
            if len(self._unfinished) > self.max_unfinished:
                # Drop the oldest: a claude sends its request at once, so it is never the
                # oldest for long; idle connections piling up are.
                oldest = next(iter(self._unfinished))
                del self._unfinished[oldest]
                oldest.cancel()
            try:
                return await _read_request(stream, self, received)
            finally:
                self._unfinished.pop(handshake, None)
        return None


async def serve(handler: Handler, port: int, *, max_message_size: int, handshake_timeout: float,
                stall_timeout: float, listening: socket.socket | None = None,
                early: Sequence[Early] = (),
                task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve WebSockets on 127.0.0.1 only; ``started`` with the port. ``listening``: a socket
    already bound there and listening (handed over by whoever bound it), instead of ``port``;
    ``early``: the connections taken on it already (:mod:`.early`)."""
    open_files = raise_open_file_limit()
    # A quarter of the open files at most for handshakes: the rest stays for real clients.
    server = Server(handler, max_message_size, handshake_timeout, stall_timeout,
                    max(8, min(MAX_UNFINISHED, open_files // 4)))
    if listening is not None:
        listeners = [trio.SocketListener(trio.socket.from_stdlib_socket(listening))]
    else:
        listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    bound: int = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        for taken in early:
            nursery.start_soon(server.adopt, taken)
        for listener in listeners:
            nursery.start_soon(_accept, listener, server.handle, nursery)
        task_status.started(bound)


async def _accept(listener: trio.SocketListener,
                  handle: Callable[[trio.SocketStream], Awaitable[None]],
                  nursery: trio.Nursery) -> None:
    """Accept connections; out of file descriptors, retry, saying so at most once a minute
    (dropping a stale handshake frees a descriptor now and then, so an outage flaps)."""
    said_refused = False
    quiet_until = -math.inf
    async with listener:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in _NO_ROOM_ERRNOS:
                    raise
                if trio.current_time() >= quiet_until:
                    log.error("cannot accept connections (%s); retrying until some close",
                              os.strerror(exc.errno or 0))
                    said_refused = True
                    quiet_until = trio.current_time() + REFUSAL_QUIET_SECONDS
                await trio.sleep(0.1)
                continue
            if said_refused:
                log.warning("accepting connections again")
                said_refused = False
            nursery.start_soon(handle, stream)


def raise_open_file_limit() -> int:
    """Raise the soft limit on open files to the hard one (the common 1,024 is soon reached
    by idle connections); the soft limit now."""
    try:
        import resource
    except ImportError:  # Windows: no such limit on sockets
        return 1 << 16
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):  # macOS refuses an unlimited hard one
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    return soft if soft != resource.RLIM_INFINITY else 1 << 20
