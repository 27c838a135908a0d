"""checkDocumentDirty: whether an open file has unsaved changes in Neovim."""

from __future__ import annotations

from .._tool import IDE, JSON, Register, Tool, ToolContext, ToolResult, json_result
from ..hookspecs import hookimpl
from . import FILE_PATH_INPUT, not_open

LUA = r"""
local core = package.loaded['claude_nvim.core']
local M = {}

function M.check(candidates)
  local buf = core.find_buffer(candidates)
  if buf == nil then return vim.NIL end
  return { filePath = vim.api.nvim_buf_get_name(buf), isDirty = vim.bo[buf].modified }
end

return M
"""


async def check_document_dirty(ctx: ToolContext, args: JSON) -> ToolResult:
    found = await ctx.call_lua("check", ctx.paths.candidates(args["filePath"]))
    found = ctx.paths.to_claude_fields(found)  # None: its buffer is named outside the map
    if found is None:
        return not_open(args["filePath"])
    return json_result({"success": True, **found,
                        "isUntitled": False})


TOOL = Tool(
    name="checkDocumentDirty",
    description="Check whether a file open in Neovim has unsaved changes.",
    input_schema=FILE_PATH_INPUT,
    handler=check_document_dirty,
    exposure=IDE,
    annotations={"title": "Check document dirty", "readOnlyHint": True, "openWorldHint": False},
    lua=LUA,
)


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
