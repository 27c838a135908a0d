-- Socket activation: the plugin binds the server's socket on 127.0.0.1 itself, writes the lock
-- file for it, and hands the listening socket to the server it spawns (`serve --listen-fd 3`,
-- the token in its environment). A claude started now connects at once: its connection waits
-- in the kernel's backlog until the server, a second later, accepts it. What claude needs is
-- known now: the server's own files tell it (core.claude_env, the hooks' settings).
local uv = vim.uv or vim.loop
local M = {}

local PRIVATE_DIR, PRIVATE_FILE = 448, 384  -- 0700, 0600

local function hex(bytes)
  return (bytes:gsub('.', function(c) return string.format('%02x', c:byte()) end))
end

-- ${CLAUDE_CONFIG_DIR:-~/.claude}/ide, made (or set back to) 0700; nil and why when it is not
-- a directory of this user's (a symlink would take the token elsewhere).
local function lock_dir()
  local config = vim.env.CLAUDE_CONFIG_DIR
  if config == nil or config == '' then config = (vim.env.HOME or '') .. '/.claude' end
  local dir = config .. '/ide'
  if not uv.fs_lstat(dir) then vim.fn.mkdir(dir, 'p', PRIVATE_DIR) end
  local st = uv.fs_lstat(dir)
  if not st or st.type ~= 'directory' or st.uid ~= uv.getuid() then
    return nil, 'the lock directory ' .. dir .. ' is not a directory of yours'
  end
  uv.fs_chmod(dir, PRIVATE_DIR)
  return dir
end

-- listen(2) on the socket `fd`, outside Neovim's loop: libuv's listen watches the socket
-- there, and would accept a connection meant for the server (and drop it with Neovim's copy).
-- False without LuaJIT's FFI.
local function listen_outside_loop(fd)
  local has_ffi, ffi = pcall(require, 'ffi')
  if not has_ffi then return false end
  -- Under a name of its own (asm): another plugin may have declared `listen` otherwise.
  pcall(ffi.cdef, 'int claude_nvim_listen(int fd, int backlog) __asm__("listen");')
  return ffi.C.claude_nvim_listen(fd, 128) == 0
end

-- A new file `path`, born 0600 (never one that was there: O_EXCL), holding `text`.
local function write_new(path, text)
  local fd, err = uv.fs_open(path, 'wx', PRIVATE_FILE)
  if not fd then return nil, err end
  local written, werr = uv.fs_write(fd, text, 0)
  uv.fs_close(fd)
  if written ~= #text then
    uv.fs_unlink(path)
    return nil, werr or 'short write'
  end
  return path
end

-- The lock, whole at once: a private new file renamed onto <port>.lock.
local function write_lock(dir, port, text)
  local tmp, err = write_new(('%s/.%d.lock.%s.tmp'):format(dir, port, hex(uv.random(4))), text)
  if not tmp then return nil, err end
  local path = dir .. '/' .. port .. '.lock'
  local ok, rerr = uv.fs_rename(tmp, path)
  if not ok then
    uv.fs_unlink(tmp)
    return nil, rerr
  end
  return path
end

---@class claude_nvim.Activation
---@field port integer
---@field lock string the lock file written
---@field env string[] the server's environment ("K=V"): Neovim's, its token, its files
---@field fd integer the listening socket, for the server's fd 3 (closed by M.handed_over)
---@field claude {env: table<string, string>, args: string[]} what a claude needs to connect
---@field files string[] what to remove if the server never takes over
---@field tcp uv.uv_tcp_t Neovim's copy of the socket
---@field unwatched boolean Neovim's loop does not watch it: the server may start later
---@field job? {stop: fun()} the server's job, once spawned (claude_nvim's serve_activated)

--- Bind 127.0.0.1:0, make the token, write the lock and the --mcp-config file for them: the
--- server's share of starting, done in a few milliseconds; nil and why when it cannot be.
--- `server_lua`: the server's Lua folder (src/claude_nvim/ of this checkout).
---@param server_lua string
---@return claude_nvim.Activation|nil
---@return string|nil why
function M.prepare(server_lua)
  local dir, why = lock_dir()
  if not dir then return nil, why end
  local tcp = uv.new_tcp()
  local ok, err = tcp:bind('127.0.0.1', 0)
  local fd, ferr = tcp:fileno()  -- made by bind
  local unwatched = ok and fd and listen_outside_loop(fd) or false
  -- Else libuv's: Neovim's loop watches it from its next turn, so it is closed in the same
  -- tick it is handed over.
  if ok and not unwatched then ok, err = tcp:listen(128, function() end) end
  if not ok then
    tcp:close()
    return nil, 'cannot listen on 127.0.0.1: ' .. tostring(err)
  end
  local bound, berr = tcp:getsockname()
  if not bound or not fd then
    tcp:close()
    return nil, 'cannot listen on 127.0.0.1: ' .. tostring(berr or ferr)
  end
  local port = bound.port
  local token = hex(uv.random(16))
  local cwd = vim.fn.getcwd()
  local project = vim.fs.basename(cwd)
  local lock_text = vim.json.encode({
    pid = vim.fn.getpid(), workspaceFolders = { cwd }, transport = 'ws', authToken = token,
    ideName = project ~= '' and ('Neovim · ' .. project) or 'Neovim' })
  local mcp_config = ('%s/mcp-config-%d-%s.json'):format(dir, port, hex(uv.random(8)))
  local mcp_text = vim.json.encode({ mcpServers = { nvim = {  -- _wire/constants.py's
    type = 'ws', url = ('ws://127.0.0.1:%d/mcp'):format(port),
    headers = { ['X-Claude-Code-Ide-Authorization'] = token } } } })
  local settings = vim.fn.readfile(server_lua .. '_hooks/claude_settings.json')
  local lock, lerr = write_lock(dir, port, lock_text)
  local config = lock and write_new(mcp_config, mcp_text)
  if not (lock and config) then
    if lock then uv.fs_unlink(lock) end
    tcp:close()
    return nil, 'cannot write the lock file in ' .. dir .. ': ' .. tostring(lerr)
  end
  local core = dofile(server_lua .. '_core/core.lua')  -- a private copy, for claude_env
  core.editor_script = server_lua .. '_core/claude_editor.lua'
  local env = {}
  for name, value in pairs(vim.fn.environ()) do
    if name ~= 'CLAUDE_NVIM_TOKEN' and name ~= 'CLAUDE_NVIM_MCP_CONFIG' then
      env[#env + 1] = name .. '=' .. value
    end
  end
  vim.list_extend(env, { 'CLAUDE_NVIM_TOKEN=' .. token, 'CLAUDE_NVIM_MCP_CONFIG=' .. config })
  return { port = port, lock = lock, env = env, fd = fd, tcp = tcp, unwatched = unwatched,
           files = { lock, config },
           claude = { env = core.claude_env(port, nil), args = { '--mcp-config', config,
                                                                  '--settings',
                                                                  table.concat(settings, '\n') } } }
end

--- The server has the socket (or failed to start): Neovim's copy is closed, at once.
---@param activation claude_nvim.Activation
function M.handed_over(activation)
  if not activation.tcp:is_closing() then activation.tcp:close() end
end

--- The server is gone: what it did not remove (it never started) goes.
---@param activation claude_nvim.Activation
function M.clean_up(activation)
  for _, path in ipairs(activation.files) do uv.fs_unlink(path) end
end

return M
