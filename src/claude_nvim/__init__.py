"""claude-nvim: the Claude Code IDE integration server for Neovim.

The plugin API (docs/plugins.md): a tool package implements ``claude_nvim_register_tools``
with :data:`hookimpl` and registers :class:`Tool` records. Everything a plugin needs is
exported here; ``claude_nvim.testing`` is the pytest plugin for its tests.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing costs a claude-nvim command ~15 ms of start-up; see __getattr__
if TYPE_CHECKING:
    from typing import Any

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

# Each name from its module when first asked for (PEP 562): the package itself loads nothing,
# so a command that needs none of it (`claude-nvim hold`, the command of every held Claude's
# terminal) starts in a third of the time and memory.
_HOMES = {
    "OutsideMap": "_paths", "PathMap": "_paths", "candidate_paths": "_paths",
    "file_url": "_paths", "SchemaError": "_schema", "ConnectionInfo": "_tool",
    "Exposure": "_tool", "Register": "_tool", "Tool": "_tool", "ToolContext": "_tool",
    "ToolError": "_tool", "ToolResult": "_tool", "error_result": "_tool",
    "json_result": "_tool", "text_result": "_tool", "hookimpl": "hookspecs",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'claude_nvim' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


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
