"""What the LSP tools share: asking the user's language servers, in Lua, without blocking.

Each ``lsp*`` tool's Lua module requires the one shared ``claude_nvim.lsp`` (``_lsp/lsp.lua``)
and defines its own ``M.run(id, req)`` with ``L.run``, which opens the file if needed (a hidden
buffer), waits briefly for a language server to attach, sends the request to every attached
server that supports the method, and answers through :mod:`claude_nvim._lsp.replies` once all of
them have answered: Neovim never waits.

Answers follow the protocol conventions: 0-based lines, UTF-16 characters whatever encoding
the server negotiated, ``file://`` + path URIs without percent-encoding, lists capped with
``"truncated": true`` and the ``total`` count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._paths import OutsideMap
from .._tool import JSON, ToolContext, ToolError, ToolResult, json_result
from ._context import builtin


@dataclass(frozen=True)
class Limits:
    """What an LSP tool waits for and answers at most; each ``lsp*`` tool module's
    ``make_tool(limits)`` makes the tool with other limits (the descriptions say them)."""

    request_timeout: float = 15.0
    """Seconds a call may take in all: the wait for a server to start plus its answer."""
    attach_wait: float = 10.0
    """Seconds to wait for a language server that is still starting (initializing)."""
    fresh_wait: float = 1.0
    """Seconds to wait for some server to attach to a file the tool has just loaded itself."""
    max_locations: int = 200
    max_symbols: int = 500
    max_hover_bytes: int = 100_000


DEFAULT_LIMITS = Limits()

ANNOTATIONS_READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}

FILE_PATH = {
    "type": "string",
    "description": (
        "The file: an absolute path, a path relative to Neovim's cwd, or a file:// URI. "
        "A file not open in Neovim is loaded into a hidden buffer."
    ),
}
MAX_INDEX = 2**31 - 1
"""LSP's ``uinteger``: also keeps numbers within what Neovim's integers hold."""
LINE = {"type": "integer", "minimum": 0, "maximum": MAX_INDEX, "description": "0-based line."}
CHARACTER = {
    "type": "integer",
    "minimum": 0,
    "maximum": MAX_INDEX,
    "description": "0-based column in UTF-16 code units (as in LSP).",
}
POSITION_SCHEMA: JSON = {
    "type": "object",
    "properties": {"filePath": FILE_PATH, "line": LINE, "character": CHARACTER},
    "required": ["filePath", "line", "character"],
}


def file_request(ctx: ToolContext, args: JSON) -> JSON:
    """The Lua request for ``args["filePath"]`` (and ``line``/``character`` when given)."""
    path = args["filePath"]
    if not path.strip():
        raise ToolError("Invalid arguments: 'filePath' must not be empty")
    request: JSON = {"candidates": ctx.paths.candidates(path)}
    for key in ("line", "character"):
        if key in args:
            request[key] = args[key]
    return request


async def run(ctx: ToolContext, request: JSON, limits: Limits = DEFAULT_LIMITS) -> ToolResult:
    """Run the tool's Lua ``M.run(reply_id, request)`` and answer with its value as JSON."""
    bounds = {
        "attach_ms": int(limits.attach_wait * 1000),
        "fresh_ms": int(limits.fresh_wait * 1000),
        "max_locations": limits.max_locations,
        "max_symbols": limits.max_symbols,
        "max_hover": limits.max_hover_bytes,
    }
    value: Any = await builtin(ctx).replies.call(ctx.editor, ctx.tool.lua_module, "run",
                                        {**request, **bounds}, timeout=limits.request_timeout)
    answer = ctx.paths.to_claude_fields(value)  # locations outside the map are left out
    if answer is None:
        raise OutsideMap("the file's buffer is outside the mapped folders")
    return json_result(ordered(answer))


KEY_ORDER = ("uri", "name", "kind", "containerName", "detail", "range", "start", "end", "line",
             "character", "text", "contents", "locations", "symbols")


def ordered(value: Any, order: Sequence[str] = KEY_ORDER) -> Any:
    """``value`` with every object's keys in ``order`` (others after, sorted): Lua tables
    have no order, and a stable, readable one serves the model better."""
    if isinstance(value, dict):
        rank = {key: i for i, key in enumerate(order)}
        keys = sorted(value, key=lambda k: (rank.get(k, len(rank)), k))
        return {k: ordered(value[k], order) for k in keys}
    if isinstance(value, list):
        return [ordered(v, order) for v in value]
    return value


LUA_HEADER = """local api = vim.api
local core = require('claude_nvim.core')
local L = require('claude_nvim.lsp')
local M = { cancel = L.cancel }
"""


def lua_module(body: str) -> str:
    """A tool's whole Lua module: its ``body`` (which defines ``M.run``) between the lines
    that require the shared ``claude_nvim.lsp`` (``_lsp/lsp.lua``) and ``return M``."""
    return LUA_HEADER + body + "\nreturn M\n"
