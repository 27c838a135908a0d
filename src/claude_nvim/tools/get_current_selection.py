"""getCurrentSelection: the active editor's selection, or its cursor when nothing is selected."""

from __future__ import annotations

from .._selection import OUTSIDE, read_full
from .._tool import BOTH, JSON, Register, Tool, ToolContext, ToolResult, json_result
from ..hookspecs import hookimpl

# The Neovim half is the selection module's `current`, shared with selection tracking.


async def get_current_selection(ctx: ToolContext, args: JSON) -> ToolResult:
    payload = await read_full(ctx.editor, ctx.big_reads, "current")
    if payload is None:
        return json_result({"success": False, "message": "No active editor found"})
    payload = ctx.paths.to_claude_fields(payload, resolve=True)  # it holds text
    if payload is None:  # nothing of a file outside the mapped folders is sent
        return json_result({"success": False, "message": OUTSIDE})
    return json_result({"success": True, **payload})


TOOL = Tool(
    name="getCurrentSelection",
    description=(
        "Get the current text selection in the active Neovim editor: the selected text, the "
        "file and the 0-based range. With nothing selected, an empty selection at the cursor."
    ),
    input_schema={"type": "object", "properties": {}},
    handler=get_current_selection,
    exposure=BOTH,
    annotations={"title": "Get current selection", "readOnlyHint": True, "openWorldHint": False},
)


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
