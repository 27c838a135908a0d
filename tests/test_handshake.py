"""The opening handshake without I/O: bytes in, an upgrade request or an HTTP error out."""

from __future__ import annotations

import pytest

from claude_nvim._wire.handshake import Handshake, Refusal, Upgrade, accept_response
from helpers import KEY, upgrade


def test_an_upgrade_request_and_what_follows_it():
    data = upgrade(b"Sec-WebSocket-Protocol: x, mcp", b"X-Claude-Code-Ide-Authorization: t")
    result = Handshake().receive(data + b"\x81\x80frames")
    assert isinstance(result, Upgrade)
    assert result.path == "/x"
    assert result.subprotocols == ["x", "mcp"]
    assert result.key == KEY
    assert (b"x-claude-code-ide-authorization", b"t") in result.headers
    assert result.leftover == b"\x81\x80frames"


def test_a_request_split_anywhere():
    data = upgrade() + b"rest"
    for cut in range(1, len(data) - 4):
        handshake = Handshake()
        assert handshake.receive(data[:cut]) is None, cut
        result = handshake.receive(data[cut:])
        assert isinstance(result, Upgrade) and result.leftover == b"rest", cut


@pytest.mark.parametrize("data, status", [
    (upgrade().replace(b"Host: 127.0.0.1\r\n", b""), 400),  # no Host
    (upgrade(b"Host: other"), 400),  # two
    (upgrade(b"X Name: y"), 400),  # a space in a name
    (upgrade(b"X-Na\x01me: y"), 400),  # a control character in a name
    (upgrade(b"X-N\xe4me: y"), 400),  # a byte above 0x7F in a name
    (upgrade(b"X-Name: a\x00b"), 400),  # NUL in a value
    (upgrade(b"X-Name: a\rb"), 400),  # a bare CR in a value
    (upgrade(b"Content-Length: 4") + b"body", 400),
    (upgrade(b"Transfer-Encoding: chunked"), 400),
    (upgrade().replace(b"HTTP/1.1", b"HTTP/1.0"), 400),
    (upgrade().replace(b"GET", b"POST"), 400),
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 400),  # no upgrade
    (upgrade(version=b"8"), 426),
    (upgrade(key=b"short"), 400),
    (upgrade(b"Sec-WebSocket-Key: " + KEY), 400),  # two keys
    (b"\x16\x03\x01 not HTTP at all\r\n\r\n", 400),
    (upgrade(b"X-Big: " + b"y" * 20000), 431),  # in one piece
    # What h11 takes but RFC 9112 lets a server refuse, and RFC 6455 does not allow:
    (upgrade().replace(b"\r\n", b"\n"), 400),  # LF-only line endings
    (upgrade().replace(b"Host: 127.0.0.1\r\n", b"Host: 127.0.0.1\n"), 400),  # mixed
    (upgrade().replace(b"\r\n\r\n", b"\r\n\n"), 400),  # a bare LF for the empty line
    (upgrade(b"X-Name: a\r\n folded"), 400),  # obs-fold
    (upgrade(b"X-Name: a\r\n\tfolded"), 400),
    (upgrade(key=KEY[:-3] + b"h=="), 400),  # base64 of the same 16 bytes, not canonical
    (upgrade(key=KEY.rstrip(b"=")), 400),  # no padding
])
def test_what_is_refused(data, status):
    result = Handshake().receive(data)
    assert isinstance(result, Refusal) and result.status == status, result
    assert result.response().startswith(f"HTTP/1.1 {status} ".encode())
    assert b"\r\nConnection: close\r\n" in result.response()


def test_a_request_that_never_ends_is_refused_once_too_big():
    handshake = Handshake()
    assert handshake.receive(b"GET / HTTP/1.1\r\nHost: x\r\n") is None
    result = None
    while result is None:
        result = handshake.receive(b"X-More: " + b"y" * 100 + b"\r\n")
    assert isinstance(result, Refusal) and result.status == 431


def test_the_accept_answer():
    # RFC 6455 section 1.3's example key and answer.
    answer = accept_response(b"dGhlIHNhbXBsZSBub25jZQ==", "mcp")
    assert answer.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
    assert b"\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n" in answer
    assert answer.endswith(b"\r\nSec-WebSocket-Protocol: mcp\r\n\r\n")
