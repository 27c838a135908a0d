"""The Claudes: one record per Claude (:class:`Claude`), and their registry (:class:`Claudes`).

A Claude is one IDE connection of a ``claude`` CLI. Its record holds all the server knows of
it: who it is (the connection, the pid it says it is and whether that is proven, the Neovim
terminal it runs in, its label), what it is doing (its state from its hooks, since when, its
turns) and where its session writes (the transcript, and how far it was read). The features
use the records, none owns them: mentions pick one to send to, hooks change its state, the
review names its turns by its label. A new fact about a Claude is a field here.

A Claude belongs to a Neovim terminal when the pid it sends in ``ide_connected`` is the
terminal's job pid or a descendant of it (the job may be ``claude-nvim claude``, with claude its
child), and the job still runs. The pid is believed when that process or a descendant holds
the Claude's end of its connection (:func:`.processes.holds_socket`, on Linux); proven false,
the Claude runs in no terminal. Unproven (elsewhere, or /proc would not say), a Claude claiming
the terminal of another that listens gets none: the first keeps it, and the user is told.
An @-mention goes to exactly one Claude: the one whose terminal the user was in most
recently; with no such terminal, the most recently connected one.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import trio

from .._nvim.lua import CORE
from .._tool import JSON, ConnectionInfo
from .processes import MAX_DEPTH, Address, HoldsSocket, ParentOf, holds_socket, parent_pid

if TYPE_CHECKING:
    from .._nvim.editor import Editor

log = logging.getLogger(__name__)

State = Literal["unknown", "working", "waiting", "done"]
STATES: tuple[State, ...] = ("unknown", "working", "waiting", "done")
"""``unknown``: no hook came yet (a claude started some other way has none), never a guess."""
PROOF = {True: "holds the connection", False: "does not hold the connection", None: "unproven"}
"""What the server's log says of a Claude's pid (:func:`.processes.holds_socket`)."""


@dataclass(frozen=True)
class Terminal:
    """A Neovim terminal buffer and the pid of the job it runs."""

    buffer: int
    job_pid: int
    name: str = ""
    label: str = ""
    """What the Neovim plugin calls the Claude it runs there ("Claude 2"), if it does."""


@dataclass(eq=False)
class Claude:
    """One Claude: its connection, where it runs, what it is doing, where its session writes."""

    connection: ConnectionInfo
    """Who it is, as tools see it (``ctx.connection``, docs/plugins.md): its id, the pid it
    says it is, and once it listens its label and terminal buffer, which are kept there."""
    terminal: Terminal | None = None
    """The Neovim terminal it runs in, once it listens and if it runs in one."""
    proven: bool | None = None
    """Whether its pid holds the connection (:func:`.processes.holds_socket`); None: unknown."""
    listening: bool = False
    """It listens for notifications: one of the user's Claudes, until its connection closes."""
    state: State = "unknown"
    """What it is doing, as its hooks say (``_hooks``)."""
    since: float = field(default_factory=time.time)
    """When its state last changed."""
    turns: int = 0
    """Prompts it was given (UserPromptSubmit) since it connected."""
    last_hook: float = 0.0
    """When its last hook came."""
    transcript: str = ""
    """Its session's transcript (on Claude's host), where an interrupt is seen (no hook says
    so)."""
    transcript_size: int = -1
    """The transcript's size when last looked at: it is read again only when it changed."""

    @property
    def id(self) -> int:
        """Its connection's id."""
        return self.connection.id

    @property
    def pid(self) -> int | None:
        """The pid it says it is, unless proven false."""
        return self.connection.client_pid if self.proven is not False else None

    @property
    def label(self) -> str:
        """How the user knows it ("" before it listens)."""
        return self.connection.label or ""

    def describe(self) -> str:
        """How the user knows it, from what is known now: by its terminal (the Neovim plugin's
        name for it, ``Claude 2``, else the terminal's name or number), else by its pid."""
        if self.terminal is not None and self.terminal.label:
            return self.terminal.label
        if self.terminal is not None:
            name = self.terminal.name
            if name and not name.startswith("term://"):  # Neovim's own: long, with a pid
                return f"the Claude in {name}"
            return f"the Claude in terminal buffer {self.terminal.buffer}"
        if self.pid is not None:
            return f"the Claude with pid {self.pid}"
        return f"Claude #{self.id}"

    def entry(self) -> JSON:
        """It as Neovim is told of it (``vim.g.claude_nvim_server.claudes``, ``hooks.lua``)."""
        entry: JSON = {"id": self.id, "state": self.state, "since": self.since,
                       "label": self.label, "turns": self.turns}
        if self.connection.terminal is not None:
            entry["terminal"] = self.connection.terminal
        if self.pid is not None:
            entry["pid"] = self.pid
        return entry


Listener = Callable[[Claude], None]
"""Told of a Claude that starts listening; must not block."""


