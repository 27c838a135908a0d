"""The built-in features: each part of claude-nvim with a Neovim half, as the App runs it.

Their Lua is in ``claude_nvim/lua/``; the work on the server's side in the modules they name
(:mod:`~claude_nvim.selection`, :mod:`~claude_nvim.diffs`, :mod:`~claude_nvim.mentions`,
:mod:`~claude_nvim.outboxes`). :class:`~claude_nvim.feature.Feature` says what a feature is.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

import trio

from . import diffs, mentions, selection
from .editor import Editor
from .feature import JSON, Feature, NotificationHandler, Send
from .lua_util import shared_module
from .mcp import notification
from .outboxes import Outboxes

log = logging.getLogger("claude_nvim.server")

# Lua's level names and vim.log.levels numbers (TRACE = 0 ... ERROR = 4), syslog's names,
# and no level at all.
LUA_LOG_LEVELS: dict[str | int | None, int] = {
    "trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
    "notice": logging.INFO, "warn": logging.WARNING, "warning": logging.WARNING,
    "error": logging.ERROR, "critical": logging.CRITICAL, "fatal": logging.CRITICAL,
    0: logging.DEBUG, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR,
    None: logging.ERROR,
}


class CoreFeature(Feature):
    """``claude_nvim.core``: the helpers every module uses, the file times, the workspace
    folders (``on_folders`` gets them when they change) and Lua's log lines."""

    lua = shared_module("core")

    def __init__(self, max_file_bytes: int, on_folders: Callable[[list[str]], None]) -> None:
        self.max_file_bytes = max_file_bytes
        self._on_folders = on_folders

    def notifications(self) -> Mapping[str, NotificationHandler]:
        return {"claude_nvim_folders": self._folders, "claude_nvim_log": self._log}

    def options(self, editor: Editor) -> JSON:
        return {"chan": editor.channel_id, "max_file_bytes": self.max_file_bytes}

    def _folders(self, args: list[Any]) -> None:
        if args and isinstance(args[0], list):
            self._on_folders([str(f) for f in args[0]])

    def _log(self, args: list[Any]) -> None:
        level, message = [*args, None, ""][:2]
        key = level.lower() if isinstance(level, str) else level if isinstance(level, int) else None
        number = LUA_LOG_LEVELS.get(key)
        if number is None:  # a level nobody knows: the message still gets through
            log.warning("Neovim: %s (level %r)", message, level)
        else:
            log.log(number, "Neovim: %s", message)


class LspFeature(Feature):
    """``claude_nvim.lsp``: the one copy of what the ``lsp*`` tools' Lua requires; its
    ``stop()`` cancels the requests still waiting for a language server."""

    lua = shared_module("lsp")


class SelectionFeature(Feature):
    """``claude_nvim.selection``: Neovim sends the selection as it changes; each IDE client
    gets the newest state it has not had (``selection_changed``)."""

    lua = shared_module("selection")

    def __init__(self) -> None:
        self.tracker = selection.SelectionTracker()

    def notifications(self) -> Mapping[str, NotificationHandler]:
        return {selection.NOTIFICATION: self._update}

    def options(self, editor: Editor) -> JSON:
        return {"cap": selection.TEXT_CAP, "window_ms": selection.WINDOW_MS,
                "lua_rows": selection.LUA_ROWS, "event": selection.NOTIFICATION}

    def _update(self, args: list[Any]) -> None:
        if args and isinstance(args[0], dict):
            self.tracker.update(args[0])

    async def push(self, send: Send) -> None:
        version = 0
        while True:
            version, payload = await self.tracker.wait_newer(version)
            if not await send(notification("selection_changed", payload)):
                return


class DiffsFeature(Feature):
    """``claude_nvim.diffs``: the diff tabs openDiff opens; the user's verdicts settle them in
    ``registry``, and a client's diffs close when it goes."""

    lua = shared_module("diffs")

    def __init__(self, registry: diffs.DiffRegistry) -> None:
        self.registry = registry

    def notifications(self) -> Mapping[str, NotificationHandler]:
        return {diffs.NOTIFICATION: self._settle}

    def options(self, editor: Editor) -> JSON:
        return {"event": diffs.NOTIFICATION}

    def _settle(self, args: list[Any]) -> None:
        diff_id, status, result = [*args, None, None, None][:3]
        if isinstance(diff_id, int) and status in ("accepted", "rejected"):
            self.registry.settle(diff_id, status, result)

    async def disconnected(self, editor: Editor, client_id: int) -> None:
        # Pending diffs were rejected and closed when their calls were cancelled; accepted
        # ones still wait for a close_tab that will never come.
        for diff in self.registry.owned_by(client_id):
            self.registry.forget(diff.id)
            with trio.move_on_after(2, shield=True), contextlib.suppress(Exception):
                # reload: the CLI may have written an accepted file just before it went.
                await editor.call_lua(diffs.MODULE, "close", diff.id, True, timeout=2)


class MentionsFeature(Feature):
    """``claude_nvim.mentions``: the user's :ClaudeNvimSend and :ClaudeNvimAdd, sent to one IDE
    client as ``at_mentioned``: the Claude of the terminal the user was in last (queued in
    ``outboxes`` while there is none)."""

    lua = shared_module("mentions")

    def __init__(self, outboxes: Outboxes) -> None:
        self.outboxes = outboxes
        self._nursery: trio.Nursery | None = None

    def notifications(self) -> Mapping[str, NotificationHandler]:
        return {mentions.NOTIFICATION: self._mention}

    def options(self, editor: Editor) -> JSON:
        return {"event": mentions.NOTIFICATION}

    async def start(self, editor: Editor, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        await super().start(editor, nursery)

    def _mention(self, args: list[Any]) -> None:
        mention, recent = [*args, None, None][:2]
        if self._nursery is not None and isinstance(mention, dict):
            buffers = [b for b in recent if isinstance(b, int)] if isinstance(recent, list) else []
            self.outboxes.send_mention(notification("at_mentioned", mention), buffers,
                                       self._nursery)


class CommandsFeature(Feature):
    """``claude_nvim.commands``: the user commands (:ClaudeNvimSend, :ClaudeNvimAdd,
    :ClaudeNvimDiffAccept, :ClaudeNvimDiffDeny), defined once for the server and the Neovim
    plugin: the server defines those the plugin has not."""

    lua = shared_module("commands")


class BufsyncFeature(Feature):
    """``claude_nvim.bufsync``: buffers follow their files. Claude Code writes files itself
    (its auto and acceptEdits modes, Bash): a loaded file buffer with no unsaved changes shows
    the new text at once, with no prompt; one with unsaved changes is never touched, and the
    user gets one warning naming the file; so does a buffer whose file was deleted. The work is
    all in Neovim (libuv watchers, one per directory, nothing when idle): warnings go through
    ``core.tell``, errors through ``core.log``."""

    lua = shared_module("bufsync")


def built_in(*, max_file_bytes: int, on_folders: Callable[[list[str]], None],
             diff_registry: diffs.DiffRegistry, outboxes: Outboxes) -> list[Feature]:
    """The features the App runs, in order: core first (the others' Lua requires it)."""
    return [CoreFeature(max_file_bytes, on_folders), LspFeature(), SelectionFeature(),
            DiffsFeature(diff_registry), MentionsFeature(outboxes), CommandsFeature(),
            BufsyncFeature()]
