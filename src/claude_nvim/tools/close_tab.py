"""close_tab: the CLI closes a diff tab it opened (hidden from tools/list, always TAB_CLOSED)."""

from __future__ import annotations

from .._diffs import dismiss
from .._tool import IDE, JSON, Register, Tool, ToolContext, ToolResult, text_result
from ..hookspecs import hookimpl
from ._context import builtin


async def close_tab(ctx: ToolContext, args: JSON) -> ToolResult:
    diffs = builtin(ctx).diffs
    diff = diffs.find(args["tab_name"])
    if diff is not None:
        await dismiss(ctx.editor, diffs, diff)
    return text_result("TAB_CLOSED")


TOOL = Tool(
    name="close_tab",
    description=None,  # the CLI calls it; it is not listed
    input_schema={"type": "object", "properties": {"tab_name": {"type": "string"}},
                  "required": ["tab_name"]},
    handler=close_tab,
    exposure=IDE,
)


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