@dataclass
class Claudes:
    """The connected Claudes, in the order they connected."""

    parent_of: ParentOf = parent_pid
    holds: HoldsSocket = holds_socket
    listeners: list[Listener] = field(default_factory=list)
    """Told of each Claude that starts listening (the hooks publish it in Neovim)."""
    _by_id: dict[int, Claude] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self) -> Iterator[Claude]:
        return iter(list(self._by_id.values()))

    def add(self, connection: ConnectionInfo) -> Claude:
        """The record of a new connection."""
        claude = self._by_id[connection.id] = Claude(connection)
        return claude

    def get(self, connection_id: int) -> Claude | None:
        return self._by_id.get(connection_id)

    def remove(self, connection_id: int) -> None:
        """Its connection closed."""
        self._by_id.pop(connection_id, None)

    def label_of(self, connection_id: int) -> str:
        """How the user knows the Claude of connection ``connection_id`` ("" before it
        listens)."""
        claude = self._by_id.get(connection_id)
        return claude.label if claude is not None else ""

    @staticmethod
    async def terminals(editor: Editor) -> list[Terminal]:
        """The terminal buffers of ``editor`` that run a job (none if it cannot say)."""
        with contextlib.suppress(Exception):
            found = await editor.call_lua(CORE, "terminals")
            return [Terminal(t["buf"], t["pid"], str(t.get("name", "")),
                             str(t.get("label") or ""))
                    for t in found if isinstance(t, dict)
                    and isinstance(t.get("buf"), int) and isinstance(t.get("pid"), int)]
        return []

    async def relocate(self, editor: Editor) -> None:
        """A new Neovim took the (lingering) server over: the listening Claudes run in its
        terminals now (the adopted ones of their holders), whose buffers are not the last
        Neovim's; found again as when they started listening, or none."""
        claudes = [c for c in self._by_id.values() if c.listening]
        terminals = await self.terminals(editor)

        def locate_all() -> None:  # reads /proc
            for claude in claudes:
                claude.terminal = (self.terminal_of(claude.connection.client_pid, terminals)
                                   if claude.proven is not False else None)
        await trio.to_thread.run_sync(locate_all)
        for claude in claudes:
            claude.connection.label = claude.describe()
            claude.connection.terminal = claude.terminal.buffer if claude.terminal else None

    async def identify(self, claude: Claude, editor: Editor, sock: trio.socket.SocketType, *,
                       local: bool) -> None:
        """``claude`` starts listening: find the Neovim terminal it runs in, if any (``local``:
        its pid is this host's), name it, and tell the listeners. When it claims without proof
        the terminal of another that listens, it gets none and the user is told."""
        connection = claude.connection
        terminals: list[Terminal] = []
        # A remote Claude's pid is another host's: no terminal of Neovim runs it.
        if connection.client_pid is not None and local:
            terminals = await self.terminals(editor)
        try:
            client, server = sock.getpeername()[:2], sock.getsockname()[:2]
        except OSError:  # gone already
            client = server = None
        # In a thread: it reads /proc (off Linux, a parent pid is a `ps` run away).
        await trio.to_thread.run_sync(self.locate, claude, terminals, client, server)
        # No checkpoint from here until it listens: nobody else claims its terminal meanwhile.
        keeper = self.disputed(claude)
        if keeper is not None:
            claude.terminal = None
        if claude.proven is False:
            log.warning("client %d says it is pid %s, which does not hold its connection: "
                        "it is matched to no terminal", claude.id, connection.client_pid)
        connection.label = claude.describe()
        connection.terminal = claude.terminal.buffer if claude.terminal else None
        claude.listening = True
        log.info("client %d is %s (pid %s: %s)", claude.id, connection.label,
                 connection.client_pid, PROOF[claude.proven])
        for listener in self.listeners:
            listener(claude)
        if keeper is not None:
            editor.call_lua_soon(CORE, "tell", f"two Claudes claim one terminal: {keeper.label} "
                                 f"keeps it; the other is {claude.label}", "WARN")

    def locate(self, claude: Claude, terminals: Iterable[Terminal],
               client: Address | None = None, server: Address | None = None) -> None:
        """Where ``claude`` (its connection from ``client`` to ``server``) runs: its terminal
        among ``terminals`` (those whose job runs), unless its pid is proven not to hold the
        connection. Reads processes: call it from a thread."""
        pid = claude.connection.client_pid
        if pid is not None and client is not None and server is not None:
            claude.proven = self.holds(pid, client, server)
        claude.terminal = self.terminal_of(pid, terminals) if claude.proven is not False else None

    def disputed(self, claude: Claude) -> Claude | None:
        """The listening Claude that keeps the terminal ``claude`` claims without proof, if
        one runs there: the first keeps it (``claude`` does not listen yet)."""
        if claude.terminal is None or claude.proven:
            return None
        return next((c for c in self._by_id.values() if c.listening and c is not claude
                     and c.terminal is not None and c.terminal.buffer == claude.terminal.buffer),
                    None)

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

    def mention_target(self, recent_buffers: Sequence[int],
                       among: Container[int]) -> Claude | None:
        """Who gets an @-mention, of the Claudes whose ids are ``among`` (those ready for one):
        the Claude of the terminal visited last (``recent_buffers``, most recent first), else
        the most recently connected one; ``None`` with none."""
        ready = [c for c in self._by_id.values() if c.id in among]
        by_buffer = {c.terminal.buffer: c for c in ready if c.terminal}
        for buffer in recent_buffers:
            if buffer in by_buffer:
                return by_buffer[buffer]
        # The latest to connect, not to be identified: the pids of two are looked up at once.
        return max(ready, key=lambda c: c.id, default=None)
