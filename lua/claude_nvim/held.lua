-- Claudes that outlive Neovim (opts.claude.outlive): each runs under a holder
-- (`claude-nvim hold`, src/claude_nvim/_hold/) with its socket and its JSON file in the
-- project's directory (claude_nvim.project); a Claude terminal is attached to one
-- (claude_nvim.attach, or the Python client where M.start cannot be used).
-- This module knows the holders of this project and speaks to them; claude_nvim.terminal
-- makes the terminals.
local uv = vim.uv or vim.loop
local M = {}

local project = nil  -- the project's working directory, fixed when first needed
---@type table<string, uv.uv_process_t>
local starting = {}  -- the holders M.start started that have not said ok yet, by socket

--- Whether Claudes run under holders: opts.claude.outlive, on a system with Unix sockets.
---@return boolean
function M.enabled()
  local opts = require('claude_nvim').config.claude or {}
  return opts.outlive ~= false and vim.fn.has('unix') == 1
end

-- The project: Neovim's working directory when the plugin first needed it.
local function project_cwd()
  project = project or vim.fn.getcwd()
  return project
end

local MAX_RECORD = 64 * 1024

local function read_record(path)
  local file = io.open(path, 'r')
  if not file then return nil end
  local text = file:read(MAX_RECORD)
  file:close()
  local ok, record = pcall(vim.json.decode, text or '')
  return ok and type(record) == 'table' and record or nil
end

local function alive(pid)
  return type(pid) == 'number' and pid > 1 and uv.kill(pid, 0) == 0
end

---@class claude_nvim.Holder
---@field n integer its Claude's number
---@field sock string its socket
---@field holder integer its pid
---@field claude integer|nil claude's pid
---@field name string|nil the user's name for that Claude
---@field started number when it started (seconds since the epoch)

--- The live holders of this project, by number.
---@return claude_nvim.Holder[]
function M.holders()
  -- A Neovim that only looks makes no directory.
  local dir = require('claude_nvim.project').dir(project_cwd(), true)
  local handle = dir and uv.fs_scandir(dir)
  local found = {}
  while handle do
    local name = uv.fs_scandir_next(handle)
    if not name then break end
    local n = name:match('^claude%-(%d+)%.json$')
    local record = n and read_record(dir .. '/' .. name)
    if record and alive(record.holder) then
      found[#found + 1] = { n = tonumber(n), sock = dir .. '/claude-' .. n .. '.sock',
        holder = record.holder, claude = tonumber(record.claude),
        name = type(record.name) == 'string' and record.name or nil,
        started = tonumber(record.started) or os.time() }
    end
  end
  table.sort(found, function(a, b) return a.n < b.n end)
  return found
end

--- The socket of Claude `n`'s holder (whose start makes the directory, and checks it).
---@param n integer
---@return string
function M.socket(n)
  return require('claude_nvim.project').path(project_cwd()) .. '/claude-' .. n .. '.sock'
end

-- The holder starts with claude (before it, with its client, where M.start cannot be used),
-- which needs a second before it connects: so where the install's Python is known, they run
-- from this checkout's src/ with no site, argparse or logging (`python -I -S`: 15-20 ms
-- sooner than `claude-nvim hold`); they need only the standard library
-- (src/claude_nvim/_hold/launch.py).
local SRC = debug.getinfo(1, 'S').source:sub(2):match('^(.*)/lua/claude_nvim/held%.lua$')
SRC = SRC and SRC .. '/src'
local BOOT = 'import sys; sys.path.insert(0, sys.argv.pop(1)); '
  .. 'from claude_nvim._hold.launch import main; sys.exit(main(sys.argv[1:]))'

-- The Python that runs the claude-nvim command `cmd`: `{python, '-m', 'claude_nvim'}`'s, or
-- the one its script names (`#!/…/python3`); nil when neither.
local function python_of(cmd)
  if #cmd == 3 and cmd[2] == '-m' and cmd[3] == 'claude_nvim' then return cmd[1] end
  if #cmd ~= 1 then return nil end
  local file = io.open(cmd[1], 'rb')
  if not file then return nil end
  local head = file:read(512) or ''
  file:close()
  local python = head:match('^#!(/%S+)\r?\n')
  return python and vim.fs.basename(python):match('^python[%d.]*$') and python or nil
end

--- The command of a terminal that runs `claude-nvim hold ARGS`; nil and why when there is no
--- claude-nvim to run.
---@param args string[]
---@return string[]|nil
---@return string|nil why
function M.hold_command(args)
  local cmd, why = require('claude_nvim').command()
  if not cmd then return nil, why end
  local python = SRC and python_of(cmd)
  if python and uv.fs_stat(SRC .. '/claude_nvim/_hold/launch.py') then
    return vim.list_extend({ python, '-I', '-S', '-c', BOOT, SRC }, args)
  end
  return vim.list_extend(cmd, vim.list_extend({ 'hold' }, args))
end

