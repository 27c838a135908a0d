"""Claude Code hooks: what each Claude is doing (working, waiting for the user, done), told by
the Claude itself.

A ``claude`` started by claude-nvim gets :func:`claude_settings` with ``--settings``: hooks of
``type: "mcp_tool"`` on the server ``"ide"``, so that each hook is a ``tools/call`` of the
hidden tool :data:`TOOL` on the IDE connection that claude already has, authenticated and
attributed to that connection's Claude (docs/protocol.md). :class:`Hooks` keeps each listening
Claude's state, publishes it into Neovim (``hooks.lua``: ``vim.g.claude_nvim_server.claudes``
and ``User ClaudeNvimWorking`` / ``ClaudeNvimWaiting`` / ``ClaudeNvimDone``) and hands every
event to its listeners (the review of Claude's turns). A hook never waits for Neovim: claude
waits for its answer on every tool call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import trio

from .._feature import JSON, Feature
from .._nvim.editor import Editor
from .._nvim.lua import shared_module
from .._wire import jsontext
from .._wire.constants import FILE_TOOLS

log = logging.getLogger(__name__)

MODULE = "claude_nvim.hooks"
TOOL = "claude_nvim_hook"
"""The hidden IDE tool the hooks call (``tools/claude_nvim_hook.py``)."""
TIMEOUT_SECONDS = 1
"""How long claude waits for a hook: on every tool call when the server is gone (it then goes
on, the hook failed: hooks fail open). An answer takes milliseconds."""
FILE_MATCHER = "|".join(FILE_TOOLS)
"""The hooks' matcher for the tools that write a file, whose text the server keeps before
they run."""

State = Literal["unknown", "working", "waiting", "done"]
STATES: tuple[State, ...] = ("unknown", "working", "waiting", "done")
"""``unknown``: no hook came yet (a claude started some other way has none), never a guess."""


def _hook(fields: Mapping[str, str]) -> JSON:
    # `input` is what claude sends as the tool's arguments, each string interpolated from the
    # event's JSON (`${tool_input.file_path}`; missing: ""). Without it the arguments are {}.
    return {"type": "mcp_tool", "server": "ide", "tool": TOOL, "timeout": TIMEOUT_SECONDS,
            "input": {"event": "${hook_event_name}", "session": "${session_id}", **fields}}


FILE_FIELDS = {"tool": "${tool_name}", "file": "${tool_input.file_path}",
               "notebook": "${tool_input.notebook_path}", "tool_use": "${tool_use_id}"}


def claude_settings() -> JSON:
    """What a claude gets with ``--settings`` (no secret: the hooks ride on its IDE connection)."""
    every = {"hooks": [_hook({})]}
    return {"hooks": {
        "UserPromptSubmit": [{"hooks": [_hook({"prompt": "${prompt}"})]}],
        "PreToolUse": [{"matcher": FILE_MATCHER, "hooks": [_hook(FILE_FIELDS)]}],
        # Every tool: after a permission prompt, the first tool done says claude works again.
        "PostToolUse": [{"hooks": [_hook(FILE_FIELDS)]}],
        "PermissionRequest": [every],
        "Notification": [{"hooks": [_hook({"type": "${notification_type}"})]}],
        "Stop": [every],
        "StopFailure": [every],
    }}


def settings_argument() -> str:
    """:func:`claude_settings` as the text after ``--settings``."""
    return jsontext.dumps(claude_settings()).decode()


@dataclass
class HookEvent:
    """One hook call, as the tool's arguments carry it (``""`` where claude had nothing)."""

    name: str
    """``hook_event_name``: UserPromptSubmit, PreToolUse, ..."""
    session: str = ""
    tool: str = ""
    path: str = ""
    """The file a file tool writes (Write/Edit's ``file_path``, NotebookEdit's
    ``notebook_path``), as claude names it: on Claude's host, where the server reads it. Who
    shows it in Neovim maps it there (``paths.to_neovim``, as the review does)."""
    tool_use: str = ""
    prompt: str = ""
    notification: str = ""

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any]) -> HookEvent:
        def text(key: str) -> str:
            value = arguments.get(key)
            return value if isinstance(value, str) else ""

        return cls(name=text("event"), session=text("session"), tool=text("tool"),
                   path=text("file") or text("notebook"), tool_use=text("tool_use"),
                   prompt=text("prompt"), notification=text("type"))


