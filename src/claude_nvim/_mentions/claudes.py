"""Several Claudes in one Neovim: which terminal each one runs in, and who gets an @-mention.

A Claude belongs to a Neovim terminal when the pid it sends in ``ide_connected`` is the
terminal's job pid or a descendant of it (the job may be ``claude-nvim claude``, with claude its
child), and the job still runs. The pid is believed when that process or a descendant holds
the Claude's end of its connection (:func:`holds_socket`, on Linux); proven false, the Claude
runs in no terminal. Unproven (elsewhere, or /proc would not say), a Claude claiming the
terminal of another that is connected gets none: the first keeps it, and the user is told.
An @-mention goes to exactly one Claude: the one whose terminal the user was in most
recently; with no such terminal, the most recently connected one. No I/O here but reading
processes (their parents, their sockets: ``/proc`` on Linux, ``ps`` elsewhere), which callers
may replace.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class Terminal:
    """A Neovim terminal buffer and the pid of the job it runs."""

    buffer: int
    job_pid: int
    name: str = ""
    label: str = ""
    """What the Neovim plugin calls the Claude it runs there ("Claude 2"), if it does."""


@dataclass
class Claude:
    """One connected claude: its connection, its pid, and the terminal it runs in, if any."""

    connection_id: int
    pid: int | None = None
    terminal: Terminal | None = None
    proven: bool | None = None
    """Whether ``pid`` holds the connection (:func:`holds_socket`); ``None``: unknown."""

    def label(self) -> str:
        """How the user knows this Claude: by its terminal (the Neovim plugin's name for it,
        ``Claude 2``, else the terminal's name or number), else by its pid."""
        if self.terminal is not None and self.terminal.label:
            return self.terminal.label
        if self.terminal is not None:
            name = self.terminal.name
            if name and not name.startswith("term://"):  # Neovim's own: long, with a pid
                return f"the Claude in {name}"
            return f"the Claude in terminal buffer {self.terminal.buffer}"
        if self.pid is not None and self.proven is not False:
            return f"the Claude with pid {self.pid}"
        return f"Claude #{self.connection_id}"


@dataclass
class Claudes:
    """The Claudes ready for notifications, in the order they connected."""

    parent_of: ParentOf = parent_pid
    holds: HoldsSocket = holds_socket
    _by_id: dict[int, Claude] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._by_id)

    def add(self, claude: Claude) -> None:
        self._by_id.pop(claude.connection_id, None)
        self._by_id[claude.connection_id] = claude

    def remove(self, connection_id: int) -> None:
        self._by_id.pop(connection_id, None)

    def get(self, connection_id: int) -> Claude | None:
        return self._by_id.get(connection_id)

    def identify(self, connection_id: int, pid: int | None, terminals: Iterable[Terminal],
                 client: Address | None = None, server: Address | None = None) -> Claude:
        """The Claude on connection ``connection_id`` (from ``client`` to ``server``), which
        says it is ``pid``: its terminal among ``terminals`` (those whose job runs), unless its
        pid is proven not to hold the connection. Reads processes: call it from a thread."""
        proven = None
        if pid is not None and client is not None and server is not None:
            proven = self.holds(pid, client, server)
        terminal = self.terminal_of(pid, terminals) if proven is not False else None
        return Claude(connection_id, pid, terminal, proven)

    def disputed(self, claude: Claude) -> Claude | None:
        """The connected Claude that keeps the terminal ``claude`` claims without proof, if
        one runs there: the first keeps it (``claude`` is not added yet)."""
        if claude.terminal is None or claude.proven:
            return None
        return next((c for c in self._by_id.values() if c.terminal is not None
                     and c.terminal.buffer == claude.terminal.buffer), None)

    def terminal_of(self, pid: int | None, terminals: Iterable[Terminal]) -> Terminal | None:
        """The terminal whose job ``pid`` is or descends from (the innermost if nested)."""
        if pid is None:
            return None
        lineage = [pid]
        for _ in range(MAX_DEPTH):
            parent = self.parent_of(lineage[-1])
            if parent is None or parent <= 1 or parent in lineage:
                break
            lineage.append(parent)
        by_pid = {t.job_pid: t for t in terminals}
        return next((by_pid[p] for p in lineage if p in by_pid), None)

    def mention_target(self, recent_buffers: Sequence[int]) -> Claude | None:
        """Who gets an @-mention: the Claude of the terminal visited last (``recent_buffers``,
        most recent first), else the most recently connected one; ``None`` with none."""
        by_buffer = {c.terminal.buffer: c for c in self._by_id.values() if c.terminal}
        for buffer in recent_buffers:
            if buffer in by_buffer:
                return by_buffer[buffer]
        # The latest to connect, not to be identified: the pids of two are looked up at once.
        return max(self._by_id.values(), key=lambda c: c.connection_id, default=None)
