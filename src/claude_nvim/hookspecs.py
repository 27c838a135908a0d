"""The plugin contract: the pluggy markers and the one hook a tool package implements."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from ._tool import Tool

PROJECT = "claude_nvim"
"""The pluggy project name, and the entry-point group plugins are found in."""

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def claude_nvim_register_tools(register: Callable[[Tool], None]) -> None:
    """Register MCP tools by calling ``register(tool)`` once per :class:`~claude_nvim.Tool`.

    Called once at server start. Tool names must be unique across all plugins:
    a duplicate stops the server with an error naming both plugins.
    """
