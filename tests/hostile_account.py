"""Another process of the account Claude runs as, on the far side of ``claude-nvim remote``
(tests/test_remote.py runs it as that user): it tries Neovim's msgpack-RPC everywhere it can.

    python hostile_account.py sockets|pipes

``sockets``: every Unix socket it can connect to and every TCP port listening on this host's
loopback get a request to run Lua; what each answered is printed (JSON). ``pipes``: every pipe
and socket of every process of this user (``/proc/PID/fd/*``) that it can open gets it.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

RPC = (b"\x94\x00\x01\xadnvim_exec_lua\x92" + bytes([0xA0 | 18]) + b"vim.g.pwned = true\x90")


def ask(family: int, address: object) -> str | None:
    try:
        with socket.socket(family) as sock:
            sock.settimeout(2)  # a bound on a silent peer, not a measure
            sock.connect(address)
            sock.sendall(RPC)
            try:
                return sock.recv(4096).hex()
            except OSError:
                return ""
    except OSError:
        return None


def sockets() -> dict[str, str]:
    answered = {}
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[5] == "01":  # listening
            path = fields[7]
            address = "\0" + path[1:] if path.startswith("@") else path
            if (got := ask(socket.AF_UNIX, address)) is not None:
                answered[path] = got
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":
                port = int(fields[1].rsplit(":", 1)[1], 16)
                family, host = ((socket.AF_INET6, "::1") if table.endswith("6")
                                else (socket.AF_INET, "127.0.0.1"))
                if (got := ask(family, (host, port))) is not None:
                    answered[f"{host}:{port}"] = got
    return answered


def pipes() -> dict[str, str]:
    written = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if entry.stat().st_uid != os.getuid():
                continue
            fds = list((entry / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
                if not target.startswith(("pipe:", "socket:")):
                    continue
                handle = os.open(fd, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                os.write(handle, RPC)
                written[str(fd)] = target
            except OSError:
                pass
            finally:
                os.close(handle)
    return written


print(json.dumps(sockets() if sys.argv[1] == "sockets" else pipes()))