@dataclass
class ClaudeState:
    """One Claude as Neovim is told of it (``vim.g.claude_nvim_server.claudes``)."""

    id: int
    """Its connection's id."""
    state: State = "unknown"
    since: float = field(default_factory=time.time)
    terminal: int | None = None
    """The Neovim terminal buffer it runs in, if any."""
    pid: int | None = None
    label: str = ""
    turns: int = 0
    """Prompts it was given (UserPromptSubmit) since it connected."""
    listening: bool = False

    def entry(self) -> JSON:
        entry: JSON = {"id": self.id, "state": self.state, "since": self.since,
                       "label": self.label, "turns": self.turns}
        if self.terminal is not None:
            entry["terminal"] = self.terminal
        if self.pid is not None:
            entry["pid"] = self.pid
        return entry


NEXT_STATE: dict[str, State] = {
    "UserPromptSubmit": "working", "PreToolUse": "working", "PostToolUse": "working",
    "PermissionRequest": "waiting", "Stop": "done", "StopFailure": "done",
}
NOTIFICATION_STATE: dict[str, State] = {"permission_prompt": "waiting", "idle_prompt": "done"}

Listener = Callable[[JSON, JSON], Awaitable[None]]
"""Gets each hook, after the state changed: that Claude's entry and the event (a
:class:`HookEvent` as a dict: the features do not import one another)."""


class Hooks:
    """The listening Claudes' states, and who hears of each hook."""

    def __init__(self) -> None:
        self._claudes: dict[int, ClaudeState] = {}
        self._editor: Editor | None = None
        self.listeners: list[Listener] = []
        """Awaited in order on each hook, before claude gets its answer (a PreToolUse's
        listener may keep the file as it is before the tool writes it)."""

    def label_of(self, claude_id: int) -> str:
        """How the user knows the Claude of connection ``claude_id`` ("" before it listens)."""
        claude = self._claudes.get(claude_id)
        return claude.label if claude is not None else ""

    def entries(self) -> list[JSON]:
        return [c.entry() for c in self._claudes.values() if c.listening]

    def _claude(self, claude_id: int) -> ClaudeState:
        claude = self._claudes.get(claude_id)
        if claude is None:
            claude = self._claudes[claude_id] = ClaudeState(claude_id)
        return claude

    def _publish(self, claude: ClaudeState, event: bool) -> None:
        if self._editor is not None and claude.listening:
            # Never awaited: a busy Neovim must not hold claude's tool call up.
            self._editor.call_lua_soon(MODULE, "update", claude.entry(), event)

    def listening(self, claude_id: int, *, pid: int | None, terminal: int | None,
                  label: str) -> None:
        """A Claude listens now (it is one of the user's Claudes from now on)."""
        claude = self._claude(claude_id)
        claude.pid, claude.terminal, claude.label, claude.listening = pid, terminal, label, True
        self._publish(claude, False)

    def gone(self, claude_id: int) -> None:
        """Its connection closed."""
        claude = self._claudes.pop(claude_id, None)
        if claude is not None and claude.listening and self._editor is not None:
            self._editor.call_lua_soon(MODULE, "remove", claude_id)

    async def receive(self, claude_id: int, event: HookEvent) -> None:
        """A hook from the Claude on connection ``claude_id``: its state, then the listeners."""
        log.debug("client %d: hook %s %s %s", claude_id, event.name, event.tool, event.path)
        claude = self._claude(claude_id)
        new = (NOTIFICATION_STATE.get(event.notification) if event.name == "Notification"
               else NEXT_STATE.get(event.name))
        if event.name == "UserPromptSubmit":
            claude.turns += 1
        if new is not None and new != claude.state:
            claude.state, claude.since = new, time.time()
            self._publish(claude, True)
        entry, fields = claude.entry(), asdict(event)
        for listener in self.listeners:
            await listener(entry, fields)

    def attach(self, editor: Editor) -> None:
        self._editor = editor

    def detach(self) -> None:
        self._editor = None


class HooksFeature(Feature):
    """``claude_nvim.hooks``: each Claude's state in Neovim (``vim.g.claude_nvim_server.claudes``
    and the User events), from :class:`Hooks`."""

    lua = shared_module(__name__, "hooks")

    def __init__(self, hooks: Hooks) -> None:
        self.hooks = hooks

    async def start(self, editor: Editor, nursery: trio.Nursery) -> None:
        await super().start(editor, nursery)
        self.hooks.attach(editor)

    async def disconnected(self, editor: Editor, client_id: int) -> None:
        self.hooks.gone(client_id)

    def stop(self) -> None:
        self.hooks.detach()
