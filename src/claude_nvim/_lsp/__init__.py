"""The LSP tools' shared Lua: ``lsp.lua`` (``claude_nvim.lsp``), which asks the user's language
servers without blocking Neovim; the answers come back later (:mod:`.replies`). What the
``lsp*`` tools share on the Python side is in :mod:`claude_nvim.tools._lsp_tools`."""

from __future__ import annotations

from collections.abc import Mapping

from .._feature import Feature, NotificationHandler
from .._nvim.lua import shared_module
from .replies import EVENT, Replies


class LspFeature(Feature):
    """``claude_nvim.lsp``: the one copy of what the ``lsp*`` tools' Lua requires; its
    ``stop()`` cancels the requests still waiting for a language server. Its answers come as
    ``claude_nvim_reply`` notifications, for ``replies``."""

    lua = shared_module(__name__, "lsp")

    def __init__(self, replies: Replies) -> None:
        self.replies = replies

    def notifications(self) -> Mapping[str, NotificationHandler]:
        return {EVENT: self.replies.on_reply}
