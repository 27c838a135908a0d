"""The core feature: ``core.lua`` (``claude_nvim.core``), what every other Lua module requires:
the helpers tools use, the guarded channel back to the server, the file times, the workspace
folders, the environment for ``claude`` (Neovim as its editor: ``claude_editor.lua``) and
switching it all off. On this side: Lua's log lines, and the size limit on files a tool may
make Neovim load."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .._feature import JSON, Feature, NotificationHandler
from .._nvim.editor import Editor
from .._nvim.lua import shared_module

log = logging.getLogger("claude_nvim.server")

EDITOR_SCRIPT = Path(__file__).with_name("claude_editor.lua")
"""What claude runs as its editor, in a headless nvim: it opens the file in this Neovim."""

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

    lua = shared_module(__name__, "core")
    lua_parts = (shared_module(__name__, "tell"), shared_module(__name__, "codec"),
                 shared_module(__name__, "reload"))

    def __init__(self, max_file_bytes: int, on_folders: Callable[[list[str]], None]) -> None:
        self.max_file_bytes = max_file_bytes
        self._on_folders = on_folders

    def notifications(self) -> Mapping[str, NotificationHandler]:
        return {"claude_nvim_folders": self._folders, "claude_nvim_log": self._log}

    def options(self, editor: Editor) -> JSON:
        return {"chan": editor.channel_id, "max_file_bytes": self.max_file_bytes,
                "editor_script": str(EDITOR_SCRIPT)}

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


MAX_FILE_MB = 50.0
"""The largest file, in MB, that a tool may make Neovim load, unless $CLAUDE_NVIM_MAX_FILE_MB
says otherwise: the Lua ``M.unloadable``'s limit."""


def max_file_bytes(megabytes: float | None = None) -> int:
    """The file size limit in bytes: ``megabytes`` MB, by default $CLAUDE_NVIM_MAX_FILE_MB's."""
    if megabytes is None:
        setting = os.environ.get("CLAUDE_NVIM_MAX_FILE_MB", "").strip()
        try:
            megabytes = float(setting) if setting else MAX_FILE_MB
        except ValueError:
            megabytes = math.nan
        if not 0 < megabytes < math.inf:
            log.warning("CLAUDE_NVIM_MAX_FILE_MB=%r is not a number of megabytes: using %g",
                        setting, MAX_FILE_MB)
            megabytes = MAX_FILE_MB
    if not 0 < megabytes < math.inf:
        raise ValueError(f"the file size limit must be a positive number of MB, not {megabytes}")
    return min(int(megabytes * 2**20), 2**53)  # Lua's numbers are doubles


class CommandsFeature(Feature):
    """``claude_nvim.user_commands``: the user commands (:ClaudeNvimSend, :ClaudeNvimAdd,
    :ClaudeNvimDiffAccept, :ClaudeNvimDiffDeny), defined once for the server and the Neovim
    plugin: the server defines those the plugin has not."""

    lua = shared_module(__name__, "user_commands")
