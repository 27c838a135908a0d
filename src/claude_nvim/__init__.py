"""claude-nvim: the Claude Code IDE integration server for Neovim.

The plugin API: a tool package implements ``claude_nvim_register_tools`` with
:data:`hookimpl` and registers :class:`Tool` records.
"""

from .hookspecs import hookimpl
from .tool import (
    ConnectionInfo,
    Register,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    error_result,
    json_result,
    text_result,
)

__version__ = "0.1.0"

__all__ = [
    "ConnectionInfo",
    "Register",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "__version__",
    "error_result",
    "hookimpl",
    "json_result",
    "text_result",
]
