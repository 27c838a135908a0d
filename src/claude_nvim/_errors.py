"""The errors every layer may raise: at the bottom, so any module can import them.

The MCP layer turns them into tool results (``isError: true``): a :class:`ToolError` or an
editor error with its message, :class:`EditorGone` as "Neovim went away".
"""

from __future__ import annotations


class ToolError(Exception):
    """Raised by a handler for a failure the caller should read: becomes ``isError: true``."""


class EditorGone(Exception):
    """Neovim closed the RPC connection (it quit, crashed, or was never reachable)."""


class EditorError(Exception):
    """Neovim answered a request with an error (a Lua error, a bad API call)."""


class EditorTimeout(Exception):
    """Neovim did not answer in time: it is busy or waiting for the user's input."""


def leaf_errors(error: BaseException) -> list[BaseException]:
    """The exceptions inside ``error``'s (nested) groups, in order: what trio's tasks raised."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaf_errors(inner)]
    return [error]
