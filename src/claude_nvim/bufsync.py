"""Buffers follow their files: the ``claude_nvim.bufsync`` Lua module (``lua/bufsync.lua``).

Claude Code writes files itself (its auto and acceptEdits modes, Bash). A loaded file buffer
with no unsaved changes shows the new text at once, with no prompt; one with unsaved changes
is never touched, and the user gets one warning naming the file; so does a buffer whose file
was deleted. The work is all in Neovim: libuv watchers, one per directory, nothing when idle.
"""

from __future__ import annotations

from pathlib import Path

MODULE = "claude_nvim.bufsync"
PATH = Path(__file__).parent / "lua" / "bufsync.lua"
LUA = PATH.read_text(encoding="utf-8")
CHUNKNAME = f"@{PATH}"
"""Lua's name for the code: its errors and tracebacks name the file."""
