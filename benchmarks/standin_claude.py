"""A stand-in for ``claude`` that connects to its IDE at once: the connect benchmark's client.

It does what the CLI does first, and nothing else, with the standard library only (it starts in
a few milliseconds, so that the figure is the editor side's): read ``CLAUDE_CODE_SSE_PORT``,
the lock file for that port in ``$CLAUDE_CONFIG_DIR/ide``, upgrade to a WebSocket with the
token, ``initialize``, then ``notifications/initialized`` and ``ide_connected``. The wall-clock
time after sending ``ide_connected`` goes to ``$STANDIN_OUT`` (one JSON line per stand-in, with
its pid and arguments); it then stays connected until its stdin closes.
"""

import base64
import json
import os
import socket
import sys
import time


def frame(payload: bytes) -> bytes:
    """A masked text frame (a zero mask: masking is the server's to undo, not to check)."""
    n = len(payload)
    if n < 126:
        header = bytes((0x81, 0x80 | n))
    elif n < 1 << 16:
        header = bytes((0x81, 0xFE)) + n.to_bytes(2, "big")
    else:
        header = bytes((0x81, 0xFF)) + n.to_bytes(8, "big")
    return header + b"\0\0\0\0" + payload


def read_exactly(sock: socket.socket, buffer: bytearray, n: int) -> bytes:
    while len(buffer) < n:
        data = sock.recv(65536)
        if not data:
            raise EOFError("the server closed the connection")
        buffer += data
    out = bytes(buffer[:n])
    del buffer[:n]
    return out


def read_message(sock: socket.socket, buffer: bytearray) -> bytes:
    """The next text message (pings and other control frames are skipped)."""
    while True:
        head = read_exactly(sock, buffer, 2)
        n = head[1] & 0x7F
        if n == 126:
            n = int.from_bytes(read_exactly(sock, buffer, 2), "big")
        elif n == 127:
            n = int.from_bytes(read_exactly(sock, buffer, 8), "big")
        payload = read_exactly(sock, buffer, n)
        if head[0] & 0x0F == 1:
            return payload


def send(sock: socket.socket, message: dict) -> None:
    sock.sendall(frame(json.dumps(message).encode()))


def newest_lock(directory: str) -> str:
    """The newest lock file there, as the CLI reads them (newest first)."""
    names = [n for n in os.listdir(directory) if n.endswith(".lock")]
    return max(names, key=lambda n: os.stat(os.path.join(directory, n)).st_mtime)[:-5]


def main() -> None:
    # $STANDIN_DELAY: seconds of start-up first (the real CLI's is about one), then the newest
    # lock, as the CLI finds its IDE; without it, at once, the lock of CLAUDE_CODE_SSE_PORT.
    delay = float(os.environ.get("STANDIN_DELAY") or 0)
    config = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.expanduser("~/.claude")
    if delay:
        time.sleep(delay)
        port = newest_lock(os.path.join(config, "ide"))
    else:
        port = os.environ["CLAUDE_CODE_SSE_PORT"]
    with open(os.path.join(config, "ide", port + ".lock")) as lock:
        token = json.load(lock)["authToken"]
    sock = socket.create_connection(("127.0.0.1", int(port)))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                  f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                  "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mcp\r\n"
                  f"X-Claude-Code-Ide-Authorization: {token}\r\n\r\n").encode())
    buffer = bytearray()
    while b"\r\n\r\n" not in buffer:
        data = sock.recv(65536)
        if not data:
            raise EOFError("no answer to the upgrade")
        buffer += data
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    if b" 101 " not in head.split(b"\r\n")[0]:
        raise RuntimeError(f"upgrade refused: {head[:200]!r}")
    buffer = bytearray(rest)
    send(sock, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {"roots": {"listChanged": True}},
        "clientInfo": {"name": "claude-nvim-standin", "version": "1"}}})
    read_message(sock, buffer)
    send(sock, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    send(sock, {"jsonrpc": "2.0", "method": "ide_connected", "params": {"pid": os.getpid()}})
    connected = time.time()
    with open(os.environ["STANDIN_OUT"], "a") as out:
        out.write(json.dumps({"connected": connected, "pid": os.getpid(),
                              "argv": sys.argv[1:]}) + "\n")
    sys.stdin.read()  # until the terminal goes


if __name__ == "__main__":
    main()
