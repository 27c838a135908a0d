-- claude_nvim.hooks: what each Claude is doing, as its hooks tell the server (working, waiting
-- for the user, done; unknown for a Claude without claude-nvim's hooks). Kept in the server's
-- record, vim.g.claude_nvim_server.claudes: a list, oldest connection first, of
-- { id, state, since, label, turns, terminal = buf or nil, pid = pid or nil }. A change of
-- state is announced: User ClaudeNvimWorking, ClaudeNvimWaiting, ClaudeNvimDone (data: that
-- Claude's entry). Lifecycle: setup(opts) / stop().
local api = vim.api
local M = {}

local EVENTS = { working = 'ClaudeNvimWorking', waiting = 'ClaudeNvimWaiting',
                 done = 'ClaudeNvimDone' }

local function store(claudes)
  local info = vim.g.claude_nvim_server
  if type(info) ~= 'table' then return false end
  info.claudes = claudes
  vim.g.claude_nvim_server = info
  return true
end

local function list()
  local info = vim.g.claude_nvim_server
  return type(info) == 'table' and type(info.claudes) == 'table' and info.claudes or {}
end

--- The Claude `entry` (from the server) now; `changed`: its state changed, which is announced.
---@param entry claude_nvim.ServerClaude
---@param changed boolean
function M.update(entry, changed)
  local claudes, at = list(), nil
  for i, claude in ipairs(claudes) do
    if claude.id == entry.id then at = i end
  end
  if at then claudes[at] = entry else claudes[#claudes + 1] = entry end
  table.sort(claudes, function(a, b) return a.id < b.id end)
  if store(claudes) and changed and EVENTS[entry.state] then
    pcall(api.nvim_exec_autocmds, 'User', { pattern = EVENTS[entry.state], data = entry,
                                           modeline = false })
  end
end

--- The Claude of connection `id` went away.
---@param id string
function M.remove(id)
  local claudes = vim.tbl_filter(function(claude) return claude.id ~= id end, list())
  store(claudes)
end

function M.setup()
  store({})
end

function M.stop()
  store({})
end

return M
