"""getQuickfixList: Neovim's quickfix list (or a window's location list) as compact JSON."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from .._nvim.lua import read_lua
from .._tool import JSON, MODEL, Register, Tool, ToolContext, ToolError, ToolResult, json_result
from ..hookspecs import hookimpl
from ._lsp import ordered


@dataclass(frozen=True)
class Limits:
    """What one call answers at most (``make_tool(Limits(max_items=2))``: a smaller tool)."""

    max_items: int = 200
    max_text_bytes: int = 500


DEFAULT_LIMITS = Limits()

LUA = read_lua(__package__, "get_quickfix_list.lua")


async def get_quickfix_list(ctx: ToolContext, args: JSON,
                            limits: Limits = DEFAULT_LIMITS) -> ToolResult:
    which = args.get("list", "quickfix")
    answer = await ctx.call_lua("get", which, limits.max_items, limits.max_text_bytes)
    if "error" in answer:
        raise ToolError(answer["error"])
    order = ("list", "title", "current", "truncated", "total", "items", "uri", "line",
             "character", "endLine", "endCharacter", "type", "valid", "text")
    return json_result(ordered(ctx.paths.to_claude_fields(answer), order))


def make_tool(limits: Limits = DEFAULT_LIMITS) -> Tool:
    """The tool, answering within ``limits``."""
    return Tool(
        name="getQuickfixList",
        description=(
            "Read Neovim's quickfix list (compiler errors, grep results, ...), or with "
            '"list":"location" the location list of the active editor window. Answers '
            '{"list","title","items":[{"uri"?,"line"?,"character"?,"endLine"?,"endCharacter"?,'
            '"text","type"?,"valid"?}],"current"?}: 0-based lines, UTF-16 characters, '
            '"valid":false for lines Neovim could not parse, "current" the selected entry\'s '
            'index. '
            f'At most {limits.max_items} items (then "truncated":true and "total").'
        ),
        input_schema={
            "type": "object",
            "properties": {
                "list": {
                    "type": "string",
                    "enum": ["quickfix", "location"],
                    "description": "Which list (default quickfix).",
                }
            },
        },
        handler=partial(get_quickfix_list, limits=limits),
        exposure=MODEL,
        annotations={"title": "Get quickfix list", "readOnlyHint": True, "openWorldHint": False},
        lua=LUA,
    )


TOOL = make_tool()


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
