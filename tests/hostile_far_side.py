"""A hostile other side for ``claude-nvim remote`` (tests/test_remote.py runs it with
``--via``): it says what the probe says, then, as the agent would start, what no agent says.

    python hostile_far_side.py MODE RECORD [the agent's command, ignored]

MODE: ``rpc`` (Neovim's msgpack-RPC, raw), ``bad-ready`` (a port that is a command line),
``framed`` (well-framed connections that speak msgpack-RPC, then one without a token, then a
frame too big), ``flood`` (more connections than allowed), ``escapes`` (a directory of
terminal escapes). What this side got back on each
connection goes to RECORD (JSON).
"""

from __future__ import annotations

import json
import os
import struct
import sys

HEADER = struct.Struct(">cII")
RPC = (b"\x94\x00\x01\xadnvim_exec_lua\x92" + bytes([0xA0 | 18]) + b"vim.g.pwned = true\x90")
"""[0, 1, "nvim_exec_lua", ["vim.g.pwned = true", []]]: a request Neovim would run."""
NO_TOKEN = (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
out, inp = sys.stdout.buffer, sys.stdin.buffer


def say(line: str) -> None:
    out.write(f"claude-nvim-remote {line}\n".encode())
    out.flush()


def send(kind: bytes, number: int, data: bytes = b"", size: int | None = None) -> None:
    out.write(HEADER.pack(kind, number, len(data) if size is None else size) + data)
    out.flush()


def frame() -> tuple[bytes, int, bytes] | None:
    header = inp.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    kind, number, size = HEADER.unpack(header)
    return kind, number, inp.read(size)


def answer(number: int) -> bytes:
    """What the server here sent back on connection ``number``, until it closed it."""
    got = b""
    while (read := frame()) is not None:
        kind, of, data = read
        if of == number and kind == b"D":
            got += data
        if of == number and kind == b"C":
            break
    return got


def main() -> None:
    mode, record = sys.argv[1], sys.argv[2]
    say("cwd=\x1b]0;pwned\x07\x1b[2J/w" if mode == "escapes" else f"cwd={os.getcwd()}")
    say("python=python3 3.11")
    say("claude=/usr/bin/claude")
    say("agent=1")
    if mode == "rpc":
        out.write(RPC * 8)
        out.flush()
        inp.read()
        return
    frame()  # L: the lock
    if mode == "bad-ready":
        send(b"R", 0, json.dumps({"port": "1; touch /tmp/pwned", "lock": "/l",
                                  "mcp_config": "/m"}).encode())
        inp.read()
        return
    send(b"R", 0, json.dumps({"port": 9, "lock": "/tmp/x.lock", "mcp_config": "/tmp/m"}).encode())
    if mode == "flood":
        for number in range(1, 100):
            send(b"O", number)
        inp.read()
        return
    replies = {}
    send(b"O", 1)
    send(b"D", 1, RPC)
    replies["rpc"] = answer(1).decode(errors="replace")
    send(b"O", 2)
    send(b"D", 2, NO_TOKEN)
    replies["no token"] = answer(2).decode(errors="replace")
    with open(record, "w") as f:
        json.dump(replies, f)
    send(b"D", 3, size=1 << 30)  # and then nothing: a frame too big
    inp.read()


main()
