"""Buffers follow their files: ``bufsync.lua`` (``claude_nvim.bufsync``)."""

from __future__ import annotations

from .._feature import Feature
from .._nvim.lua import shared_module


class BufsyncFeature(Feature):
    """``claude_nvim.bufsync``: buffers follow their files. Claude Code writes files itself
    (its auto and acceptEdits modes, Bash): a loaded file buffer with no unsaved changes shows
    the new text at once, with no prompt; one with unsaved changes is never touched, and the
    user gets one warning naming the file; so does a buffer whose file was deleted. The work is
    all in Neovim (libuv watchers, one per directory, nothing when idle): warnings go through
    ``core.tell``, errors through ``core.log``."""

    lua = shared_module(__name__, "bufsync")
