-- claude-nvim as a Neovim plugin: the commands, the Claude terminal, the private install.
--
-- The server (the Python `claude-nvim`) installs its own modules over RPC as claude_nvim.core,
-- claude_nvim.mentions, claude_nvim.diffs, ...: this plugin owns `claude_nvim` and the files
-- under lua/claude_nvim/, and only calls into the server's modules while a server runs.
local api = vim.api
local M = {}

local defaults = {
  cmd = nil,      -- the claude-nvim to run (a string or a list); nil: the private install, PATH
  python = nil,   -- the Python for the private install; nil: python3.13 ... python3.11, python3
  packages = {},  -- tool packages for the private install too (pip specs: paths, git+https://)
  terminal = { position = 'right', size = 0.4 },  -- right left bottom top float tab; <1: a share
  diff = { open_in = 'tab', keep_focus = false },  -- open_in: 'tab' or 'current'
}

M.config = vim.deepcopy(defaults)

-- Publish the options the server's Lua reads (it runs without this plugin too).
local function publish()
  vim.g.claude_nvim_opts = { diff = M.config.diff, python = M.config.python,
                             packages = M.config.packages }
end

--- Configure the plugin (lazy.nvim calls it with the spec's `opts`).
function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(defaults), opts or {})
  publish()
end

local function warn(msg) vim.notify('claude-nvim: ' .. msg, vim.log.levels.WARN) end

--- The directory of the private install (a venv): stdpath('data')/claude-nvim/venv.
function M.venv() return require('claude_nvim.install').venv() end

--- The claude-nvim command to run, as a list, and where it came from ('opts.cmd', 'private
--- install', 'PATH'); nil and advice when there is none.
function M.command()
  local cmd = M.config.cmd
  if type(cmd) == 'string' then return { cmd }, 'opts.cmd' end
  if type(cmd) == 'table' and #cmd > 0 then return vim.deepcopy(cmd), 'opts.cmd' end
  local private = M.venv() .. '/bin/claude-nvim'
  if vim.fn.executable(private) == 1 then return { private }, 'private install' end
  if vim.fn.executable('claude-nvim') == 1 then return { vim.fn.exepath('claude-nvim') }, 'PATH' end
  return nil, 'no claude-nvim: run :ClaudeNvimInstall (lazy.nvim runs it at install), or set '
    .. 'opts.cmd, or put claude-nvim on PATH (pipx install / uv tool install)'
end

--- The running server's state in this Neovim (vim.g.claude_nvim_server, kept by the server's
--- claude_nvim.core), or nil when none runs: a dead server's leftover is none.
function M.server()
  local info = vim.g.claude_nvim_server
  if type(info) ~= 'table' or type(info.port) ~= 'number' then return nil end
  if api.nvim_get_chan_info(info.channel).id == nil then return nil end
  return info
end
local server = M.server

--- For statuslines: "" when no Claude is connected, else e.g. "Claude" or "Claude ×2 · 1 diff".
function M.status()
  local info = server()
  local count = info and tonumber(info.clients) or 0
  if count == 0 then return '' end
  local text = count > 1 and ('Claude ×' .. count) or 'Claude'
  local diffs = package.loaded['claude_nvim.diffs']
  local pending = type(diffs) == 'table' and diffs.pending and diffs.pending() or 0
  if pending > 0 then text = text .. ' · ' .. pending .. (pending > 1 and ' diffs' or ' diff') end
  return text
end

-- Mentions made before a server ran: delivered once its modules are in (it then queues them
-- until a Claude connects). Each is the argument list of :ClaudeNvimAdd.
local waiting, polling = {}, false
local WAIT_MS, POLL_MS = 30000, 50

local function deliver()
  local mentions = package.loaded['claude_nvim.mentions']
  local core = package.loaded['claude_nvim.core']
  for _, fargs in ipairs(waiting) do core.guard(mentions.add)({ fargs = fargs }) end
  waiting = {}
end

local function wait_for_server()
  if polling then return end
  polling = true
  local waited = 0
  local function poll()
    if server() and package.loaded['claude_nvim.mentions'] then
      polling = false
      return deliver()
    end
    waited = waited + POLL_MS
    local started = require('claude_nvim.terminal').running()
    if waited >= WAIT_MS or not started then
      polling = false
      warn(#waiting .. ' mention(s) dropped: ' .. (started and 'no claude-nvim server started '
        .. 'within ' .. WAIT_MS / 1000 .. ' s' or 'Claude did not start') .. '; send again')
      waiting = {}
      return
    end
    vim.defer_fn(poll, POLL_MS)
  end
  vim.defer_fn(poll, 0)
end

-- Send a mention now if a server runs, else start Claude (as :ClaudeNvim) and send it then.
-- With no Claude connected, Claude starts too (the server keeps the mention for it 10 s).
local function mention(now, fargs)
  local mentions, info = package.loaded['claude_nvim.mentions'], server()
  local terminal = require('claude_nvim.terminal')
  if info and mentions then
    package.loaded['claude_nvim.core'].guard(now)(mentions)
    if (tonumber(info.clients) or 0) == 0 and not terminal.running() then terminal.open({}) end
    return
  end
  waiting[#waiting + 1] = fargs
  if not terminal.running() then terminal.open({}) end
  wait_for_server()
end

-- A path as the server would resolve it now: relative to Neovim's cwd at the time of the call.
local function absolute(path)
  if path:sub(1, 1) == '/' or path:sub(1, 1) == '~' then return path end
  return vim.fn.getcwd(-1, -1) .. '/' .. path
end

--- :ClaudeNvimSend: the selected lines (or this line) of this file.
function M.send(opts)
  local buf = api.nvim_get_current_buf()
  local name = api.nvim_buf_get_name(buf)
  if vim.bo[buf].buftype ~= '' or name == '' then
    return warn('not a file buffer: nothing to send')
  end
  local first, last = opts.line1, opts.line2
  if opts.range == 0 then first = api.nvim_win_get_cursor(0)[1]; last = first end
  mention(function(mentions) mentions.send(opts) end,
    { name, tostring(first), tostring(last) })
end

--- :ClaudeNvimAdd {path} [start] [end]: a file, a line range of it, or a directory.
function M.add(opts)
  local fargs = vim.deepcopy(opts.fargs)
  fargs[1] = absolute(fargs[1])
  mention(function(mentions) mentions.add(opts) end, fargs)
end

--- :ClaudeNvimDiffAccept / :ClaudeNvimDiffDeny: the verdict on the diff shown here.
function M.diff(verdict)
  local diffs = package.loaded['claude_nvim.diffs']
  if not (server() and diffs) then return warn('no pending diff here') end
  if verdict == 'accept' then diffs.accept_current() else diffs.deny_current() end
end

--- :ClaudeNvimInstall: (re)make the private install, without blocking Neovim.
function M.install()
  require('claude_nvim.install').start(M.config)
end

publish()
return M
