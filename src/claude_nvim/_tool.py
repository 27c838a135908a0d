"""What a tool is: its record, the context its handler gets, and its result helpers."""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ._big_reads import BigReads
from ._errors import ToolError as ToolError
from ._paths import PathMap
from ._schema import Checker, SchemaError, compile_checker
from ._wire import jsontext
from ._wire.jsontext import JSON as JSON

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from ._nvim.editor import Editor


class Exposure(enum.Flag):
    """Where a tool is listed and callable (docs/protocol.md §8)."""

    IDE = enum.auto()
    """The IDE socket: the calls the ``claude`` CLI makes by itself (openDiff, ...)."""
    MODEL = enum.auto()
    """The model endpoint (``/mcp``): tools Claude's model calls as ``mcp__nvim__<name>``."""
    BOTH = IDE | MODEL


IDE, MODEL, BOTH = Exposure.IDE, Exposure.MODEL, Exposure.BOTH
ToolResult = JSON
Handler = Callable[["ToolContext", JSON], Awaitable[ToolResult]]


Register = Callable[["Tool"], None]
"""The ``register`` callback a ``claude_nvim_register_tools`` hook receives."""


@dataclass(frozen=True)
class Tool:
    """One MCP tool: its wire description, its async handler and its Neovim half."""

    name: str
    """The MCP tool name; for built-ins it is also the entry-point name."""
    input_schema: Mapping[str, Any]
    """A JSON Schema object (draft-07 unless ``$schema`` says otherwise); arguments are
    checked against it before the handler runs."""
    handler: Handler
    description: str | None = None
    """``None`` hides the tool from ``tools/list``; it stays callable."""
    annotations: Mapping[str, Any] | None = None
    """MCP annotations: title, readOnlyHint, destructiveHint, idempotentHint, openWorldHint."""
    lua: str | None = None
    """A Lua chunk returning a table; installed as ``package.loaded[tool.lua_module]``."""
    exposure: Exposure = Exposure.MODEL
    """Who may call it: :attr:`Exposure.IDE` (the CLI's IDE socket), :attr:`Exposure.MODEL`
    (the model endpoint) or :attr:`Exposure.BOTH`. Tools the CLI itself calls are IDE; context
    tools are both."""
    plugin: str | None = None
    """The plugin that registered the tool, filled in by :func:`collect_tools`."""

    @cached_property
    def check_arguments(self) -> Checker:
        """The compiled check of ``input_schema``: a message naming the first problem, or None.

        Raises :class:`SchemaError` naming the tool if ``input_schema`` is not valid.
        """
        try:
            return compile_checker(self.input_schema)
        except SchemaError as exc:
            raise SchemaError(f"tool {self.name!r}: input_schema is not valid JSON Schema: "
                              f"{exc}") from exc

    @property
    def lua_module(self) -> str:
        return f"claude_nvim.tools.{self.name}"

    def describe(self) -> JSON:
        """The entry for ``tools/list``."""
        entry: JSON = {
            "name": self.name,
            "description": self.description,
            "inputSchema": dict(self.input_schema),
        }
        if self.annotations:
            entry["annotations"] = dict(self.annotations)
        return entry


@dataclass
class ConnectionInfo:
    """Who is calling: one WebSocket connection, one MCP session."""

    id: int
    client_pid: int | None = None
    client_info: Mapping[str, Any] = field(default_factory=dict)
    label: str | None = None
    """How the user knows this Claude in Neovim ("the Claude in terminal buffer 5"), once it
    listens for notifications; ``None`` before, and for the model endpoint."""
    terminal: int | None = None
    """The Neovim terminal buffer this Claude runs in, once known (its name there may change:
    Lua reads it from the buffer)."""


@dataclass(kw_only=True)
class ToolContext:
    """Everything a handler may use (docs/plugins.md), built by keywords. Handlers talk to
    Neovim only through ``editor``."""

    tool: Tool
    editor: Editor
    connection: ConnectionInfo
    log: logging.Logger
    big_reads: BigReads
    """The server's one slot for answers of megabytes; see :meth:`big_read`."""
    paths: PathMap = field(default_factory=PathMap)
    """Where Claude's paths are in Neovim and back (``serve --path-map``): a path from the
    arguments goes to Neovim as ``ctx.paths.candidates(path)`` (or ``ctx.paths.to_neovim``), one
    in an answer goes back as ``ctx.paths.to_claude(path)`` (or ``to_claude_fields(answer)``).
    With a map (a Claude on another host) it is a boundary: a path outside the mapped folders
    raises :class:`OutsideMap` going in (the call fails with its sentence), and going back is
    ``None`` (send nothing of that file)."""

    async def call_lua(self, fn: str, *args: Any) -> Any:
        """Call ``fn`` of this tool's own Lua module in Neovim: one RPC round trip."""
        return await self.editor.call_lua(self.tool.lua_module, fn, *args)

    def big_read(self) -> AbstractAsyncContextManager[None]:
        """``async with ctx.big_read():`` around reading an answer that may be megabytes.

        The server reads and sends such answers one at a time, so that many of them never pile
        up in memory: the slot is kept until this call's answer has been sent. Taking it again
        in the same call is free.
        """
        return self.big_reads.read()


def text_result(*texts: str) -> ToolResult:
    """A tool result made of text items, in order."""
    return {"content": [{"type": "text", "text": t} for t in texts]}


def json_result(value: Any) -> ToolResult:
    """A tool result holding ``value`` as compact JSON text."""
    return text_result(jsontext.dumps(value).decode("utf-8"))


def error_result(message: str) -> ToolResult:
    """A tool result with ``isError: true``."""
    return {**text_result(message), "isError": True}
