"""Claude Code hooks: what each Claude is doing (working, waiting for the user, done), told by
the Claude itself.

A ``claude`` started by claude-nvim gets :func:`claude_settings` with ``--settings``: hooks of
``type: "mcp_tool"`` on the server ``"ide"``, so that each hook is a ``tools/call`` of the
hidden tool :data:`TOOL` on the IDE connection that claude already has, authenticated and
attributed to that connection's Claude (docs/protocol.md). :class:`Hooks` keeps each Claude's
state in its record (:class:`~claude_nvim._claudes.Claude`), publishes it into Neovim
(``hooks.lua``: ``vim.g.claude_nvim_server.claudes`` and ``User ClaudeNvimWorking`` /
``ClaudeNvimWaiting`` / ``ClaudeNvimDone``) and hands every event to its listeners (the review
of Claude's turns). A hook never waits for Neovim: claude
waits for its answer on every tool call.
"""

from __future__ import annotations

import datetime
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import trio

from .._claudes import Claude, Claudes, State
from .._feature import JSON, Feature
from .._nvim.editor import Editor
from .._nvim.lua import shared_module
from .._tool import ConnectionInfo
from .._wire import jsontext
from .._wire.constants import FILE_TOOLS

log = logging.getLogger(__name__)

MODULE = "claude_nvim.hooks"
TOOL = "claude_nvim_hook"
"""The hidden IDE tool the hooks call (``tools/claude_nvim_hook.py``)."""
GUARD_SECONDS = 5
"""How long claude waits for a PreToolUse hook: in claude 2.1.332's Code Mode one that times
out refuses the tool call, so a slow but alive server must never be waited for that long. An
answer takes milliseconds (the server never waits for Neovim; the file it names is read only
within the size limit)."""
NOTICE_SECONDS = 2
"""How long claude waits for the other hooks (a timeout there refuses nothing). A frozen
server (stopped) costs a turn a timeout per hook; so does a dead one while claude tries to
reconnect to it (2.1.332 waits for the IDE connection up to the hook's timeout)."""
GUARDS = frozenset({"PreToolUse"})
WATCH_SECONDS = 1.0
"""How often the transcript of a working or waiting Claude is looked at (one fstat; its new
tail read only when it grew): claude says nothing of an interrupt but writes it there."""
TAIL_BYTES = 64 * 1024
INTERRUPTED_MARK = "[Request interrupted by user"
MAX_PATH = 4096
PUSH_SECONDS = 0.25
"""The states go to Neovim at most once in this long (the latest of each Claude): a flood of
hooks is never a flood of messages."""
PLAN_TOOL = "claude_nvim_plan"
"""The hidden IDE tool that shows a Claude's plan in Neovim when it asks to leave plan mode
(``tools/claude_nvim_plan.py``): its answer is the user's."""
PLAN_TIMEOUT_SECONDS = 3600
"""How long claude waits for the user's verdict on a plan in Neovim; then its own dialog."""
FILE_MATCHER = "|".join(FILE_TOOLS)
"""The hooks' matcher for the tools that write a file, whose text the server keeps before
they run."""


def _hook(event: str, fields: Mapping[str, str]) -> JSON:
    # `input` is what claude sends as the tool's arguments, each string interpolated from the
    # event's JSON (`${tool_input.file_path}`; missing: ""). Without it the arguments are {}.
    timeout = GUARD_SECONDS if event in GUARDS else NOTICE_SECONDS
    return {"type": "mcp_tool", "server": "ide", "tool": TOOL, "timeout": timeout,
            "input": {"event": "${hook_event_name}", "session": "${session_id}",
                      "transcript": "${transcript_path}", **fields}}


FILE_FIELDS = {"tool": "${tool_name}", "file": "${tool_input.file_path}",
               "notebook": "${tool_input.notebook_path}", "tool_use": "${tool_use_id}"}


