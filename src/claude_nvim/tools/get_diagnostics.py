"""getDiagnostics: Neovim's diagnostics (LSP and others) for one file or every open file."""

from __future__ import annotations

from ..editor import BIG_READS
from ..hookspecs import hookimpl
from ..paths import candidate_paths
from ..tool import BOTH, JSON, Register, Tool, ToolContext, ToolResult, json_result, text_result

SLICE_MS = 10
"""How long one call may hold Neovim while collecting every file's diagnostics."""

LUA = r"""
local api = vim.api
local core = package.loaded['claude_nvim']
local M = {}
local SEVERITY = { 'Error', 'Warning', 'Information', 'Hint' }

-- Diagnostics in the CLI's shape. Columns become UTF-16 using the buffer's lines, read once
-- per row. An unchanged diagnostic must serialise identically: the CLI compares them.
local function convert(buf, diagnostics)
  local lines = {}
  local loaded = api.nvim_buf_is_loaded(buf)
  local function character(row, col)
    if not loaded then return col end
    if lines[row] == nil then
      lines[row] = api.nvim_buf_get_lines(buf, row, row + 1, false)[1] or false
    end
    return lines[row] and core.utf16(lines[row], col) or col
  end
  table.sort(diagnostics, function(a, b)
    if a.lnum ~= b.lnum then return a.lnum < b.lnum end
    return a.col < b.col
  end)
  local out = {}
  for i, d in ipairs(diagnostics) do
    local end_lnum, end_col = d.end_lnum or d.lnum, d.end_col or d.col
    out[i] = {
      message = d.message,
      severity = SEVERITY[d.severity] or 'Error',
      range = {
        start = { line = d.lnum, character = character(d.lnum, d.col) },
        ['end'] = { line = end_lnum, character = character(end_lnum, end_col) },
      },
      source = d.source or '',
      code = d.code ~= nil and tostring(d.code) or nil,
    }
  end
  return out
end

function M.for_file(candidates)
  local buf = core.find_buffer(candidates)
  if buf == nil then return {} end
  core.refresh(buf)
  return convert(buf, vim.diagnostic.get(buf))
end

-- Loaded, named buffers with at least one diagnostic, from the `from`-th buffer on, for at
-- most `budget_ms`: {files = {<JSON of {uri, diagnostics}>, ...}, next = index or nil}.
-- The server asks again from `next`, so the editor is never held for long, whatever the
-- number of diagnostics. JSON made here (in C) costs the server a third of decoding tables.
function M.all(from, budget_ms)
  local started = (vim.uv or vim.loop).hrtime()
  local buffers = api.nvim_list_bufs()
  local files = {}
  for i = from, #buffers do
    if (vim.uv or vim.loop).hrtime() - started > budget_ms * 1e6 then
      return { files = files, next = i }
    end
    local buf = buffers[i]
    local name = api.nvim_buf_get_name(buf)
    if name ~= '' and api.nvim_buf_is_loaded(buf) then
      local diagnostics = vim.diagnostic.get(buf)
      if #diagnostics > 0 then
        files[#files + 1] = vim.json.encode({ uri = core.file_url(name),
                                              diagnostics = convert(buf, diagnostics) })
      end
    end
  end
  return { files = files }
end

return M
"""


async def get_diagnostics(ctx: ToolContext, args: JSON) -> ToolResult:
    uri = args.get("uri")
    if uri:
        diagnostics = await ctx.call_lua("for_file", candidate_paths(uri))
        # The CLI only trusts an answer whose uri is exactly the one it sent.
        return json_result([{"uri": uri, "diagnostics": diagnostics}])
    part = await ctx.call_lua("all", 1, SLICE_MS)
    files: list[str] = part["files"]
    if part.get("next") is not None:
        async with BIG_READS:  # many diagnostics: one such read at a time
            while part.get("next") is not None:  # a slice of the buffers per call: see M.all
                part = await ctx.call_lua("all", part["next"], SLICE_MS)
                files += part["files"]
    return text_result("[" + ",".join(files) + "]")


TOOL = Tool(
    name="getDiagnostics",
    description=(
        "Get language diagnostics (errors, warnings, hints) from Neovim. With `uri`, for that "
        "file only; without it, for every open file that has any."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "uri": {
                "type": "string",
                "description": "A file:// URI or path; omit it for all open files.",
            }
        },
    },
    handler=get_diagnostics,
    exposure=BOTH,
    annotations={"title": "Get diagnostics", "readOnlyHint": True, "openWorldHint": False},
    lua=LUA,
)


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