-- claude, then its holder, from one spawn of `sh`: it starts claude in the background, on
-- the slave end of a pseudo-terminal Neovim made (claude_nvim.pty) as its controlling one, in
-- a session of its own, with its signals as a command's (`env --default-signal`: a background
-- command's SIGINT is ignored); then it becomes the holder, claude's parent: the master end
-- is its stdin, and it says `ok SOCKET` or why on its stdout (launch.py's --adopt).
-- (Starting the holder later, to leave claude's start both cores, made claude slower: until
-- the holder runs, nothing answers what claude asks its terminal.)
local START = [[
python=$1 boot=$2 src=$3 n=$4 project=$5; shift 5
env --default-signal setsid --ctty "$@" <&3 >&3 2>&3 3>&- &
exec "$python" -I -S -c "$boot" "$src" --adopt "$!" --number "$n" --project "$project" -- "$@" 3>&-
]]

local can_start = nil  -- whether this system's env and setsid run START (found out once)

-- The Python to start holders with, where claude can start before it (see START): nil where
-- it cannot (no pseudo-terminals from Lua, an env or setsid without those options, no known
-- Python).
local function quick_python()
  if not (SRC and require('claude_nvim.pty').available()) then return nil end
  if can_start == nil then
    -- coreutils' env knows --default-signal since 8.31 (2019); util-linux's setsid, --ctty.
    local ok, done = pcall(function()
      return vim.system({ 'env', '--default-signal', 'setsid', '--ctty', '--version' })
        :wait(2000)
    end)
    can_start = ok and done.code == 0
  end
  if not can_start then return nil end
  local cmd = require('claude_nvim').command()
  local python = cmd and python_of(cmd)
  return python and uv.fs_stat(SRC .. '/claude_nvim/_hold/launch.py') and python or nil
end

--- Start `argv` (claude and its arguments) as Claude `n`, in a terminal of `rows` x `cols`,
--- with `env` added to Neovim's environment, under a new holder that claude's start does not
--- wait for: true, the holder's pid (claude descends from it) and its socket-to-be. Later, in
--- the loop: `on.up()` once the holder listens there, or `on.failed(why)` if it could not
--- start. False where this cannot be done (M.start_command can).
---@param n integer
---@param argv string[]
---@param env table<string, string>|nil
---@param rows integer
---@param cols integer
---@param on {up: fun(), failed: fun(why: string)}
---@return boolean started
---@return integer|nil holder
---@return string|nil sock
function M.start(n, argv, env, rows, cols, on)
  local python = quick_python()
  if not python then return false end
  local pty = require('claude_nvim.pty')
  local opened, master, slave = pcall(pty.open, rows, cols)
  if not (opened and master and slave) then return false end
  local sock = M.socket(n)
  local vars = vim.fn.environ()
  -- As in Neovim's terminals: its address, TERM, and not the outer terminal's size or colours.
  for _, var in ipairs({ 'COLUMNS', 'LINES', 'TERMCAP', 'COLORTERM', 'COLORFGBG' }) do
    vars[var] = nil
  end
  vars.TERM = 'xterm-256color'
  if vim.v.servername ~= '' then vars.NVIM = vim.v.servername end
  for var, value in pairs(env or {}) do vars[var] = value end
  vars.CLAUDE_NVIM_HOLDER = sock:gsub('%.sock$', '.json')  -- launch.RECORD_VAR
  local list = {}
  for var, value in pairs(vars) do list[#list + 1] = var .. '=' .. value end
  local out = uv.new_pipe(false)
  local handle ---@type uv.uv_process_t?
  local spawned
  handle, spawned = uv.spawn('sh', {
    args = vim.list_extend({ '-c', START, 'sh', python, BOOT, SRC, tostring(n), project_cwd() },
      argv),
    stdio = { master, out, slave, slave }, env = list, detached = true,
  }, function() if handle then handle:close() end end)
  pty.close(master)
  pty.close(slave)
  if not handle then
    out:close()
    return false
  end
  handle:unref()  -- the holder outlives this Neovim; nothing here waits for it
  starting[sock] = handle
  local said = {}
  out:read_start(function(err, data)
    if data and not err then
      said[#said + 1] = data
      if starting[sock] and table.concat(said):match('^ok ') then
        starting[sock] = nil  -- up: M.stop tells it
        vim.schedule(on.up)
      end
      return
    end
    out:close()
    starting[sock] = nil
    local text = table.concat(said)
    if text:match('^ok ') then return end
    vim.schedule(function()
      on.failed(text ~= '' and (text:gsub('%s+$', '')) or 'its holder did not start')
    end)
  end)
  return true, spawned, sock
end

--- The command of a terminal that starts `argv` (claude and its arguments) as Claude `n`
--- under a new holder; nil and why when there is no claude-nvim to run.
---@param n integer
---@param argv string[]
---@return string[]|nil
---@return string|nil why
function M.start_command(n, argv)
  return M.hold_command(vim.list_extend(
    { '--number', tostring(n), '--project', project_cwd(), '--' }, argv))
end

-- Send the holder at `sock` one frame, without waiting for it; then `done(ok)`, in the loop.
local function tell_holder(sock, kind, payload, done)
  local pipe = uv.new_pipe(false)
  local function over(ok)
    pipe:close()
    if done then vim.schedule(function() done(ok) end) end
  end
  pipe:connect(sock, function(err)
    if err then return over(false) end
    local frame = require('claude_nvim.attach').frame(kind, payload)
    pipe:write(frame, function(failed) over(not failed) end)
  end)
end

--- The user named the Claude of the holder at `sock` `name` ('' for none): kept in its
--- JSON file, for the next Neovim; then `done(ok)`.
---@param sock string
---@param name string
---@param done fun(ok: boolean)
function M.name(sock, name, done) tell_holder(sock, 'N', name, done) end

--- End the Claude of the holder at `sock` (it hangs up claude, as a closed terminal would;
--- the holder ends with it). A holder still starting (M.start) is ended: claude's terminal
--- hangs up with it.
---@param sock string
function M.stop(sock)
  local handle = starting[sock]
  if handle and not handle:is_closing() then
    handle:kill('sigterm')
    return
  end
  tell_holder(sock, 'K', '')
end

return M
