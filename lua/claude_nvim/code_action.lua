-- "Fix with Claude" and "Explain with Claude" where code actions are: a language server in
-- Neovim's own process (vim.lsp.start with a Lua `cmd`), attached to a file buffer once it
-- has diagnostics. On a line with diagnostics, vim.lsp.buf.code_action() (and lightbulb
-- plugins) offers both; executing one sends the diagnostics, their place and the lines around
-- them to the current Claude as a prompt (claude_nvim.prompt). It costs nothing until asked:
-- no document sync, no work but on a code action request.
local api = vim.api
local M = {}

local NAME = 'claude-nvim'
local CONTEXT_LINES = 3  -- lines shown above and below the diagnostics' lines
M.COMMANDS = { fix = 'claude_nvim.fix', explain = 'claude_nvim.explain' }
local TITLES = { fix = 'Fix with Claude', explain = 'Explain with Claude' }
local ASK = {
  fix = 'Fix the %s in %s at %s:\n\n%s\n\n%s\n',
  explain = 'Explain the %s in %s at %s, what causes them and how to fix them (change no '
    .. 'file):\n\n%s\n\n%s\n',
}

-- The diagnostics of `buf` on rows `first`..`last` (0-based).
local function on_lines(buf, first, last)
  return vim.tbl_filter(function(d)
    return d.lnum <= last and (d.end_lnum or d.lnum) >= first
  end, vim.diagnostic.get(buf))
end

--- The prompt that asks Claude to `what` ('fix' or 'explain') the diagnostics of `buf` on rows
--- `first`..`last` (0-based); nil when there are none.
---@param what 'fix'|'explain'
---@param buf integer
---@param first integer
---@param last integer
---@return string|nil
function M.prompt(what, buf, first, last)
  local found = on_lines(buf, first, last)
  if #found == 0 then return nil end
  local lo, hi = first, last
  for _, d in ipairs(found) do
    lo, hi = math.min(lo, d.lnum), math.max(hi, d.end_lnum or d.lnum)
  end
  local prompt = require('claude_nvim.prompt')
  local from = math.max(lo - CONTEXT_LINES, 0)
  local lines = api.nvim_buf_get_lines(buf, from, hi + CONTEXT_LINES + 1, false)
  local path = vim.fn.fnamemodify(api.nvim_buf_get_name(buf), ':.')
  local where = lo == hi and ('line ' .. (lo + 1)) or ('lines ' .. (lo + 1) .. '-' .. (hi + 1))
  local code = ('%s:%d-%d:\n%s'):format(path, from + 1, from + #lines,
    prompt.fence(lines, vim.bo[buf].filetype))
  return ASK[what]:format(#found == 1 and 'diagnostic' or 'diagnostics', path, where,
    prompt.diagnostic_lines(found), code)
end

-- The server ----------------------------------------------------------------------------------

local CAPABILITIES = {
  codeActionProvider = { codeActionKinds = { 'quickfix' } },
  executeCommandProvider = { commands = { M.COMMANDS.fix, M.COMMANDS.explain } },
  textDocumentSync = { openClose = false, change = 0 },  -- no text sent: nothing to keep
}

local function actions(params)
  local buf = vim.uri_to_bufnr(params.textDocument.uri)
  local range = params.range
  if not api.nvim_buf_is_loaded(buf) or #on_lines(buf, range.start.line, range['end'].line) == 0
  then return {} end
  local list = {}
  for _, what in ipairs({ 'fix', 'explain' }) do
    list[#list + 1] = { title = TITLES[what], kind = 'quickfix', command = {
      title = TITLES[what], command = M.COMMANDS[what],
      arguments = { { uri = params.textDocument.uri, first = range.start.line,
                      last = range['end'].line } } } }
  end
  return list
end

local function execute(params)
  local what = params.command == M.COMMANDS.fix and 'fix'
    or params.command == M.COMMANDS.explain and 'explain' or nil
  local where = type(params.arguments) == 'table' and params.arguments[1]
  if what == nil or type(where) ~= 'table' then return nil, 'no such command' end
  local buf = vim.uri_to_bufnr(where.uri)
  local text = api.nvim_buf_is_loaded(buf) and M.prompt(what, buf, where.first, where.last)
  if not text then return nil, 'no diagnostics there any more' end
  require('claude_nvim.prompt').send(text)
  return vim.NIL
end

local HANDLERS = {
  initialize = function() return { capabilities = CAPABILITIES, serverInfo = { name = NAME } } end,
  shutdown = function() return vim.NIL end,
  ['textDocument/codeAction'] = actions,
  ['workspace/executeCommand'] = execute,
}

-- The in-process server: answers come on the next turn of the event loop, as a real one's do.
local function server(dispatchers)
  local closing, id = false, 0
  return {
    request = function(method, params, callback)
      id = id + 1
      vim.schedule(function()
        local handler = HANDLERS[method]
        if handler == nil then
          callback({ code = -32601, message = 'method not found: ' .. method })
          return
        end
        local ok, result, err = pcall(handler, params)
        if not ok or result == nil then
          callback({ code = -32603, message = tostring(ok and err or result) })
          return
        end
        callback(nil, result)
      end)
      return true, id
    end,
    notify = function(method)
      if method == 'exit' then
        closing = true
        dispatchers.on_exit(0, 0)
      end
      return true
    end,
    is_closing = function() return closing end,
    terminate = function() closing = true end,
  }
end

--- Attach claude-nvim's code actions to `buf` if it is a file's buffer (once).
---@param buf integer
function M.attach(buf)
  if not api.nvim_buf_is_valid(buf) or vim.bo[buf].buftype ~= ''
    or api.nvim_buf_get_name(buf) == '' or vim.b[buf].claude_nvim_code_actions then return end
  vim.b[buf].claude_nvim_code_actions = true
  vim.lsp.start({ name = NAME, cmd = server, root_dir = vim.fn.getcwd(-1, -1) }, {
    bufnr = buf, reuse_client = function(client, config) return client.name == config.name end,
  })
end

return M
