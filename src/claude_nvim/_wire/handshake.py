"""The server side of the WebSocket opening handshake, without I/O (as wsproto's H11Handshake).

:class:`Handshake` takes the bytes a client sends and gives back the parsed upgrade request
(:class:`Upgrade`) or the HTTP error to answer with (:class:`Refusal`). The request is parsed
by h11, as strictly as any HTTP/1.1 server would: a missing or repeated Host, a malformed
header line (a space, a control character or a byte above 0x7F in a name; NUL or a bare CR
in a value) or a request with a body is refused, never guessed at. Two leniencies of h11's are
refused too, as RFC 9112 allows (2.2, 5.2): a line ended by a bare LF, and a header line folded
onto the next (obs-fold); and a Sec-WebSocket-Key that is not the canonical base64 of 16 bytes
(RFC 6455 4.2.1). The I/O lives in :mod:`.websocket`.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass, replace

import h11

ACCEPT_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_REQUEST_BYTES = 16 * 1024
"""The HTTP upgrade request, headers included."""

_OBS_FOLD = re.compile(rb"\n[ \t]")

_REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 426: "Upgrade Required",
            431: "Request Header Fields Too Large", 500: "Internal Server Error"}


@dataclass(frozen=True)
class Upgrade:
    """A valid upgrade request."""

    path: str
    headers: list[tuple[bytes, bytes]]
    """(name, value), names lower-cased, in the order sent."""
    subprotocols: list[str]
    key: bytes
    leftover: bytes
    """What the client sent after the request (its first frames, perhaps)."""


@dataclass(frozen=True)
class Refusal:
    """An HTTP error to send before closing the connection."""

    status: int
    body: bytes
    headers: tuple[tuple[bytes, bytes], ...] = ()

    def response(self) -> bytes:
        return http_error(self.status, self.body, self.headers)


class Handshake:
    """One client's upgrade request: feed it bytes with :meth:`receive` until it returns
    something else than ``None``."""

    def __init__(self) -> None:
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_BYTES)
        self._received = 0
        self._raw = bytearray()  # what h11 was given, for the checks it does not make
        self._request: Upgrade | None = None

    def receive(self, data: bytes) -> Upgrade | Refusal | None:
        """Take ``data``; the request once it is complete, a refusal, or ``None`` while more
        bytes are needed."""
        self._received += len(data)
        self._raw += data
        self._h11.receive_data(data)
        try:
            while True:
                event = self._h11.next_event()
                if isinstance(event, h11.Request):
                    request = _check(event)
                    if isinstance(request, Refusal):
                        return request
                    self._request = request
                elif event is h11.PAUSED:  # the request is complete; h11 waits for our answer
                    assert self._request is not None
                    leftover, _ = self._h11.trailing_data
                    head = bytes(self._raw[:self._received - len(leftover)])
                    if len(head) > MAX_REQUEST_BYTES:
                        return Refusal(431, b"Request header fields too large")
                    refusal = _check_lines(head)
                    if refusal is not None:
                        return refusal
                    return replace(self._request, leftover=leftover)
                elif event is h11.NEED_DATA:
                    return None
                elif not isinstance(event, h11.EndOfMessage):  # EOF: not an upgrade either
                    return Refusal(400, b"A WebSocket upgrade request was expected")
        except h11.RemoteProtocolError as exc:
            status = exc.error_status_hint
            return Refusal(status, b"Request header fields too large" if status == 431
                           else f"Bad HTTP request: {exc}".encode())


def _check_lines(head: bytes) -> Refusal | None:
    """Refuse what h11 takes but need not (RFC 9112 2.2, 5.2): a bare LF ending a line of the
    request ``head``, or a folded header line."""
    if head.count(b"\n") != head.count(b"\r\n"):
        return Refusal(400, b"Bad HTTP request: every line must end with CRLF")
    if _OBS_FOLD.search(head):
        return Refusal(400, b"Bad HTTP request: folded header lines (obs-fold) are not accepted")
    return None


def _check(request: h11.Request) -> Upgrade | Refusal:
    headers = list(request.headers)

    def values(name: bytes) -> list[bytes]:
        return [token.strip().lower() for n, v in headers if n == name for token in v.split(b",")]

    if request.method != b"GET" or request.http_version != b"1.1" \
            or b"websocket" not in values(b"upgrade") or b"upgrade" not in values(b"connection"):
        return Refusal(400, b"A WebSocket upgrade request was expected")
    if any(n in (b"content-length", b"transfer-encoding") for n, _ in headers):
        return Refusal(400, b"An upgrade request has no body")
    if values(b"sec-websocket-version") != [b"13"]:
        return Refusal(426, b"WebSocket version 13 only", ((b"Sec-WebSocket-Version", b"13"),))
    keys = [v for n, v in headers if n == b"sec-websocket-key"]
    try:
        nonce = base64.b64decode(keys[0], validate=True) if len(keys) == 1 else b""
    except ValueError:
        nonce = b""
    # Canonical: b64decode ignores the unused bits of the last character; RFC 6455 does not.
    valid_key = len(nonce) == 16 and base64.b64encode(nonce) == keys[0]
    if not valid_key:
        return Refusal(400, b"Missing or invalid Sec-WebSocket-Key")
    subprotocols = [p.decode("latin-1") for n, v in headers if n == b"sec-websocket-protocol"
                    for p in (t.strip() for t in v.split(b",")) if p]
    return Upgrade(request.target.decode("latin-1"), headers, subprotocols, keys[0], b"")


def accept_response(key: bytes, subprotocol: str | None) -> bytes:
    """The 101 answer that completes the handshake."""
    accept = base64.b64encode(hashlib.sha1(key + ACCEPT_GUID).digest())
    lines = [b"HTTP/1.1 101 Switching Protocols", b"Upgrade: websocket",
             b"Connection: Upgrade", b"Sec-WebSocket-Accept: " + accept]
    if subprotocol is not None:
        lines.append(b"Sec-WebSocket-Protocol: " + subprotocol.encode())
    return b"\r\n".join(lines) + b"\r\n\r\n"


def http_error(status: int, body: bytes, headers: tuple[tuple[bytes, bytes], ...] = ()) -> bytes:
    head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}".encode(),
            b"Content-Type: text/plain; charset=utf-8",
            b"Content-Length: " + str(len(body)).encode(), b"Connection: close",
            *(name + b": " + value for name, value in headers)]
    return b"\r\n".join(head) + b"\r\n\r\n" + body
