"""bufferStats: count the lines, words and characters of a buffer or a line range of it."""

from __future__ import annotations

from typing import Any

import claude_nvim

LUA = r"""
local api = vim.api
local core = package.loaded['claude_nvim.core']
local M = {}

function M.stats(path, first, last)
  local buf = path == vim.NIL and api.nvim_get_current_buf() or core.find_buffer({ path })
  if buf == nil then return vim.NIL end
  local count = api.nvim_buf_line_count(buf)
  first = first == vim.NIL and 1 or math.max(1, first)
  last = last == vim.NIL and count or math.min(count, last)
  local words, chars = 0, 0
  for _, line in ipairs(api.nvim_buf_get_lines(buf, first - 1, last, false)) do
    for _ in line:gmatch('%S+') do words = words + 1 end
    chars = chars + vim.fn.strchars(line)
  end
  return { filePath = api.nvim_buf_get_name(buf), startLine = first - 1, endLine = last - 1,
           lines = math.max(0, last - first + 1), words = words, characters = chars }
end

return M
"""


async def buffer_stats(
    ctx: claude_nvim.ToolContext, args: dict[str, Any]
) -> claude_nvim.ToolResult:
    # Lines arrive 0-based, as everywhere on the wire; Lua counts from 1.
    first, last = args.get("startLine"), args.get("endLine")
    stats = await ctx.call_lua(
        "stats", args.get("filePath"),
        None if first is None else first + 1, None if last is None else last + 1)
    if stats is None:
        raise claude_nvim.ToolError(f"No buffer for {args['filePath']}")
    return claude_nvim.json_result(stats)


TOOL = claude_nvim.Tool(
    name="bufferStats",
    description=(
        "Count lines, words and characters in a Neovim buffer (unsaved text included), or in a "
        "0-based inclusive line range of it. Without filePath: the current buffer."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "filePath": {"type": "string", "description": "An open file's path"},
            "startLine": {"type": "integer", "minimum": 0, "description": "First line, 0-based"},
            "endLine": {"type": "integer", "minimum": 0, "description": "Last line, 0-based"},
        },
    },
    handler=buffer_stats,
    annotations={"title": "Buffer statistics", "readOnlyHint": True, "openWorldHint": False},
    lua=LUA,
)


@claude_nvim.hookimpl
def claude_nvim_register_tools(register: claude_nvim.Register) -> None:
    register(TOOL)
