"""WebSocket frames without I/O (RFC 6455, the server's side): :class:`FrameReader` turns a
client's bytes into events, :func:`frame` an answer into bytes; tested alone, as
:mod:`.handshake` is for the upgrade request. :mod:`.websocket` runs them on trio."""

from __future__ import annotations

import functools
from dataclasses import dataclass

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
MAX_FRAGMENTS = 1 << 14
"""Frames one message may come in (64 MiB in fragments of 4 KiB)."""
FRAMES_PER_FEED = 256
"""Frames parsed per :meth:`FrameReader.feed`; the rest waits in its buffer. A read of 256 KiB
of empty pings is 43,690 frames: parsed in one go, they held the whole server for 0.5 s."""
_VALID_CLOSE_CODES = {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014}


@dataclass(frozen=True)
class CloseReason:
    code: int
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.code} {self.reason}".strip()


@dataclass(frozen=True, slots=True)
class Message:
    data: str | bytes


@dataclass(frozen=True, slots=True)
class Control:
    opcode: int  # PING, PONG or CLOSE
    payload: bytes


@dataclass(frozen=True, slots=True)
class Failure:
    """The peer broke the protocol: close with ``code`` and read nothing more from it."""

    code: int
    reason: str


Event = Message | Control | Failure


def frame(opcode: int, payload: bytes, *, mask: bytes | None = None, fin: bool = True,
          length: int | None = None) -> bytes:
    """One frame: a server's (unmasked); a client's with a 4-byte ``mask`` (the benchmarks',
    the fuzzer's, the tests'). ``fin=False`` leaves a message unfinished; ``length`` states a
    length other than the payload's (a lie, for the fuzzer)."""
    n = len(payload) if length is None else length
    first, masked = (0x80 if fin else 0) | opcode, 0 if mask is None else 0x80
    if n < 126:
        header = bytes((first, masked | n))
    elif n < 1 << 16:
        header = bytes((first, masked | 126)) + n.to_bytes(2, "big")
    else:
        header = bytes((first, masked | 127)) + n.to_bytes(8, "big")
    if mask is None:
        return header + payload
    return header + mask + _unmask(bytearray(payload), mask)


def close_payload(code: int, reason: str = "") -> bytes:
    return code.to_bytes(2, "big") + reason.encode("utf-8")[:123]


def parse_close(payload: bytes) -> CloseReason | Failure:
    """A close frame's code and reason, or why it is invalid."""
    if not payload:
        return CloseReason(1005)
    code = int.from_bytes(payload[:2], "big")
    if len(payload) == 1 or not (code in _VALID_CLOSE_CODES or 3000 <= code <= 4999):
        return Failure(1002, "invalid close code")
    try:
        return CloseReason(code, payload[2:].decode("utf-8"))
    except UnicodeDecodeError:
        return Failure(1007, "close reason is not UTF-8")


@functools.cache
def _xor_table(key: int) -> bytes:
    """``bytes.translate``'s table for XOR with ``key`` (made when first needed: all 256 took
    10 ms at every start)."""
    return bytes(byte ^ key for byte in range(256))


def _unmask(data: bytearray, mask: bytes) -> bytes | bytearray:
    """``data`` (changed in place) XOR the 4-byte ``mask``: unmasks, and masks."""
    if len(data) < 256:  # small: one big-integer XOR is quickest
        n = len(data)
        key = int.from_bytes(mask * (n >> 2) + mask[: n & 3], "big")
        return (int.from_bytes(data, "big") ^ key).to_bytes(n, "big")
    # big: four strided byte translations, at memory speed (7 MB: 8 ms, not 46)
    for i in range(4):
        data[i::4] = data[i::4].translate(_xor_table(mask[i]))
    return data


