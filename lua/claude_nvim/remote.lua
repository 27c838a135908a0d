-- Claude on another host or in a container, this Neovim here: the plugin's half of
-- `claude-nvim remote`. With a target (opts.remote.target, or `:ClaudeNvim ssh://host/path`) the
-- server the plugin runs is `claude-nvim remote --serve TARGET`: it serves this Neovim here and
-- makes itself known there (only the CLI's WebSocket crosses). The Claude terminals run
-- `claude-nvim remote --claude TARGET`, built here from the user's target and options: nothing
-- a server publishes is ever run.
local M = {}

local chosen = nil  -- the target :ClaudeNvim chose for this session, over opts.remote.target

local function config() return require('claude_nvim').config.remote or {} end
local function tell(msg, level) require('claude_nvim').tell(msg, level) end

--- Whether `arg` names a target: ssh://, docker://, podman:// (a URL of any scheme).
---@param arg string
---@return boolean
function M.is_target(arg)
  return type(arg) == 'string' and arg:match('^%a[%w+.-]*://') ~= nil
end

--- The target Claudes run at, or nil: here.
---@return string|nil
function M.target() return chosen or config().target end

--- The `claude-nvim` arguments of this Neovim's server: `remote --serve ... TARGET` for a
--- target (opts.remote.args before it), nil to serve here; nil and why for a target refused.
---@param servername string
---@return string[]|nil
---@return string|nil
function M.serve_args(servername)
  local target = M.target()
  if target == nil then return nil end
  if not M.acceptable(target) then
    return nil, ('the remote target %q may not start with "-"'):format(target)
  end
  local args = { 'remote', '--serve', '--nvim', servername }
  vim.list_extend(args, vim.deepcopy(config().args or {}))
  args[#args + 1] = target
  return args
end

--- Whether `target` may be handed to `claude-nvim remote`: nothing that starts with `-` (an
--- option to ssh, or to claude-nvim), nothing with a control character.
---@param target string
---@return boolean
function M.acceptable(target)
  return type(target) == 'string' and target ~= '' and not target:find('^%-')
    and not target:find('%c')
end

--- The command of a Claude terminal when Claudes run at a target: `claude-nvim remote --claude`
--- (opts.remote.args before the target), claude's arguments `args` after it; the server's
--- port there comes in claude's environment. nil when no target is set.
---@param claude_nvim string[] the claude-nvim command (the plugin's M.command())
---@param args string[] claude's arguments
---@return string[]|nil
function M.claude_command(claude_nvim, args)
  local target = M.target()
  if target == nil then return nil end
  local cmd = vim.list_extend(vim.deepcopy(claude_nvim), { 'remote', '--claude' })
  vim.list_extend(cmd, vim.deepcopy(config().args or {}))
  cmd[#cmd + 1] = target
  return vim.list_extend(cmd, args)
end

--- :ClaudeNvim TARGET: Claudes run at `target` from now on; `done()` once this Neovim's
--- server can start there (the plugin's local one stopped). Refused, saying why, while Claudes
--- use the current server, or when the plugin did not start it.
---@param target string
---@param done fun()
function M.switch(target, done)
  if target == M.target() then return done() end
  local plugin = require('claude_nvim')
  local info = plugin.server()
  local clients = info and tonumber(info.clients) or 0
  if clients > 0 then
    return tell(('%d Claude(s) use this Neovim\'s server now: close them first, or start '
      .. 'Neovim again for %s'):format(clients, target), 'WARN')
  end
  if not plugin.stop_server(function()
    chosen = target
    done()
  end) then
    return tell('this Neovim has a claude-nvim server the plugin did not start (port '
      .. tostring(info and info.port) .. '): stop it first', 'WARN')
  end
end

return M
