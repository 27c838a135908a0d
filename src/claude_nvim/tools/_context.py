"""The built-in tools' context: what they use beyond the public :class:`ToolContext`."""

from __future__ import annotations

from dataclasses import dataclass

from .._diffs import DiffRegistry
from .._hooks import Hooks
from .._lsp.replies import Replies
from .._tool import ToolContext


@dataclass(kw_only=True)
class BuiltinContext(ToolContext):
    """The built-in tools' context: the public :class:`ToolContext` and the features' state
    they act on, which is no third party's contract. The server hands it to every tool."""

    diffs: DiffRegistry
    """The diff tabs of openDiff (open_diff, close_tab, close_all_diff_tabs)."""
    replies: Replies
    """Answers the tools' Lua sends later (a language server's: the lsp_* tools)."""
    hooks: Hooks
    """Where claude's hooks go (claude_nvim_hook)."""


def builtin(ctx: ToolContext) -> BuiltinContext:
    """``ctx`` as the built-ins' context it is (the server builds no other)."""
    if not isinstance(ctx, BuiltinContext):
        raise TypeError(f"{ctx.tool.name} is a built-in tool: it needs the server's context")
    return ctx
