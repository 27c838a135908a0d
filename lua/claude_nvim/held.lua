-- Claudes that outlive Neovim (opts.claude.outlive): each runs under a holder
-- (`claude-nvim hold`, src/claude_nvim/_hold/) with its socket and its JSON file in the
-- project's directory (claude_nvim.project); a Claude terminal is attached to one
-- (claude_nvim.attach, or the Python client where M.start cannot be used).
-- This module knows the holders of this project and speaks to them; claude_nvim.terminal
-- makes the terminals.
local uv = vim.uv or vim.loop
local M = {}

local project = nil  -- the project's working directory, fixed when first needed

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

-- The claims this Neovim made (M.claim), by number: their files.
---@type table<integer, string>
local claims = {}

-- The pid a claim names, or nil.
local function claimant(path)
  local file = io.open(path, 'r')
  if not file then return nil end
  local pid = tonumber(file:read(32))
  file:close()
  return pid
end

-- A file of `text` at `path`, whole before anyone sees it (made aside, then linked or renamed
-- there: `place`); whether it is there, else the error's name ('EEXIST': one is there).
local function put(path, text, place)
  local aside = path .. '.' .. vim.fn.getpid()
  local file = io.open(aside, 'w')
  if not file then return false, 'EACCES' end
  file:write(text)
  file:close()
  local done, _, name = place(aside, path)
  os.remove(aside)
  return done and true or false, name
end

-- What this Neovim claimed that no holder took (a Claude that failed, or ran elsewhere) ends
-- with it.
local function unclaim_all()
  for _, path in pairs(claims) do
    local pid = claimant(path)
    if pid == vim.fn.getpid() or not alive(pid) then os.remove(path) end
  end
end

