"""getOpenEditors: the file buffers open in Neovim, VS Code's "tabs"."""

from __future__ import annotations

from .._tool import BOTH, JSON, Register, Tool, ToolContext, ToolResult, json_result
from ..hookspecs import hookimpl

LUA = r"""
local api = vim.api
local M = {}

-- Listed, named buffers with an empty 'buftype': terminal buffers are listed too, and the
-- 'buftype' test is what keeps them out.
-- The active one: the file of the user's editor window (core.editor_window), also while the
-- cursor is in Claude's terminal.
function M.list()
  local win = package.loaded['claude_nvim.core'].editor_window()
  local current = win and api.nvim_win_get_buf(win)
  local tabs = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    local name = api.nvim_buf_get_name(buf)
    if name ~= '' and vim.bo[buf].buflisted and vim.bo[buf].buftype == '' then
      local loaded = api.nvim_buf_is_loaded(buf)
      local filetype = vim.bo[buf].filetype
      if filetype == '' and not loaded then
        filetype = vim.filetype.match({ filename = name }) or ''
      end
      tabs[#tabs + 1] = {
        uri = 'file://' .. name,
        isActive = buf == current,
        label = vim.fn.fnamemodify(name, ':t'),
        languageId = filetype ~= '' and filetype or 'plaintext',
        isDirty = loaded and vim.bo[buf].modified or false,
        fileName = name,
        isUntitled = false,
      }
    end
  end
  return tabs
end

return M
"""


async def get_open_editors(ctx: ToolContext, args: JSON) -> ToolResult:
    return json_result({"tabs": ctx.paths.to_claude_fields(await ctx.call_lua("list"))})


TOOL = Tool(
    name="getOpenEditors",
    description=(
        "List the files open in Neovim (listed file buffers), with which one is active, "
        "its language and whether it has unsaved changes."
    ),
    input_schema={"type": "object", "properties": {}},
    handler=get_open_editors,
    exposure=BOTH,
    annotations={"title": "Get open editors", "readOnlyHint": True, "openWorldHint": False},
    lua=LUA,
)


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
