"""A minimal RFC 6455 client for the benchmark: text frames, pings, close; nothing else.

The ``claude`` CLI is Node, whose ``ws`` library frames a message in a few buffer operations.
A client on trio-websocket costs about as much CPU per call as the server it measures (0.2 ms
against the server's 0.3 ms, measured), and on a 2-core machine that CPU is taken from the
server and Neovim. This client frames and parses in a few lines over a trio socket, so the
figures are the server's. It speaks the same bytes: a masked text frame per message.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
from collections.abc import AsyncIterator, Iterable

import trio

from claude_nvim._wire import frames
from claude_nvim._wire.frames import BINARY, CLOSE, CONTINUATION, PING, PONG, TEXT

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
RECEIVE_BYTES = 1 << 18


class Closed(Exception):
    """The connection is closed; ``code`` is the server's close code (1006: no close frame)."""

    def __init__(self, code: int, reason: str = "") -> None:
        super().__init__(f"closed: {code} {reason}".strip())
        self.code = code
        self.reason = reason


def frame(opcode: int, payload: bytes) -> bytes:
    """One final client frame, masked with a fresh key as a client's must be."""
    return frames.frame(opcode, payload, mask=os.urandom(4))


class WebSocket:
    """One client connection. ``send_message`` may be called from many tasks at once; one
    task reads with :meth:`messages`."""

    def __init__(self, stream: trio.SocketStream, buffered: bytes) -> None:
        self.stream = stream
        self.closed: Closed | None = None
        self._buffer = bytearray(buffered)
        self._unsent: list[bytes] = []
        self._writing = False

    async def send_message(self, text: str) -> None:
        await self.send_frame(frame(TEXT, text.encode()))

    async def send_frame(self, data: bytes) -> None:
        """Send a prepared :func:`frame` (big messages are framed before they are timed)."""
        if self.closed is not None:
            raise self.closed
        # Whoever is writing writes everything queued meanwhile: no lock, few syscalls.
        self._unsent.append(data)
        if self._writing:
            return
        self._writing = True
        try:
            while self._unsent:
                batch = b"".join(self._unsent)
                self._unsent.clear()
                await self.stream.send_all(batch)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise self.closed or Closed(1006) from None
        finally:
            self._writing = False

    async def messages(self) -> AsyncIterator[str]:
        """Text messages as they arrive, until the connection closes (then ``self.closed``)."""
        parts: list[bytes] = []
        while True:
            parsed = self._next_frame()
            if parsed is None:
                try:
                    data = await self.stream.receive_some(RECEIVE_BYTES)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                if not data:
                    self.closed = self.closed or Closed(1006)
                    return
                self._buffer += data
                continue
            final, opcode, payload = parsed
            del parsed
            if opcode in (TEXT, BINARY, CONTINUATION):
                parts.append(payload)
                del payload  # big messages are freed as soon as they are read, not later
                if final:
                    message = b"".join(parts).decode("utf-8", "surrogatepass")
                    parts.clear()
                    yield message
                    del message
                continue
            elif opcode == PING:
                await self.send_frame(frame(PONG, payload))
            elif opcode == CLOSE:
                code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
                self.closed = Closed(code, payload[2:].decode("utf-8", "replace"))
                if not self._writing:  # echo the close; a writer in progress will fail
                    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                        await self.stream.send_all(frame(CLOSE, payload[:2]))
                return

    def _next_frame(self) -> tuple[bool, int, bytes] | None:
        buffer = self._buffer
        if len(buffer) < 2:
            return None
        length, at = buffer[1] & 0x7F, 2
        if length == 126:
            length, at = int.from_bytes(buffer[2:4], "big"), 4
        elif length == 127:
            length, at = int.from_bytes(buffer[2:10], "big"), 10
        if len(buffer) < at + length:  # (also when the extended length is not all here yet)
            return None
        final, opcode = bool(buffer[0] & 0x80), buffer[0] & 0x0F
        payload = bytes(buffer[at:at + length])
        del buffer[:at + length]  # bytearray drops its head without copying the rest
        return final, opcode, payload

    async def aclose(self) -> None:
        if self.closed is None:
            with contextlib.suppress(Closed, OSError, trio.BusyResourceError):
                await self.send_frame(frame(CLOSE, (1000).to_bytes(2, "big")))
            self.closed = Closed(1000)
        await self.stream.aclose()


async def connect(port: int, path: str = "/", *, subprotocol: str = "mcp",
                  headers: Iterable[tuple[str, str]] = ()) -> WebSocket:
    """Open a WebSocket to 127.0.0.1:``port``; raises :class:`Closed` if the upgrade fails."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)  # sets TCP_NODELAY
    key = base64.b64encode(os.urandom(16))
    request = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Upgrade: websocket",
               "Connection: Upgrade", f"Sec-WebSocket-Key: {key.decode()}",
               "Sec-WebSocket-Version: 13", f"Sec-WebSocket-Protocol: {subprotocol}",
               *(f"{name}: {value}" for name, value in headers)]
    await stream.send_all(("\r\n".join(request) + "\r\n\r\n").encode())
    response = b""
    while b"\r\n\r\n" not in response:
        data = await stream.receive_some(4096)
        if not data:
            await stream.aclose()
            raise Closed(1006, "closed during the handshake")
        response += data
    head, _, rest = response.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    fields = {name.strip().lower(): value.strip()
              for name, _, value in (line.partition(":") for line in lines)}
    accept = base64.b64encode(hashlib.sha1(key + GUID).digest()).decode()
    if status.split()[1:2] != ["101"] or fields.get("sec-websocket-accept") != accept:
        await stream.aclose()
        raise Closed(1006, f"upgrade refused: {status}")
    return WebSocket(stream, rest)
