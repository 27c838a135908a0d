"""The holder's wire, without I/O: frames, and the bounded ring of claude's output (and who
is at the other end of a connection).

A frame is one byte of kind, four of length (big-endian), then the payload. A client sends
ATTACH (its window size, then its Neovim's address: where claude's editor opens files) and then
INPUT and SIZE; or, alone, NAME (the user's name for this
Claude, stored in its JSON file) or STOP (end claude). The holder sends OUTPUT (what claude
wrote, as it wrote it), then EXIT (claude's status, as a shell gives it) or REFUSED (why).
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
from collections import deque

ATTACH, INPUT, SIZE, NAME, STOP = b"A", b"I", b"W", b"N", b"K"
OUTPUT, EXIT, REFUSED = b"O", b"X", b"R"
KINDS = {ATTACH, INPUT, SIZE, NAME, STOP, OUTPUT, EXIT, REFUSED}

MAX_PAYLOAD = 1 << 20
"""No frame carries more (a replay is sent in frames of at most this)."""
HEADER = struct.Struct(">cI")
WINDOW = struct.Struct(">HH")
MAX_ADDRESS = 4096
"""A Neovim's address in an ATTACH is at most this many bytes (UTF-8)."""


class ProtocolError(ValueError):
    """Bytes that are not frames: the connection that sent them is dropped."""


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return HEADER.pack(kind, len(payload)) + payload


def frames(kind: bytes, payload: bytes) -> bytes:
    """``payload`` in as many frames as its size needs (one, if it is empty)."""
    if not payload:
        return frame(kind)
    return b"".join(frame(kind, payload[at:at + MAX_PAYLOAD])
                    for at in range(0, len(payload), MAX_PAYLOAD))


def window(rows: int, cols: int) -> bytes:
    return WINDOW.pack(max(1, min(rows, 0xFFFF)), max(1, min(cols, 0xFFFF)))


def read_window(payload: bytes) -> tuple[int, int]:
    if len(payload) != WINDOW.size:
        raise ProtocolError("a window size is two 16-bit numbers")
    rows, cols = WINDOW.unpack(payload)
    return max(rows, 1), max(cols, 1)


def attach(rows: int, cols: int, nvim: str | None) -> bytes:
    """An ATTACH's payload: the window size, then ``nvim`` (the address of the Neovim the
    client runs in) if there is one that fits."""
    address = b""
    with contextlib.suppress(UnicodeEncodeError):
        address = (nvim or "").encode()
    return window(rows, cols) + (address if len(address) <= MAX_ADDRESS else b"")


def read_attach(payload: bytes) -> tuple[tuple[int, int], str | None]:
    """An ATTACH's window size and Neovim's address (None if it sent none: an older client)."""
    address = payload[WINDOW.size:]
    if len(address) > MAX_ADDRESS:
        raise ProtocolError(f"a Neovim's address is at most {MAX_ADDRESS} bytes")
    try:
        return read_window(payload[:WINDOW.size]), address.decode() or None
    except UnicodeDecodeError:
        raise ProtocolError("a Neovim's address is UTF-8") from None


class Reader:
    """Frames out of a byte stream, fed as it comes."""

    def __init__(self, limit: int = MAX_PAYLOAD) -> None:
        self._buffer = bytearray()
        self._limit = limit

    def feed(self, data: bytes) -> list[tuple[bytes, bytes]]:
        self._buffer += data
        found = []
        while len(self._buffer) >= HEADER.size:
            kind, size = HEADER.unpack_from(self._buffer)
            if kind not in KINDS or size > self._limit:
                raise ProtocolError(f"not a frame: kind {kind!r}, {size} bytes")
            if len(self._buffer) < HEADER.size + size:
                break
            found.append((kind, bytes(self._buffer[HEADER.size:HEADER.size + size])))
            del self._buffer[:HEADER.size + size]
        return found


class Ring:
    """The last ``size`` bytes written, at most: what a new client is shown first."""

    def __init__(self, size: int) -> None:
        self._chunks: deque[bytes] = deque()
        self._kept = 0
        self.size = size

    def write(self, data: bytes) -> None:
        self._chunks.append(data)
        self._kept += len(data)
        while self._kept - len(self._chunks[0]) >= self.size:
            self._kept -= len(self._chunks.popleft())
        if self._kept > self.size:  # the oldest chunk, cut
            extra = self._kept - self.size
            self._chunks[0] = self._chunks[0][extra:]
            self._kept = self.size

    def contents(self) -> bytes:
        return b"".join(self._chunks)


def peer_pid(sock: socket.socket) -> int:
    """The pid of the process at the other end of a Unix socket's connection (for a client:
    the one that listens), 0 if the system does not say."""
    try:
        pid, _, _ = struct.unpack("3i", sock.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    except OSError:
        return 0
    return int(pid)


def exit_status(wait_status: int) -> int:
    """A child's wait status as a shell says it: its code, or 128 + the signal that ended it."""
    code = os.waitstatus_to_exitcode(wait_status)
    return code if code >= 0 else 128 - code