class FrameReader:
    """Client frames in, events out: messages (reassembled, text decoded), control frames,
    and at most one :class:`Failure`, after which it takes no more input.

    Each :meth:`feed` parses ``FRAMES_PER_FEED`` frames at most; ``more`` says whether some
    may be left (``feed(b"")`` takes them)."""

    def __init__(self, max_message_size: int) -> None:
        self.max_message_size = max_message_size
        self._buffer = bytearray()
        # The fragmented message in progress: its payload so far in one buffer (a list of
        # parts cost tens of bytes per fragment, however small), their count and opcode.
        self._parts: bytearray | None = None
        self._fragments = 0
        self._opcode: int | None = None
        self.failed = False
        self.more = False

    @property
    def unparsed(self) -> bytes:
        """What was fed and is not parsed yet."""
        return bytes(self._buffer)

    @property
    def in_message(self) -> bool:
        """Whether the fragments of a message have begun, and not ended."""
        return self._parts is not None

    def feed(self, data: bytes, limit: int = FRAMES_PER_FEED) -> list[Event]:
        """Take ``data``; the events of ``limit`` frames at most (``more`` says when some may
        be left)."""
        if self.failed:
            return []
        buffer = self._buffer
        buffer += data
        events: list[Event] = []
        frames, self.more = 0, False
        while len(buffer) >= 2:
            if frames == limit:
                self.more = True
                return events
            frames += 1
            first, second = buffer[0], buffer[1]
            length, at = second & 0x7F, 2
            if length == 126:
                if len(buffer) < 4:
                    break
                length, at = int.from_bytes(buffer[2:4], "big"), 4
            elif length == 127:
                if len(buffer) < 10:
                    break
                length, at = int.from_bytes(buffer[2:10], "big"), 10
            problem = self._check(first, second, length)
            if problem is not None:
                self.failed = True
                buffer.clear()
                events.append(problem)
                return events
            end = at + 4 + length
            if len(buffer) < end:
                break  # the rest of the frame is still on its way (its size was checked)
            payload = _unmask(buffer[at + 4:end], bytes(buffer[at:at + 4]))
            del buffer[:end]  # a bytearray drops its head without copying the rest
            event = self._complete(first, payload)
            if event is not None:
                events.append(event)
                if isinstance(event, Failure):
                    self.failed = True
                    buffer.clear()
                    return events
        return events

    def _check(self, first: int, second: int, length: int) -> Failure | None:
        opcode = first & 0x0F
        if not second & 0x80:
            return Failure(1002, "client frames must be masked")
        if first & 0x70:
            return Failure(1002, "reserved bits set: no extension was negotiated")
        if opcode >= 8:
            if opcode not in (CLOSE, PING, PONG):
                return Failure(1002, f"unknown opcode {opcode}")
            if not first & 0x80 or length > 125:
                return Failure(1002, "control frames are final and at most 125 bytes")
            return None
        if opcode not in (CONTINUATION, TEXT, BINARY):
            return Failure(1002, f"unknown opcode {opcode}")
        if (opcode == CONTINUATION) != (self._opcode is not None):
            return Failure(1002, "unexpected continuation frame" if opcode == CONTINUATION
                           else "a new message inside a fragmented one")
        if self._parts is not None:
            if len(self._parts) + length > self.max_message_size:
                return Failure(1009, f"message over {self.max_message_size} bytes")
            if self._fragments >= MAX_FRAGMENTS:
                return Failure(1009, f"message in over {MAX_FRAGMENTS} fragments")
        elif length > self.max_message_size:
            return Failure(1009, f"message over {self.max_message_size} bytes")
        return None

    def _complete(self, first: int, payload: bytes | bytearray) -> Event | None:
        opcode = first & 0x0F
        if opcode >= 8:
            return Control(opcode, bytes(payload))
        if opcode != CONTINUATION:
            self._opcode = opcode
        if self._parts is not None:
            self._parts += payload
            self._fragments += 1
            if not first & 0x80:
                return None
            payload, self._parts = self._parts, None
        elif not first & 0x80:
            self._parts, self._fragments = bytearray(payload), 1
            return None
        binary = self._opcode == BINARY
        self._opcode = None
        if binary:
            return Message(bytes(payload))
        try:
            return Message(payload.decode("utf-8"))
        except UnicodeDecodeError:
            return Failure(1007, "text message is not UTF-8")
