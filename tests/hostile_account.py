"""Another process of the account Claude runs as, on the far side of ``claude-nvim remote``
(tests/test_remote.py runs it as that user): it tries Neovim's msgpack-RPC everywhere it can.

    python hostile_account.py sockets INODE,... | pipes PID,...

``sockets``: every listening Unix socket and TCP port on this host's loopback that it can
connect to gets a request to run Lua; what each answered is printed (JSON). Only those of the
socket inodes given: the test's machine is shared with other test runs, whose sockets are not
this test's far side. ``pipes``: every pipe
and socket of every process of this user (``/proc/PID/fd/*``) that it can open gets it, of
the PIDs given (again: not other test runs').
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


def sockets(inodes: set[str]) -> dict[str, str]:
    answered = {}
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[5] == "01" and fields[6] in inodes:  # listening
            path = fields[7]
            address = "\0" + path[1:] if path.startswith("@") else path
            if (got := ask(socket.AF_UNIX, address)) is not None:
                answered[path] = got
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:
                port = int(fields[1].rsplit(":", 1)[1], 16)
                family, host = ((socket.AF_INET6, "::1") if table.endswith("6")
                                else (socket.AF_INET, "127.0.0.1"))
                if (got := ask(family, (host, port))) is not None:
                    answered[f"{host}:{port}"] = got
    return answered


def pipes(pids: set[str]) -> dict[str, str]:
    written = {}
    for entry in Path("/proc").iterdir():
        if entry.name not in pids or int(entry.name) == os.getpid():
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


given = set(sys.argv[2].split(","))
print(json.dumps(sockets(given) if sys.argv[1] == "sockets" else pipes(given)))
