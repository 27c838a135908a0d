"""Follow: the file a Claude is about to write shows in the user's editor window, and once
written the cursor is on what changed (``follow.lua``: opts.follow, :ClaudeNvimFollow).

A listener of :class:`claude_nvim._hooks.Hooks` (``_app.built_in`` wires it). While Neovim
follows (it says so: :data:`ENABLED`), a file tool's PreToolUse makes the server read the file
(in a thread, before claude gets the hook's answer and writes) and tells Neovim without
waiting; its PostToolUse reads it again and tells Neovim which lines changed. Neovim decides
the rest: whether to follow that Claude, now or once the user pauses.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from .._feature import JSON, Feature, NotificationHandler
from .._nvim.lua import shared_module

if TYPE_CHECKING:
    from .._claudes import Claude
    from .._nvim.editor import Editor

log = logging.getLogger(__name__)

MODULE = "claude_nvim.follow"
ENABLED = "claude_nvim_follow"
"""Lua -> server: (on): whether Neovim follows Claude's edits now."""
FILE_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
"""The tools that write the file they name (as the hooks' matcher has them)."""
MAX_WRITING = 64
"""Writes begun and not finished that are remembered (a tool that failed has no PostToolUse)."""


def changed_lines(before: bytes | None, after: bytes | None) -> tuple[int, int] | None:
    """The first and last line (1-based) of ``after`` that differ from ``before``; None when
    nothing did. Linear: the common head and tail are skipped, nothing more."""
    old, new = (before or b"").split(b"\n"), (after or b"").split(b"\n")
    if old == new:
        return None
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return head + 1, max(head + 1, len(new) - tail)


def read(path: str, limit: int) -> bytes | None:
    """The regular file's bytes, None when there is none or it is over ``limit``."""
    try:
        file = Path(path)
        if not file.is_file() or file.stat().st_size > limit:
            return None
        return file.read_bytes()
    except OSError:
        return None


class FollowFeature(Feature):
    """``claude_nvim.follow``: Claude's file writes, as they happen, for Neovim to follow."""

    lua = shared_module(__name__, "follow")

    def __init__(self, max_file_bytes: int) -> None:
        self.max_file_bytes = max_file_bytes
        self.on = False
        """Whether Neovim follows (it says so at setup and whenever that changes)."""
        self._writing: dict[str, bytes | None] = {}
        """The bytes before each write begun (by tool use id)."""

    def notifications(self) -> Mapping[str, NotificationHandler]:
        return {ENABLED: self._enabled}

    def options(self, editor: Editor) -> JSON:
        return {"enabled": ENABLED}

    def _enabled(self, args: list[Any]) -> None:
        self.on = bool(args and args[0])
        if not self.on:
            self._writing.clear()

    async def on_hook(self, claude: Claude, event: JSON) -> None:
        name, path = event["name"], event["path"]
        if not self.on or self.editor is None or event["tool"] not in FILE_TOOLS or not path \
                or name not in ("PreToolUse", "PostToolUse"):
            return
        who = claude.entry()  # as it is at this hook
        data = await trio.to_thread.run_sync(read, path, self.max_file_bytes)
        where = self.paths.to_neovim(path)
        if name == "PreToolUse":
            if len(self._writing) >= MAX_WRITING:
                self._writing.clear()
            self._writing[event["tool_use"]] = data
            # Never awaited: a busy Neovim must not hold claude's tool call up.
            self.editor.call_lua_soon(MODULE, "writing", who, where)
        else:
            lines = changed_lines(self._writing.pop(event["tool_use"], None), data)
            self.editor.call_lua_soon(MODULE, "written", who, where,
                                       list(lines) if lines else None)