def claude_settings() -> JSON:
    """What a claude gets with ``--settings`` (no secret: the hooks ride on its IDE connection).
    ``claude_settings.json`` beside this is it, for the Neovim plugin, which starts claude
    before the server runs (tests/test_activate.py checks that they agree)."""
    def every(event: str) -> list[JSON]:
        return [{"hooks": [_hook(event, {})]}]

    return {"hooks": {
        "UserPromptSubmit": [{"hooks": [_hook("UserPromptSubmit", {"prompt": "${prompt}"})]}],
        "PreToolUse": [{"matcher": FILE_MATCHER, "hooks": [_hook("PreToolUse", FILE_FIELDS)]}],
        # Every tool: after a permission prompt, the first tool done says claude works again.
        "PostToolUse": [{"hooks": [_hook("PostToolUse", FILE_FIELDS)]}],
        # A tool that failed (claude goes on), or was interrupted (the turn ends).
        "PostToolUseFailure": [{"hooks": [_hook("PostToolUseFailure", {
            "tool": "${tool_name}", "interrupt": "${is_interrupt}"})]}],
        "PermissionDenied": every("PermissionDenied"),  # auto mode refused a call: it goes on
        "PermissionRequest": [*every("PermissionRequest"), {"matcher": "ExitPlanMode", "hooks": [{
            "type": "mcp_tool", "server": "ide", "tool": PLAN_TOOL,
            "timeout": PLAN_TIMEOUT_SECONDS,
            "input": {"plan": "${tool_input.plan}", "file": "${tool_input.planFilePath}"}}]}],
        "Notification": [{"hooks": [_hook("Notification", {"type": "${notification_type}"})]}],
        "Stop": every("Stop"),
        "StopFailure": every("StopFailure"),
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
    interrupt: bool = False
    """PostToolUseFailure's ``is_interrupt``: the user interrupted the tool."""
    transcript: str = ""
    """The session's transcript (``transcript_path``), on Claude's host."""

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any]) -> HookEvent:
        def text(key: str) -> str:
            value = arguments.get(key)
            return value if isinstance(value, str) else ""

        return cls(name=text("event"), session=text("session"), tool=text("tool"),
                   path=text("file") or text("notebook"), tool_use=text("tool_use"),
                   prompt=text("prompt"), notification=text("type"),
                   interrupt=text("interrupt") == "true", transcript=text("transcript"))


INTERRUPTED = "Interrupted"
"""Not claude's: the server saw in the transcript that the user interrupted the turn (Esc,
or a permission refused in claude's terminal)."""
DIFF_REJECTED = "DiffRejected"
"""Not claude's: the server's own event when the user rejects a Claude's diff (in Neovim, or
in claude's terminal, which closes the diff). claude 2.1.332 then ends the turn and runs no
hook at all (no Stop, no PostToolUseFailure), the same for any refused permission prompt and
an interrupt (Esc): seen with the real CLI."""
NEXT_STATE: dict[str, State] = {
    "UserPromptSubmit": "working", "PreToolUse": "working", "PostToolUse": "working",
    "PostToolUseFailure": "working", "PermissionDenied": "working",
    "PermissionRequest": "waiting", "Stop": "done", "StopFailure": "done",
    DIFF_REJECTED: "done", INTERRUPTED: "done",
}
NOTIFICATION_STATE: dict[str, State] = {"permission_prompt": "waiting", "idle_prompt": "done"}

Listener = Callable[[Claude, JSON], Awaitable[None]]
"""Gets each hook, after the state changed: that Claude's record and the event (a
:class:`HookEvent` as a dict: the features do not import one another)."""


