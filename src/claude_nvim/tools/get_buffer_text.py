"""getBufferText: the current text of an open buffer, saved or not, or a range of its lines."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from .._paths import candidate_paths
from .._tool import JSON, MODEL, Register, Tool, ToolContext, ToolError, ToolResult, json_result
from ..hookspecs import hookimpl
from ._lsp import MAX_INDEX, ordered


@dataclass(frozen=True)
class Limits:
    """What one call answers at most (``make_tool(Limits(max_lines=3))``: a smaller tool)."""

    max_lines: int = 2000
    max_bytes: int = 100_000


DEFAULT_LIMITS = Limits()

LUA = r"""
local api = vim.api
local core = package.loaded['claude_nvim.core']
local M = {}

-- `s` cut to at most `n` bytes, not inside a UTF-8 sequence.
local cut = core.cut

-- Lines req.startLine..req.endLine (0-based, inclusive; default: all) of the buffer of the
-- first candidate, at most req.max_lines lines and req.max_bytes bytes of text.
function M.read(candidates, req)
  local buf = core.find_buffer(candidates)
  if buf == nil or not api.nvim_buf_is_loaded(buf) then
    return { error = core.absolute(candidates[1]) .. ' is not open in Neovim' }
  end
  core.refresh(buf)
  local path = api.nvim_buf_get_name(buf)
  local count = api.nvim_buf_line_count(buf)
  local first = req.startLine or 0
  local last = req.endLine or (count - 1)
  if first >= count then
    return { error = ("Invalid arguments: 'startLine' %d is past the end of %s (%d lines)")
      :format(first, path, count) }
  end
  if last < first then
    return { error = "Invalid arguments: 'endLine' must not be before 'startLine'" }
  end
  last = math.min(last, count - 1)
  local limit = math.min(last, first + req.max_lines - 1)
  local parts, bytes, full = {}, 0, false
  local row = first
  while row <= limit and not full do  -- in batches: never copy much beyond the cap
    local batch = api.nvim_buf_get_lines(buf, row, math.min(row + 100, limit + 1), false)
    for _, line in ipairs(batch) do
      local sep = #parts > 0 and 1 or 0
      if bytes + sep + #line > req.max_bytes then
        local room = req.max_bytes - bytes - sep
        if room > 0 or #parts == 0 then parts[#parts + 1] = cut(line, math.max(room, 0)) end
        full = true
        break
      end
      parts[#parts + 1] = line
      bytes = bytes + sep + #line
    end
    row = row + #batch
  end
  local answer = {
    uri = core.file_url(path),
    text = table.concat(parts, '\n'),
    startLine = first,
    endLine = first + #parts - 1,
    totalLines = count,
    isDirty = vim.bo[buf].modified,
  }
  local truncated = full or limit < last
  if truncated then answer.truncated = true end
  return answer
end

return M
"""


async def get_buffer_text(ctx: ToolContext, args: JSON,
                          limits: Limits = DEFAULT_LIMITS) -> ToolResult:
    path = args["filePath"]
    if not path.strip():
        raise ToolError("Invalid arguments: 'filePath' must not be empty")
    request = {k: args[k] for k in ("startLine", "endLine") if k in args}
    answer = await ctx.call_lua("read", candidate_paths(path),
                                {**request, "max_lines": limits.max_lines,
                                 "max_bytes": limits.max_bytes})
    if "error" in answer:
        raise ToolError(answer["error"])
    order = ("uri", "startLine", "endLine", "totalLines", "isDirty", "truncated", "text")
    return json_result(ordered(answer, order))


def make_tool(limits: Limits = DEFAULT_LIMITS) -> Tool:
    """The tool, answering within ``limits``."""
    return Tool(
        name="getBufferText",
        description=(
            "Read the current text of a file open in Neovim, including unsaved changes, or of "
            "its lines startLine..endLine (0-based, inclusive). Answers "
            '{"uri","text","startLine","endLine","totalLines","isDirty"}; lines are joined with '
            f"\\n. At most {limits.max_lines} lines and {limits.max_bytes} bytes per call: then "
            '"truncated":true, and endLine says where it stopped; read on from there. '
            "A file not open in Neovim is an error (read it from disk instead)."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "filePath": {
                    "type": "string",
                    "description": (
                        "An absolute path, a path relative to Neovim's cwd, or a file:// URI."
                    ),
                },
                "startLine": {"type": "integer", "minimum": 0, "maximum": MAX_INDEX,
                              "description": "First line, 0-based (default 0)."},
                "endLine": {"type": "integer", "minimum": 0, "maximum": MAX_INDEX,
                            "description": "Last line, 0-based, inclusive (default: the last)."},
            },
            "required": ["filePath"],
        },
        handler=partial(get_buffer_text, limits=limits),
        exposure=MODEL,
        annotations={"title": "Get buffer text", "readOnlyHint": True, "openWorldHint": False},
        lua=LUA,
    )


TOOL = make_tool()


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
