"""getQuickfixList: Neovim's quickfix list (or a window's location list) as compact JSON."""

from __future__ import annotations

from functools import partial

from .._nvim.lua import read_lua
from .._tool import JSON, MODEL, Register, Tool, ToolContext, ToolResult
from ..hookspecs import hookimpl
from . import lua_answer

LUA = read_lua(__package__, "get_quickfix_list.lua")
ORDER = ("list", "title", "current", "truncated", "total", "items", "uri", "line", "character",
         "endLine", "endCharacter", "type", "valid", "text")


async def get_quickfix_list(ctx: ToolContext, args: JSON, *, max_items: int,
                            max_text_bytes: int) -> ToolResult:
    answer = await ctx.call_lua("get", args.get("list", "quickfix"), max_items, max_text_bytes)
    return lua_answer(ctx.paths.to_claude_fields(answer), ORDER)


def make_tool(*, max_items: int = 200, max_text_bytes: int = 500) -> Tool:
    """The tool, answering at most ``max_items`` items of ``max_text_bytes`` bytes of text each
    (a smaller one for tests: ``make_tool(max_items=2)``)."""
    return Tool(
        name="getQuickfixList",
        description=(
            "Read Neovim's quickfix list (compiler errors, grep results, ...), or with "
            '"list":"location" the location list of the active editor window. Answers '
            '{"list","title","items":[{"uri"?,"line"?,"character"?,"endLine"?,"endCharacter"?,'
            '"text","type"?,"valid"?}],"current"?}: 0-based lines, UTF-16 characters, '
            '"valid":false for lines Neovim could not parse, "current" the selected entry\'s '
            'index. '
            f'At most {max_items} items (then "truncated":true and "total").'
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
        handler=partial(get_quickfix_list, max_items=max_items, max_text_bytes=max_text_bytes),
        exposure=MODEL,
        annotations={"title": "Get quickfix list", "readOnlyHint": True, "openWorldHint": False},
        lua=LUA,
    )


TOOL = make_tool()


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
