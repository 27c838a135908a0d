-- Claude on another host or in a container, this Neovim here: the plugin's half of
-- `claude-nvim remote`. With a target (opts.remote.target, or `:ClaudeNvim ssh://host/path`) the
-- server the plugin runs is `claude-nvim remote --serve TARGET`: it reaches the target, starts
-- the server there and publishes, with what a claude needs, how to start one there
-- (vim.g.claude_nvim_server.claude.via); the Claude terminals run claude through it.
local M = {}

local chosen = nil  -- the target :ClaudeNvim chose for this session, over opts.remote.target

local function config() return require('claude_nvim').config.remote or {} end
local function tell(msg, level) require('claude_nvim').tell(msg, level) end

--- Whether `arg` names a target: ssh://, docker://, podman:// (a URL of any scheme).
function M.is_target(arg)
  return type(arg) == 'string' and arg:match('^%a[%w+.-]*://') ~= nil
end

--- The target Claudes run at, or nil: here.
function M.target() return chosen or config().target end

--- The `claude-nvim` arguments of this Neovim's server: `remote --serve ... TARGET` for a
--- target (opts.remote.args before it), nil to serve here.
function M.serve_args(servername)
  local target = M.target()
  if target == nil then return nil end
  local args = { 'remote', '--serve', '--nvim', servername }
  vim.list_extend(args, vim.deepcopy(config().args or {}))
  args[#args + 1] = target
  return args
end

-- `s` as one word for a POSIX shell (as Python's shlex.quote).
local function quote(s)
  if s ~= '' and not s:find("[^%w@%%+=:,./_-]") then return s end
  return "'" .. s:gsub("'", [['"'"']]) .. "'"
end

--- `cmd` (claude, its arguments) and its environment `env`, as this Neovim runs them where the
--- server is (`via`: what it published as claude.via): through its transport, in its
--- directory, with claude there. The same as claude-nvim remote's claude_command.
function M.wrap(via, cmd, env)
  local inner = vim.list_extend(vim.deepcopy(via.shell), {
    'cd -- "$1" && shift && exec "$@"', 'claude-nvim', via.cwd, 'env' })
  local names = vim.tbl_keys(env or {})
  table.sort(names)
  for _, name in ipairs(names) do inner[#inner + 1] = name .. '=' .. env[name] end
  inner[#inner + 1] = via.claude
  vim.list_extend(inner, vim.list_slice(cmd, 2))  -- cmd[1]: claude's name here
  local command = vim.deepcopy(via.command)
  if via.quote then
    command[#command + 1] = table.concat(vim.tbl_map(quote, inner), ' ')
  else
    vim.list_extend(command, inner)
  end
  return command
end

--- :ClaudeNvim TARGET: Claudes run at `target` from now on; `done()` once this Neovim's
--- server can start there (the plugin's local one stopped). Refused, saying why, while Claudes
--- use the current server, or when the plugin did not start it.
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
