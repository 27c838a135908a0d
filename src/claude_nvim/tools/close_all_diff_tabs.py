"""closeAllDiffTabs: close the calling client's claude-nvim diffs (never the user's own)."""

from __future__ import annotations

from .._diffs import dismiss
from .._tool import IDE, JSON, Register, Tool, ToolContext, ToolResult, text_result
from ..hookspecs import hookimpl
from ._context import builtin


async def close_all_diff_tabs(ctx: ToolContext, args: JSON) -> ToolResult:
    # Only this connection's diffs: one session's prompt must not cancel another's review.
    diffs = builtin(ctx).diffs
    mine = diffs.owned_by(ctx.connection.id)
    for diff in mine:
        await dismiss(ctx.editor, diffs, diff)
    return text_result(f"CLOSED_{len(mine)}_DIFF_TABS")


TOOL = Tool(
    name="closeAllDiffTabs",
    description="Close all diff tabs claude-nvim opened for this session.",
    input_schema={"type": "object", "properties": {}},
    handler=close_all_diff_tabs,
    exposure=IDE,
    annotations={"title": "Close all diff tabs", "readOnlyHint": False, "idempotentHint": True,
                 "openWorldHint": False},
)


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
