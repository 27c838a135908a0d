"""getLatestSelection: the most recent completed Visual selection."""

from __future__ import annotations

from .._selection import OUTSIDE, read_full
from .._tool import BOTH, JSON, Register, Tool, ToolContext, ToolResult, json_result
from ..hookspecs import hookimpl

# The Neovim half is the selection module's `latest`: selection tracking records it when
# Visual mode ends, and the full text is re-read while the buffer is unchanged.


async def get_latest_selection(ctx: ToolContext, args: JSON) -> ToolResult:
    payload = await read_full(ctx.editor, ctx.big_reads, "latest")
    if payload is None:
        return json_result({"success": False, "message": "No selection history"})
    payload = ctx.paths.to_claude_fields(payload, resolve=True)  # it holds text
    if payload is None:  # nothing of a file outside the mapped folders is sent
        return json_result({"success": False, "message": OUTSIDE})
    return json_result({"success": True, **payload})


TOOL = Tool(
    name="getLatestSelection",
    description=(
        "Get the most recent text selection the user made in Neovim (the last completed "
        "Visual selection), even after leaving Visual mode."
    ),
    input_schema={"type": "object", "properties": {}},
    handler=get_latest_selection,
    exposure=BOTH,
    annotations={"title": "Get latest selection", "readOnlyHint": True, "openWorldHint": False},
)


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
