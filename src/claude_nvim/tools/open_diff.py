"""openDiff: show Claude's proposed file as a diff; block until the user accepts or rejects."""

from __future__ import annotations

from .._diffs import MODULE as DIFFS
from .._diffs import forget_and_close, split_lines
from .._tool import IDE, JSON, Register, Tool, ToolContext, ToolError, ToolResult, text_result
from ..hookspecs import hookimpl
from ._context import builtin

# The Neovim half is the shared diff module (claude_nvim.diffs): close_tab, closeAllDiffTabs
# and the :ClaudeNvimDiffAccept / :ClaudeNvimDiffDeny commands use it too.


async def open_diff(ctx: ToolContext, args: JSON) -> ToolResult:
    tab_name = args["tab_name"]
    contents = args["new_file_contents"]
    candidates = ctx.paths.candidates(args["new_file_path"])  # refused outside the map
    diffs = builtin(ctx).diffs
    diff = diffs.open(tab_name, ctx.connection.id, contents)
    diff.path = ctx.paths.claude_path(args["new_file_path"])
    try:
        refusal = await ctx.editor.call_lua(DIFFS, "open", diff.id, candidates,
                                            split_lines(contents), tab_name,
                                            ctx.connection.label, ctx.connection.terminal)
        if refusal:
            raise ToolError(refusal)
        await diff.done.wait()  # no timeout: only the user, the CLI or a disconnect end it
        if diff.status == "accepted":
            text, diff.text = diff.text or "", None  # the answer holds it now
            return text_result("FILE_SAVED", text)
        if not any(d.status == "pending" for d in diffs.owned_by(diff.owner)):
            # claude ends its turn, and says so with no hook (2.1.332); not when this diff was
            # replaced by another of the same name, which it waits for.
            await builtin(ctx).hooks.diff_rejected(diff.owner)
        return text_result("DIFF_REJECTED", tab_name)
    finally:
        if diff.status != "accepted":  # rejected, refused, cancelled: close now
            await forget_and_close(ctx.editor, diffs, diff)


TOOL = Tool(
    name="openDiff",
    description=(
        "Open a diff of a file against proposed new contents in Neovim and wait until the user "
        "accepts it (FILE_SAVED, with the final text) or rejects it (DIFF_REJECTED)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "old_file_path": {"type": "string", "description": "The file's path before the change"},
            "new_file_path": {"type": "string", "description": "The file's path after the change"},
            "new_file_contents": {"type": "string", "description": "The whole proposed file"},
            "tab_name": {"type": "string", "description": "A name for the diff's tab"},
        },
        "required": ["old_file_path", "new_file_path", "new_file_contents", "tab_name"],
    },
    handler=open_diff,
    exposure=IDE,
    annotations={"title": "Open diff", "readOnlyHint": False, "openWorldHint": False},
)


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
