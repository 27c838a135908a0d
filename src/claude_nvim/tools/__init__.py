"""The built-in tools, one module each; what two or more of them share is here."""

from __future__ import annotations

from collections.abc import Sequence

from .._tool import JSON, ToolError, ToolResult, json_result
from ._lsp_tools import ordered

FILE_PATH_INPUT = {
    "type": "object",
    "properties": {"filePath": {"type": "string", "description": "The file's path"}},
    "required": ["filePath"],
}
"""The input of the tools that act on one open document."""


def not_open(path: str) -> ToolResult:
    """The answer (as VS Code gives it) when the document ``path`` is not open in Neovim."""
    return json_result({"success": False, "message": f"Document not open: {path}"})


def lua_answer(answer: JSON, order: Sequence[str]) -> ToolResult:
    """A tool's Lua answer as its result: ``{"error": why}`` fails the call with ``why``,
    anything else is sent as JSON, every object's keys in ``order`` (Lua tables have none)."""
    if "error" in answer:
        raise ToolError(answer["error"])
    return json_result(ordered(answer, order))