class Hooks:
    """The Claudes' states from their hooks (in their records), and who hears of each hook."""

    def __init__(self, claudes: Claudes | None = None,
                 push_seconds: float = PUSH_SECONDS) -> None:
        self.claudes = claudes if claudes is not None else Claudes()
        self.claudes.listeners.append(self._listening)
        self._editor: Editor | None = None
        self.push_seconds = push_seconds
        self._unpushed: dict[int, bool] = {}
        """Claudes whose entry changed since it was last pushed to Neovim (by id: whether its
        state changed)."""
        self._wake = trio.Event()
        self.listeners: list[Listener] = []
        """Awaited in order on each hook, before claude gets its answer (a PreToolUse's
        listener may keep the file as it is before the tool writes it)."""

    def entries(self) -> list[JSON]:
        return [c.entry() for c in self.claudes if c.listening]

    def _publish(self, claude: Claude, event: bool) -> None:
        # Pushed by push_states, never awaited: a busy Neovim must not hold claude's tool
        # call up, and a flood of hooks must not become a flood of messages.
        if claude.listening:
            self._unpushed[claude.id] = self._unpushed.get(claude.id, False) or event
            self._wake.set()

    async def push_states(self) -> None:
        """Send Neovim the changed entries, the latest of each Claude, at most once in
        ``push_seconds``. An entry whose state changed since the last push is announced (a User
        event) in its latest state: a state that came and went between two pushes is not."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            unpushed, self._unpushed = self._unpushed, {}
            for claude_id, changed in unpushed.items():
                claude = self.claudes.get(claude_id)
                if claude is None or self._editor is None:
                    continue
                self._editor.call_lua_soon(MODULE, "update", claude.entry(), changed)
            await trio.sleep(self.push_seconds)

    def _listening(self, claude: Claude) -> None:
        """A Claude listens now (it is one of the user's Claudes from now on)."""
        self._publish(claude, False)

    def gone(self, claude_id: int) -> None:
        """Its connection closed: Neovim forgets it (the server removes its record after the
        features let go of it)."""
        claude = self.claudes.get(claude_id)
        self._unpushed.pop(claude_id, None)
        if claude is not None and claude.listening:
            claude.listening = False  # never published again
            if self._editor is not None:
                self._editor.call_lua_soon(MODULE, "remove", claude_id)

    async def receive(self, claude_id: int, event: HookEvent) -> None:
        """A hook from the Claude on connection ``claude_id``: its state, then the listeners."""
        log.debug("client %d: hook %s %s %s", claude_id, event.name, event.tool, event.path)
        # A connection the server does not know (gone meanwhile) gets a record of this hook's.
        claude = self.claudes.get(claude_id) or Claude(ConnectionInfo(claude_id))
        claude.last_hook = time.time()
        if event.transcript and len(event.transcript) <= MAX_PATH:
            claude.transcript = event.transcript
        new = (NOTIFICATION_STATE.get(event.notification) if event.name == "Notification"
               else "done" if event.interrupt  # claude ends the turn
               else NEXT_STATE.get(event.name))
        if event.name == "UserPromptSubmit":
            claude.turns += 1
        if new is not None and new != claude.state:
            claude.state, claude.since = new, time.time()
            self._publish(claude, True)
        fields = asdict(event)
        for listener in self.listeners:
            await listener(claude, fields)

    async def watch_interrupts(self) -> None:
        """End the turn of a working or waiting Claude whose transcript says the user
        interrupted it after its last hook."""
        while True:
            await trio.sleep(WATCH_SECONDS)
            for claude in [c for c in self.claudes
                           if c.state in ("working", "waiting") and c.transcript]:
                try:
                    size, when = await trio.to_thread.run_sync(
                        interrupted_at, claude.transcript, claude.transcript_size)
                except OSError as exc:
                    log.debug("client %d: transcript: %s", claude.id, exc)
                    continue
                claude.transcript_size = size
                if when is not None and when > claude.last_hook \
                        and self.claudes.get(claude.id) is claude:
                    await self.receive(claude.id, HookEvent(INTERRUPTED))

    async def diff_rejected(self, claude_id: int) -> None:
        """The user rejected a diff of the Claude on connection ``claude_id``: its turn ends
        (claude says nothing of it); unless it has no hooks (its state stays ``unknown``)."""
        claude = self.claudes.get(claude_id)
        if claude is not None and claude.state != "unknown":
            await self.receive(claude_id, HookEvent(DIFF_REJECTED))

    def attach(self, editor: Editor) -> None:
        """Push to ``editor`` from now on, every listening Claude's entry to begin with."""
        self._editor = editor
        for claude in self.claudes:
            self._publish(claude, False)

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
        nursery.start_soon(self.hooks.push_states)
        nursery.start_soon(self.hooks.watch_interrupts)

    async def reattach(self, editor: Editor) -> None:
        await super().reattach(editor)
        self.hooks.attach(editor)  # every Claude's state again: the new Neovim knows none

    async def disconnected(self, editor: Editor, client_id: int) -> None:
        self.hooks.gone(client_id)

    def stop(self) -> None:
        self.hooks.detach()
        super().stop()


def interrupted_at(path: str, known_size: int) -> tuple[int, float | None]:
    """The transcript's size, and when its last message (``user`` or ``assistant``) was an
    interrupt's (as claude writes it: ``[Request interrupted by user...]``), if it was and the
    file changed from ``known_size``. Reads at most :data:`TAIL_BYTES`, never blocks on what
    is not a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size == known_size:
            return info.st_size, None
        tail = os.pread(fd, TAIL_BYTES, max(info.st_size - TAIL_BYTES, 0))
    finally:
        os.close(fd)
    for line in reversed(tail.splitlines()[1:] if len(tail) == TAIL_BYTES
                         else tail.splitlines()):
        try:
            entry = jsontext.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(entry, dict) or entry.get("type") not in ("user", "assistant"):
            continue
        return info.st_size, _interrupt_time(entry)
    return info.st_size, None


def _interrupt_time(entry: dict[str, Any]) -> float | None:
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    texts = [content] if isinstance(content, str) else [
        part.get("text") for part in content or [] if isinstance(part, dict)]
    if entry.get("type") != "user" or not any(
            isinstance(t, str) and t.startswith(INTERRUPTED_MARK) for t in texts):
        return None
    try:
        stamp = datetime.datetime.fromisoformat(str(entry.get("timestamp")))
    except ValueError:
        return None
    return stamp.timestamp()
