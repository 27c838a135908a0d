"""Reading processes: a process's parent, and whether a process tree holds a TCP connection
(``/proc`` on Linux, ``ps`` elsewhere). What proves which terminal a Claude runs in
(:class:`~claude_nvim._claudes.Claudes` may be given others, in tests)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator

ParentOf = Callable[[int], int | None]
"""The parent pid of a process, ``None`` when it is gone or unknown."""

MAX_DEPTH = 32
"""Ancestors looked at: a terminal's job is a few levels above its claude, never 32."""


def parent_pid(pid: int) -> int | None:
    """The parent of ``pid`` as the system says, ``None`` when it is gone or unknown."""
    if sys.platform.startswith("linux"):
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
                return int(stat.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None
    try:
        out = subprocess.run(["ps", "-o", "ppid=", "-p", str(pid)], capture_output=True,
                             timeout=2, check=False).stdout
        return int(out.strip())
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


Address = tuple[str, int]
HoldsSocket = Callable[[int, Address, Address], "bool | None"]
"""Whether a process (or a descendant) holds the TCP socket from the first address (the
client's) to the second (the server's); ``None`` when that cannot be known."""


def holds_socket(pid: int, client: Address, server: Address) -> bool | None:
    """Whether ``pid`` or one of its descendants holds the client's end of the TCP connection
    ``client`` -> ``server``: on Linux, the socket's inode (``/proc/net/tcp``, ``tcp6``) among
    their open files (``/proc/<pid>/fd``). ``None`` elsewhere, or when it cannot be known (the
    connection is gone, a process's files are not ours to read). A few milliseconds: call it
    from a thread."""
    if not sys.platform.startswith("linux") or not 0 < pid < 2**22:
        return None
    inode = _socket_inode(client, server)
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    unknown = False
    for process in _self_and_descendants(pid):
        try:
            fds = os.listdir(f"/proc/{process}/fd")
        except FileNotFoundError:
            continue  # gone meanwhile
        except OSError:
            unknown = True
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{process}/fd/{fd}") == target:
                    return True
    return None if unknown else False


def _socket_inode(client: Address, server: Address) -> int | None:
    """The inode of the socket bound to ``client`` and connected to ``server``, or None."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, "rb") as rows:
                next(rows, None)  # the header
                for row in rows:
                    fields = row.split()
                    if len(fields) > 9 and _address(fields[1]) == client \
                            and _address(fields[2]) == server:
                        return int(fields[9]) or None  # 0: a socket being torn down
        except (OSError, ValueError):
            continue
    return None


def _address(text: bytes) -> Address | None:
    """An address of /proc/net/tcp{,6} ("0100007F:9C40": 32-bit words in host byte order, the
    port in hex) as (host, port); an IPv4-mapped IPv6 address as its IPv4 one."""
    host, _, port = text.partition(b":")
    try:
        raw = b"".join(int(host[i:i + 8], 16).to_bytes(4, sys.byteorder)
                       for i in range(0, len(host), 8))
        if len(raw) == 16 and raw[:12] == b"\0" * 10 + b"\xff\xff":
            raw = raw[12:]
        family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
        return socket.inet_ntop(family, raw), int(port, 16)
    except ValueError:
        return None


def _self_and_descendants(pid: int) -> Iterator[int]:
    """``pid``, then its descendants (from every process's parent: the kernel may keep no
    list of children)."""
    yield pid
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = parent_pid(int(entry))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry))
    seen, queue = {pid}, list(children.get(pid, ()))
    while queue:
        process = queue.pop()
        if process not in seen:
            seen.add(process)
            yield process
            queue += children.get(process, ())
