"""saveDocument: write an open file's buffer, like :write, without touching the user's windows."""

from __future__ import annotations

from .._tool import IDE, JSON, Register, Tool, ToolContext, ToolResult, json_result
from ..hookspecs import hookimpl
from . import FILE_PATH_INPUT, not_open

LUA = r"""
local api = vim.api
local core = package.loaded['claude_nvim.core']
local reload = package.loaded['claude_nvim.reload']
local M = {}

function M.save(candidates)
  local buf = core.find_buffer(candidates)
  if buf == nil or not api.nvim_buf_is_loaded(buf) then return vim.NIL end
  local path = api.nvim_buf_get_name(buf)
  if reload.changed_on_disk(buf) then
    if not vim.bo[buf].modified then  -- nothing of the user's to save: take the disk's
      reload.refresh(buf)
      return { filePath = path }
    end
    -- :write would stop at a prompt; overwriting would lose the newer file.
    return { filePath = path, error = 'the file changed on disk since Neovim read it' }
  end
  local ok, err = pcall(api.nvim_buf_call, buf, function()
    vim.cmd('silent keepalt lockmarks write')
  end)
  if not ok then return { filePath = path, error = tostring(err):gsub('^Vim:', '') } end
  return { filePath = path }
end

return M
"""


async def save_document(ctx: ToolContext, args: JSON) -> ToolResult:
    saved = ctx.paths.to_claude_fields(
        await ctx.call_lua("save", ctx.paths.candidates(args["filePath"])))
    if saved is None:  # not open (or its buffer is named outside the map)
        return not_open(args["filePath"])
    if "error" in saved:
        return json_result({"success": False, "filePath": saved["filePath"],
                            "message": f"Failed to save file: {saved['error']}"})
    return json_result({"success": True, "filePath": saved["filePath"], "saved": True,
                        "message": "Document saved successfully"})


TOOL = Tool(
    name="saveDocument",
    description="Save a file open in Neovim (write its buffer to disk).",
    input_schema=FILE_PATH_INPUT,
    handler=save_document,
    exposure=IDE,
    annotations={"title": "Save document", "readOnlyHint": False, "openWorldHint": False},
    lua=LUA,
)


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
