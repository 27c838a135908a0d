-- getDiagnostics' Neovim half (claude_nvim.tools.getDiagnostics): one file's diagnostics, or
-- every open file's in slices of SLICE_MS, as JSON text in the CLI's shape
-- (tools/get_diagnostics.py).
local api = vim.api
local core = package.loaded['claude_nvim.core'] ---@module 'claude_nvim.core'
local reload = package.loaded['claude_nvim.reload'] ---@module 'claude_nvim.reload'
local M = {}
local SEVERITY = { 'Error', 'Warning', 'Information', 'Hint' }

-- A function(row, col) giving a byte column of `buf` as UTF-16, reading each row once; an
-- ASCII row (most code) needs no conversion.
local function characters(buf)
  local loaded = api.nvim_buf_is_loaded(buf)
  local lines, ascii = {}, {}
  return function(row, col)
    if not loaded then return col end
    local line = lines[row]
    if line == nil then
      line = api.nvim_buf_get_lines(buf, row, row + 1, false)[1] or false
      lines[row], ascii[row] = line, line and not line:find('[\128-\255]')
    end
    if not line then return col end
    if ascii[row] then return math.max(0, math.min(col, #line)) end
    return core.utf16(line, col)
  end
end

local function by_position(a, b)
  if a.lnum ~= b.lnum then return a.lnum < b.lnum end
  return a.col < b.col
end

-- `diagnostics` in position order (usually they already are: checking is cheaper than sorting).
local function sorted(diagnostics)
  for i = 2, #diagnostics do
    if by_position(diagnostics[i], diagnostics[i - 1]) then
      table.sort(diagnostics, by_position)
      break
    end
  end
  return diagnostics
end

local encode = vim.json.encode
local DIAGNOSTIC = '{"message":%s,"severity":"%s","range":{"start":{"line":%d,"character":%d},'
  .. '"end":{"line":%d,"character":%d}},"source":%s%s}'

-- The JSON of {uri, diagnostics} in the CLI's shape. Written out with a format, not built as
-- tables for vim.json.encode: half the time for 50,000 diagnostics. An unchanged diagnostic
-- must serialise identically (the CLI compares them), so the key order is fixed here.
local function file_json(uri, buf, diagnostics)
  local character = characters(buf)
  local out = {}
  for i, d in ipairs(sorted(diagnostics)) do
    local end_lnum, end_col = d.end_lnum or d.lnum, d.end_col or d.col
    out[i] = DIAGNOSTIC:format(
      encode(d.message), SEVERITY[d.severity] or 'Error',
      d.lnum, character(d.lnum, d.col), end_lnum, character(end_lnum, end_col),
      encode(d.source or ''), d.code ~= nil and ',"code":' .. encode(tostring(d.code)) or '')
  end
  return '{"uri":' .. encode(uri) .. ',"diagnostics":[' .. table.concat(out, ',') .. ']}'
end

--- The JSON of the diagnostics of the buffer of the first candidate, as `uri`'s.
---@param uri string
---@param candidates string[]
---@return string json
function M.for_file(uri, candidates)
  local buf = core.find_buffer(candidates)
  if buf ~= nil then reload.refresh(buf) end
  return file_json(uri, buf or 0, buf and vim.diagnostic.get(buf) or {})
end

-- Each buffer's JSON, kept while its diagnostics, text (UTF-16 columns) and name stay the
-- same: an "all" after an edit converts only the buffers that changed.
local cache = {}  -- buf -> { tick, name, json or false (no diagnostics) }
local group = api.nvim_create_augroup('claude_nvim_diagnostics', { clear = true })
api.nvim_create_autocmd({ 'DiagnosticChanged', 'BufUnload', 'BufWipeout' }, {
  group = group, callback = function(ev) cache[ev.buf] = nil end,
})

--- Forget the cache and its autocmds.
function M.stop()
  pcall(api.nvim_del_augroup_by_id, group)
  cache = {}
end

local function cached_json(buf, name)
  local tick, entry = api.nvim_buf_get_changedtick(buf), cache[buf]
  if not (entry and entry.tick == tick and entry.name == name) then
    local diagnostics = vim.diagnostic.get(buf)
    entry = { tick = tick, name = name,
              json = #diagnostics > 0 and file_json(core.file_url(name), buf, diagnostics) }
    cache[buf] = entry
  end
  return entry.json
end

--- Loaded, named buffers with at least one diagnostic, from the `from`-th buffer on, for at
--- most `budget_ms`: {files = {<JSON of {uri, diagnostics}>, ...}, next = index or nil}.
--- The server asks again from `next`, so the editor is never held for long, whatever the
--- number of diagnostics. JSON made here costs the server a third of decoding tables.
---@param from integer
---@param budget_ms number
---@return {files: string[], next: integer|nil}
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
      files[#files + 1] = cached_json(buf, name) or nil
    end
  end
  return { files = files }
end

return M
