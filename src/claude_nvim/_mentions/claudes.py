"""Several Claudes in one Neovim: which terminal each one runs in, and who gets an @-mention.

A Claude belongs to a Neovim terminal when the pid it sends in ``ide_connected`` is the
terminal's job pid or a descendant of it (the job may be ``claude-nvim claude``, with claude its
child). An @-mention goes to exactly one Claude: the one whose terminal the user was in most
recently; with no such terminal, the most recently connected one. No I/O here but reading a
process's parent (``/proc`` on Linux, ``ps`` elsewhere), which callers may replace.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
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
        if self.pid is not None:
            return f"the Claude with pid {self.pid}"
        return f"Claude #{self.connection_id}"


@dataclass
class Claudes:
    """The Claudes ready for notifications, in the order they connected."""

    parent_of: ParentOf = parent_pid
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
