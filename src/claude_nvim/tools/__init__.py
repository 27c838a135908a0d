"""The built-in tools, one module each; what two or more of them share is here."""

from __future__ import annotations

from .._tool import ToolResult, json_result

FILE_PATH_INPUT = {
    "type": "object",
    "properties": {"filePath": {"type": "string", "description": "The file's path"}},
    "required": ["filePath"],
}
"""The input of the tools that act on one open document."""


def not_open(path: str) -> ToolResult:
    """The answer (as VS Code gives it) when the document ``path`` is not open in Neovim."""
    return json_result({"success": False, "message": f"Document not open: {path}"})