--- Claim number `n` for a Claude this Neovim starts: a file made only if there is none
--- (`claude-N.claim`, in the project's directory), naming a live process (this Neovim, then
--- the holder M.start started), which the holder removes once its JSON file has the number.
--- Two Neovims starting Claudes at once get two numbers: a holder that finds its number held
--- ends its claude. False if another live process claimed `n` already, or a holder has it.
--- (Two Neovims taking over the same stale claim at the same instant may both have it.)
---@param n integer
---@return boolean
function M.claim(n)
  local dir = require('claude_nvim.project').dir(project_cwd())
  if not dir then return true end  -- (its holder says why: a directory not ours alone)
  local path = dir .. '/claude-' .. n .. '.claim'
  for _ = 1, 3 do
    local put_there, why = put(path, tostring(vim.fn.getpid()), uv.fs_link)
    if not put_there and why ~= 'EEXIST' then return true end  -- no claims there (no links?)
    if put_there then
      -- A holder that had it: it wrote its record, then removed the claim it found.
      local record = read_record(dir .. '/claude-' .. n .. '.json')
      if record and alive(record.holder) then
        os.remove(path)
        return false
      end
      if next(claims) == nil then
        vim.api.nvim_create_autocmd('VimLeavePre', { once = true, callback = unclaim_all })
      end
      claims[n] = path
      return true
    end
    local pid = claimant(path)
    if pid == vim.fn.getpid() then return true end  -- a Claude that did not start, here
    if alive(pid) then return false end
    os.remove(path)  -- (gone already, or) its Neovim or holder is gone: the number is free
  end
  return false
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
-- command's SIGINT is ignored); then it becomes the holder, claude's parent, with no end of
-- the terminal but the master (its stdin). The holder waits, having loaded next to nothing,
-- while Neovim is claude's terminal (fd 4 open: claude_nvim.attach); then it says `ok SOCKET`
-- or why on its stdout (launch.py's --adopt). (The whole holder's start beside claude's made
-- claude connect later: both cores are claude's until it is up.)
local START = [[
exec 2>&1
python=$1 boot=$2 src=$3 n=$4 project=$5; shift 5
env --default-signal setsid --ctty "$@" <&3 >&3 2>&3 3>&- 4<&- &
exec 3>&- "$python" -I -S -c "$boot" "$src" --adopt "$!" --wait 4 --number "$n" \
  --project "$project" -- "$@"
]]

--- While claude starts, Neovim is its terminal; its holder starts once a Claude connects, or
--- this long after claude started, whichever comes first (or when Neovim exits, or the user
--- names or stops that Claude). Not an option: tests change it.
M.hold_after_ms = 3000

-- Whether this system's env and setsid run START: found out once, by a check that runs
-- while the plugin gets the rest ready (M.prepare).
---@type boolean|vim.SystemObj|nil
local can_start = nil

--- A Claude is about to start: find out (once, in the background) whether START can run.
function M.prepare()
  if can_start ~= nil then return end
  -- coreutils' env knows --default-signal since 8.31 (2019); util-linux's setsid, --ctty.
  local ok, check = pcall(vim.system, { 'env', '--default-signal', 'setsid', '--ctty',
                                        '--version' })
  can_start = ok and check or false
end

-- The Python to start holders with, where claude can start before it (see START): nil where
-- it cannot (no pseudo-terminals from Lua, an env or setsid without those options, no known
-- Python).
local function quick_python()
  if not (SRC and require('claude_nvim.pty').available()) then return nil end
  M.prepare()
  if type(can_start) == 'table' then  -- its answer, at once if it came meanwhile
    local ok, done = pcall(can_start.wait, can_start, 2000)
    can_start = ok and done.code == 0
  end
  if not can_start then return nil end
  local cmd = require('claude_nvim').command()
  local python = cmd and python_of(cmd)
  return python and uv.fs_stat(SRC .. '/claude_nvim/_hold/launch.py') and python or nil
end

---@class claude_nvim.Early a held Claude before its holder runs: Neovim is its terminal
---@field master integer its pseudo-terminal's master end: Neovim's until it releases it
---@field shown fun(data: string) claude wrote `data`, which Neovim shows: for the holder's ring
---@field release fun() Neovim no longer reads or writes the master end: the holder starts
---@field due? fun() what the terminal does when the holder is to start (it then releases)

-- The holders still starting, by socket: the calls waiting for them (tell_holder), and what
-- makes one start now.
---@type table<string, {calls: fun(up: boolean)[], due: fun()}>
local starting = {}

--- Start `argv` (claude and its arguments) as Claude `n`, in a terminal of `rows` x `cols`,
--- with `env` added to Neovim's environment, at once: true, the pid that is its holder (claude
--- descends from it), its socket-to-be, and `early`: until `early.release()`, Neovim is
--- claude's terminal, through `early.master`. `early.due()` comes when the holder is to start.
--- Later, in the loop: `on.up()` once the holder listens at the socket, or `on.failed(why)` if
--- it could not start. False where this cannot be done (M.start_command can).
---@param n integer
---@param argv string[]
---@param env table<string, string>|nil
---@param rows integer
---@param cols integer
---@param on {up: fun(), failed: fun(why: string)}
---@return boolean started
---@return integer|nil holder
---@return string|nil sock
---@return claude_nvim.Early|nil early
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
  local out, hold = uv.new_pipe(false), uv.new_pipe(false)
  local handle ---@type uv.uv_process_t?
  local spawned
  handle, spawned = uv.spawn('sh', {
    args = vim.list_extend({ '-c', START, 'sh', python, BOOT, SRC, tostring(n), project_cwd() },
      argv),
    stdio = { master, out, slave, slave, hold }, env = list, detached = true,
  }, function() if handle then handle:close() end end)
  pty.close(slave)
  if not handle then
    pty.close(master)
    out:close()
    hold:close()
    return false
  end
  handle:unref()  -- the holder outlives this Neovim; nothing here waits for it
  if claims[n] then put(claims[n], tostring(spawned), uv.fs_rename) end  -- it outlives Neovim
  local function started(up)
    local calls = starting[sock] and starting[sock].calls or {}
    starting[sock] = nil
    for _, call in ipairs(calls) do call(up) end
  end
  local said, ok = {}, false
  out:read_start(function(err, data)
    if data and not err then
      said[#said + 1] = data
      if not ok and ('\n' .. table.concat(said)):find('\nok ') then
        ok = true
        vim.schedule(function()
          started(true)  -- up: M.stop tells it
          on.up()
        end)
      end
      return
    end
    out:close()
    if ok then return end
    local text = table.concat(said)
    vim.schedule(function()
      started(false)
      on.failed(text ~= '' and (text:gsub('%s+$', '')) or 'its holder did not start')
    end)
  end)
  -- The holder waits while `hold` is open, and keeps what comes there: claude's output shown
  -- meanwhile. Closed (Neovim's exit closes it too), it starts.
  local timer = uv.new_timer()
  local connected ---@type integer?
  local released = false
  ---@type claude_nvim.Early
  local early = {
    master = master,
    shown = function(data) if not released then hold:write(data) end end,
    release = function()
      if released then return end
      released = true
      if not hold:shutdown(function() hold:close() end) then hold:close() end  -- once shown
      timer:close()
      vim.schedule(function() pcall(vim.api.nvim_del_autocmd, connected) end)
    end,
  }
  local function due() (early.due or early.release)() end
  timer:start(M.hold_after_ms, 0, vim.schedule_wrap(due))
  connected = vim.api.nvim_create_autocmd('User', { pattern = 'ClaudeNvimConnected',
    once = true, callback = function() vim.schedule(due) end })
  starting[sock] = { calls = {}, due = due }
  return true, spawned, sock, early
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

-- Send the holder at `sock` one frame, without waiting for it (one still starting, M.start:
-- once it is up, and it starts now); then `done(ok)`, in the loop.
local function tell_holder(sock, kind, payload, done)
  local holder = starting[sock]
  if holder then
    table.insert(holder.calls, function(up)
      if up then return tell_holder(sock, kind, payload, done) end
      if done then done(false) end
    end)
    return holder.due()
  end
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
--- the holder ends with it); one still starting (M.start), once it is up.
---@param sock string
function M.stop(sock) tell_holder(sock, 'K', '') end

return M
