"""claude-nvim: the Claude Code IDE integration server for Neovim.

The plugin API (docs/plugins.md): a tool package implements ``claude_nvim_register_tools``
with :data:`hookimpl` and registers :class:`Tool` records. Everything a plugin needs is
exported here; ``claude_nvim.testing`` is the pytest plugin for its tests.
"""

from ._paths import OutsideMap, PathMap, candidate_paths, file_url
from ._schema import SchemaError
from ._tool import (
    ConnectionInfo,
    Exposure,
    Register,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    error_result,
    json_result,
    text_result,
)
from .hookspecs import hookimpl

# The only place the version is written: pyproject.toml reads it (dynamic), the server reports it.
__version__ = "0.2.0"

__all__ = [
    "ConnectionInfo",
    "Exposure",
    "OutsideMap",
    "PathMap",
    "Register",
    "SchemaError",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "__version__",
    "candidate_paths",
    "error_result",
    "file_url",
    "hookimpl",
    "json_result",
    "text_result",
]
