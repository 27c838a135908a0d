-- The Claude terminals: `claude` in a terminal buffer named `Claude N`, started by the plugin
-- itself with what the server publishes (its environment and arguments), that can be hidden
-- (claude keeps running) and shown again; it closes when claude exits. Several can run: they
-- take turns in one window (the Claude window, pinned to them with 'winfixbuf') and
-- :ClaudeNvim toggles the current one, the last shown or entered. Their names, the Claude
-- window's bar and the picker are claude_nvim.claudes'.
local api = vim.api
local M = {}

---@class claude_nvim.RunningClaude
---@field n integer its number (Claude 2)
---@field buf integer its terminal buffer
---@field job? integer its terminal's channel, once claude runs there: its job's id, or that of
---  a terminal attached to its holder (claude_nvim.attach)
---@field input? fun(data: string): boolean types into it, once claude runs there
---@field started integer when it started (os.time())
---@field sock? string its holder's socket, when it runs under one (claude_nvim.held)
---@field ended? boolean its terminal's job has exited, or its attached terminal has ended
---@field stopping? boolean the user stopped it: its buffer goes, whatever its code
---@field naming? boolean its name is on the way to its holder
---@field kept_name? string the name its holder has

---@type claude_nvim.RunningClaude[]
local claudes = {}    -- the running ones, oldest first: { n, buf, job (its id), started }
---@type claude_nvim.RunningClaude?
local current = nil   -- one of them, or nil
local PINS = vim.fn.exists('+winfixbuf') == 1  -- Neovim 0.10 and later

local function tell(msg, level) require('claude_nvim').tell(msg, level) end
local function names() return require('claude_nvim.claudes') end
local function held() return require('claude_nvim.held') end

local function forget(claude)
  for i, other in ipairs(claudes) do
    if other == claude then table.remove(claudes, i); break end
  end
  if current == claude then current = claudes[#claudes] end
end

-- The running Claudes (one whose buffer was wiped is gone, even before its exit arrives).
local function running()
  for _, claude in ipairs(vim.list_slice(claudes)) do
    if not api.nvim_buf_is_valid(claude.buf) then forget(claude) end
  end
  return claudes
end

local function is_claude(buf)
  for _, claude in ipairs(running()) do
    if claude.buf == buf then return true end
  end
  return false
end

--- Whether a Claude terminal of this Neovim runs.
---@return boolean
function M.running() return #running() > 0 end

-- The numbers Claude terminals have (one that failed keeps its number on screen), as a set.
local function taken_numbers()
  local taken = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    local n = vim.b[buf].claude_nvim_terminal
    if n then taken[n] = true end
  end
  if held().enabled() then  -- and those of this project's holders, attached elsewhere too
    for _, holder in ipairs(held().holders()) do taken[holder.n] = true end
  end
  return taken
end

-- The lowest number from `from` (1) not in `taken` (taken_numbers()).
local function free_number(from, taken)
  taken = taken or taken_numbers()
  local n = from or 1
  while taken[n] do n = n + 1 end
  return n
end

-- `claude`'s number, claimed before its holder starts (held.claim): one another Neovim's
-- Claude took meanwhile gives way to the next free one.
local function claim_number(claude)
  local taken, n = nil, claude.n
  while not held().claim(n) do
    taken = taken or taken_numbers()
    n = free_number(n + 1, taken)
  end
  claude.n = n
  vim.b[claude.buf].claude_nvim_terminal = n
end

-- A window of this tab showing `claude` (the current window if it is one), or nil.
local function window_of(claude)
  local here, tab, found = api.nvim_get_current_win(), api.nvim_get_current_tabpage(), nil
  for _, win in ipairs(vim.fn.win_findbuf(claude.buf)) do
    if win == here then return win end
    if not found and api.nvim_win_get_tabpage(win) == tab then found = win end
  end
  return found
end

-- The Claude window of this tab: where the current Claude is, else another one; or nil.
local function claude_window()
  local win = current and window_of(current)
  for _, claude in ipairs(running()) do win = win or window_of(claude) end
  return win
end

-- The window to go back to from a Claude: the file window the user was in last (the server's
-- one rule, core.editor_window), else the previous window.
local function back()
  local core = require('claude_nvim').live('core')
  local win = core and core.editor_window()
  if win then return api.nvim_set_current_win(win) end
  vim.cmd('wincmd p')
end

-- A share (< 1) of `total`, or a number of cells.
local function cells(size, total)
  size = tonumber(size) or 0.4
  return math.max(1, math.floor(size < 1 and total * size or size))
end

-- `win` shows `buf`: a Claude window is pinned to its terminal (:edit there is refused), and
-- only the plugin changes what it shows. Its bar lists the Claudes (opts.terminal.bar).
local BAR = "%!v:lua.require'claude_nvim.claudes'.bar()"
local function show_in(win, buf)
  if PINS then vim.wo[win].winfixbuf = false end
  api.nvim_win_set_buf(win, buf)
  for option, value in pairs({ number = false, relativenumber = false, signcolumn = 'no',
                                spell = false }) do
    vim.wo[win][option] = value
  end
  if require('claude_nvim').config.terminal.bar ~= false then vim.wo[win].winbar = BAR end
  if PINS then vim.wo[win].winfixbuf = true end
end

-- A new window for `buf`, where opts.terminal.position says; it becomes the current one.
local function open_window(buf)
  local opts = require('claude_nvim').config.terminal
  local position, size = opts.position or 'right', opts.size
  if position == 'float' then
    local width, height = cells(size or 0.8, vim.o.columns), cells(size or 0.8, vim.o.lines)
    local win = api.nvim_open_win(buf, true, { relative = 'editor', border = 'rounded',
      width = width, height = height, row = math.floor((vim.o.lines - height) / 2) - 1,
      col = math.floor((vim.o.columns - width) / 2) })
    show_in(win, buf)
    return win
  end
  if position == 'tab' then
    vim.cmd('tab split')
  else
    local split = ({ right = 'botright vsplit', left = 'topleft vsplit',
                     bottom = 'botright split', top = 'topleft split' })[position]
    if split == nil then
      tell('opts.terminal.position ' .. vim.inspect(position) .. ' is not right, left, '
        .. 'bottom, top, float or tab: using right', 'WARN')
      split, position = 'botright vsplit', 'right'
    end
    vim.cmd(split)
  end
  local win = api.nvim_get_current_win()
  show_in(win, buf)
  if position == 'right' or position == 'left' then
    api.nvim_win_set_width(win, cells(size, vim.o.columns))
    vim.wo[win].winfixwidth = true
  elseif position == 'bottom' or position == 'top' then
    api.nvim_win_set_height(win, cells(size, vim.o.lines))
    vim.wo[win].winfixheight = true
  end
  return win
end

-- In the Claude window `win` (the buffer it showed stays running), else in a new window.
local function place(buf, win)
  if win == nil then return open_window(buf) end
  api.nvim_set_current_win(win)
  show_in(win, buf)
  return win
end

--- Name the terminal `buf` `label` ("Claude 2 · fix the parser": a tab shows it so), leaving no
--- buffer of its old name. A buffer of that name (a file called so) keeps it: this one is then
--- claude-nvim://label.
---@param buf integer
---@param label string
function M.set_name(buf, label)
  local old = api.nvim_buf_get_name(buf)
  for _, new in ipairs({ label, 'claude-nvim://' .. label }) do
    if pcall(api.nvim_buf_set_name, buf, new) then break end
  end
  local bufs = api.nvim_list_bufs()  -- renaming made one for the old name: the newest buffer
  local stale = bufs[#bufs]
  if stale ~= buf and old ~= '' and api.nvim_buf_get_name(stale) == old then
    pcall(api.nvim_buf_delete, stale, { force = true })
  end
end

-- `claude` cannot run: its window stays, saying why.
local function failed(claude, why)
  forget(claude)
  local buf = claude.buf
  if not api.nvim_buf_is_valid(buf) then return end
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, { 'claude-nvim: ' .. why })
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  vim.bo[buf].bufhidden = 'wipe'
  tell('Claude ' .. claude.n .. ' did not start: ' .. why, 'WARN')
end

-- `claude`'s terminal has ended with `code` (claude's, its client's), or without claude's,
-- for `why` (an attached one: claude_nvim.attach), `refused` if it is open in another Neovim:
-- its windows close with it; one that failed stays on screen, saying why.
local function exited(claude, code, exe, why, refused)
  claude.ended = true  -- wiping its buffer now stops no holder
  forget(claude)
  local buf = claude.buf
  if not api.nvim_buf_is_valid(buf) then return end
  vim.b[buf].claude_nvim_pid = nil  -- no Claude runs there any more (core's terminals())
  if refused then  -- not here then
    tell('Claude ' .. claude.n .. ' is open in another Neovim', 'WARN')
    pcall(api.nvim_buf_delete, buf, { force = true })
    return
  end
  if code ~= 0 and not claude.stopping then
    vim.bo[buf].bufhidden = 'wipe'
    return tell('Claude ' .. claude.n .. (why and (': ' .. why) or (' (`' .. exe
      .. '`) exited with code ' .. code)), 'WARN')
  end
  -- A last window gets an empty buffer instead.
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if PINS then vim.wo[win].winfixbuf = false end
  end
  pcall(api.nvim_buf_delete, buf, { force = true })
end

-- claude runs in `claude`'s terminal now: it is typed into with `input`.
local function running_in(claude, job, input)
  claude.job, claude.input = job, input
  vim.bo[claude.buf].bufhidden = 'hide'  -- a hidden Claude keeps running
  names().refresh()
  names().watch()
  if api.nvim_get_current_buf() == claude.buf then vim.cmd('startinsert') end
end

-- Run `cmd` in `claude`'s buffer (with `env`), as its terminal: Terminal mode if in view.
local function launch(claude, cmd, env, exe)
  local buf = claude.buf
  local job_opts = { env = env, on_exit = function(_, code)
    claude.ended = true
    vim.schedule(function() exited(claude, code, exe) end)
  end }
  vim.bo[buf].modifiable = true
  local job = api.nvim_buf_call(buf, function()
    if vim.fn.has('nvim-0.11') == 1 then
      job_opts.term = true
      return vim.fn.jobstart(cmd, job_opts)
    end
    return vim.fn.termopen(cmd, job_opts)
  end)
  if job <= 0 then return failed(claude, 'cannot run ' .. cmd[1]) end
  running_in(claude, job, function(data) return (pcall(vim.fn.chansend, job, data)) end)
end

-- `claude`'s buffer becomes a terminal attached to its holder, at claude.sock; it connects
-- at client.connect(). Given `early`, it is claude's own terminal until then.
---@param early? claude_nvim.Early
---@return claude_nvim.Attached
local function attach(claude, exe, early)
  vim.bo[claude.buf].modifiable = true
  local client = require('claude_nvim.attach').open(claude.buf, claude.sock,
    function(code, why, refused) exited(claude, code, exe, why, refused) end, early)
  running_in(claude, client.chan, client.input)
  return client
end

-- Run claude in `claude`'s buffer with what the server published (`info.claude`), then the
-- user's `args`: under a holder of its own if Claudes outlive Neovim (claude_nvim.held).
local function run(claude, info, args)
  local buf = claude.buf
  if not api.nvim_buf_is_valid(buf) then return forget(claude) end  -- closed meanwhile
  local exe = vim.env.CLAUDE_NVIM_CLAUDE or 'claude'
  local elsewhere = info.claude.remote  -- the server serves Claudes there (claude_nvim.remote)
  local remote = require('claude_nvim.remote')
  if elsewhere and not remote.target() then
    return failed(claude, 'this Neovim\'s server serves Claude on ' .. tostring(elsewhere)
      .. ', not started by this plugin: start Claude there, or :ClaudeNvim ssh://host/path')
  end
  if not elsewhere and vim.fn.executable(exe) == 0 then
    return failed(claude, '`' .. exe .. '` is not on PATH; install Claude Code (npm install -g '
      .. '@anthropic-ai/claude-code) or set $CLAUDE_NVIM_CLAUDE to it')
  end
  local cmd = vim.list_extend({ exe }, vim.list_extend(vim.deepcopy(info.claude.args or {}),
    M.user_args(args)))
  local why
  if elsewhere then  -- claude there, through the user's target: the port there in its env
    local claude_nvim
    claude_nvim, why = require('claude_nvim').command()
    if not claude_nvim then return failed(claude, why) end
    cmd = remote.claude_command(claude_nvim, vim.list_slice(cmd, 2))
  elseif held().enabled() then
    claim_number(claude)
    local win = window_of(claude)
    local rows = win and api.nvim_win_get_height(win) or vim.o.lines
    local cols = win and api.nvim_win_get_width(win) - vim.fn.getwininfo(win)[1].textoff
      or vim.o.columns
    -- claude at once, this terminal its own, its holder once it is up; this terminal then
    -- attaches to its holder.
    local client ---@type claude_nvim.Attached?
    local started, holder, sock, early = held().start(claude.n, cmd, info.claude.env, rows,
      math.max(cols, 1), {
        up = function() if client then client.connect() end end,
        failed = function(err) if client then client.fail(err) end end })
    if started then
      claude.sock = sock
      vim.b[buf].claude_nvim_pid = holder  -- claude descends from it; none from this terminal
      client = attach(claude, exe, early)
      return
    end
    -- Where it cannot: its holder is this terminal's child; its socket is known.
    cmd, why = held().start_command(claude.n, cmd)
    if not cmd then return failed(claude, why) end
    launch(claude, cmd, info.claude.env, exe)
    claude.sock = held().socket(claude.n)
    return
  end
  launch(claude, cmd, info.claude.env, exe)
end

--- The arguments for a claude the user starts with `args`: opts.claude's (its args, and its
--- permission_mode unless `args` choose one), then `args`.
---@param args string[]
---@return string[]
function M.user_args(args)
  local opts = require('claude_nvim').config.claude or {}
  local all = vim.deepcopy(opts.args or {})
  local chosen = false
  for _, arg in ipairs(vim.list_extend(vim.deepcopy(all), args)) do
    if arg == '--permission-mode' or arg:match('^%-%-permission%-mode=')
        or arg == '--dangerously-skip-permissions' then chosen = true end
  end
  if opts.permission_mode and not chosen then
    vim.list_extend(all, { '--permission-mode', opts.permission_mode })
  end
  return vim.list_extend(all, args)
end

-- A Claude terminal buffer numbered `n` (not shown yet), which becomes the current Claude.
local function new_claude(n, started)
  local buf = api.nvim_create_buf(false, true)
  local claude = { n = n, buf = buf, started = started or os.time() }
  vim.bo[buf].modifiable = false  -- until claude runs in it
  vim.b[buf].claude_nvim_terminal = n
  vim.schedule(function()  -- for the user's keymaps and statuslines (FileType): after this
    -- command (its ftplugin and syntax search takes 2 ms and more, not on claude's way)
    if api.nvim_buf_is_valid(buf) then vim.bo[buf].filetype = 'claude_nvim' end
  end)
  claudes[#claudes + 1], current = claude, claude
  api.nvim_create_autocmd({ 'BufEnter', 'WinEnter' }, { buffer = buf, callback = function()
    if is_claude(buf) then current = claude end
  end })
  -- A held Claude whose buffer the user wipes (:bwipeout!) ends with it, as one not held
  -- does; quitting Neovim leaves it running.
  api.nvim_create_autocmd('BufWipeout', { buffer = buf, once = true, callback = function()
    if claude.sock and claude.job and not (claude.stopping or claude.ended)
        and vim.v.exiting == vim.NIL then
      held().stop(claude.sock)
    end
  end })
  return claude
end

-- The project's Claudes that run under holders and have no terminal here (started by a Neovim
-- that quit): a terminal attached to each, hidden, with the number and name they had.
---@return boolean adopted whether it found any
local function adopt()
  if not held().enabled() then return false end
  local adopted = false
  local here = {}
  for _, claude in ipairs(running()) do
    if claude.sock then here[claude.sock] = true end
  end
  for _, holder in ipairs(held().holders()) do
    if not here[holder.sock] then
      local claude = new_claude(holder.n, math.floor(holder.started))
      claude.sock = holder.sock
      vim.b[claude.buf].claude_nvim_pid = holder.holder  -- claude descends from it
      if holder.name then vim.b[claude.buf].claude_nvim_name = holder.name end
      claude.kept_name = holder.name
      adopted = true
      attach(claude, 'claude').connect()
    end
  end
  return adopted
end

-- A new Claude, in the Claude window `win` (the one it showed keeps running) or a new one.
local function start(args, win)
  if held().enabled() then held().prepare() end
  local claude = new_claude(free_number())
  place(claude.buf, win)
  -- At once: its connection waits for a server still starting (claude_nvim.activate).
  require('claude_nvim').when_listening(function(info) run(claude, info, args) end,
    function(why) failed(claude, why) end)
end

-- Show `claude` here: in the Claude window of this tab, else in a new one.
local function show(claude)
  -- Shown in another tab: it moves here.
  for _, win in ipairs(vim.fn.win_findbuf(claude.buf)) do pcall(api.nvim_win_close, win, false) end
  place(claude.buf, claude_window())
  current = claude
  vim.cmd('startinsert')
end

local function hide(win)
  if not pcall(api.nvim_win_close, win, false) then
    -- The last window: it shows another buffer instead (a new empty one if need be).
    if PINS then vim.wo[win].winfixbuf = false end
    local alternate = vim.fn.bufnr('#')
    if alternate > 0 and vim.fn.buflisted(alternate) == 1 then
      api.nvim_win_set_buf(win, alternate)
    else
      api.nvim_win_set_buf(win, api.nvim_create_buf(true, false))
    end
  else
    back()
  end
end

-- To `claude`, focused and in Terminal mode: to its window in this tab, else shown here.
local function go(claude)
  local win = window_of(claude)
  if win == nil then return show(claude) end
  api.nvim_set_current_win(win)
  vim.cmd('startinsert')
end

--- Open (start or show) the current Claude terminal, focused and in Terminal mode.
---@param args string[] for claude, when it starts
function M.open(args)
  adopt()
  if not M.running() then return start(args or {}) end
  go(current)
end

--- :ClaudeNvim [args]: show the current Claude (starting claude the first time), or hide it.
---@param args string[]
function M.toggle(args)
  adopt()
  local remote = require('claude_nvim.remote')
  if args and remote.is_target(args[1]) then  -- :ClaudeNvim ssh://host/path: Claudes there
    return remote.switch(args[1], function() M.open(vim.list_slice(args, 2)) end)
  end
  local win = M.running() and window_of(current)
  if win then return hide(win) end
  if args and #args > 0 and M.running() then
    tell('claude runs already; for another with these arguments: :ClaudeNvimNew '
      .. table.concat(args, ' '), 'WARN')
  end
  M.open(args)
end

--- :ClaudeNvimNew [args]: start another Claude, in the Claude window (the one it showed keeps
--- running) or a new one.
---@param args string[]
function M.new(args)
  adopt()
  start(args or {}, M.running() and claude_window() or nil)
end

--- :ClaudeNvimSwitch [n|next]: to Claude n, or the next one, in the Claude window; with
--- neither and several Claudes, the one picked (claude_nvim.claudes' picker).
---@param n? string a number, or 'next'
function M.switch(n)
  adopt()
  local all = running()
  if #all == 0 then return tell('no Claude runs: :ClaudeNvim starts one', 'WARN') end
  if n == nil and #all > 1 then return names().pick() end
  local target
  for i, claude in ipairs(all) do
    if (n == nil or n == 'next') and claude == current then target = all[i % #all + 1] end
    if tostring(claude.n) == tostring(n) then target = claude end
  end
  if target == nil then
    return tell('no Claude ' .. tostring(n) .. ' (running: ' .. table.concat(M.numbers(), ', ')
      .. ')', 'WARN')
  end
  go(target)
end

--- The numbers of the running Claudes, as text (:ClaudeNvimSwitch completes them).
---@return string[]
function M.numbers()
  return vim.tbl_map(function(claude) return tostring(claude.n) end, running())
end

--- Type `data` into the current Claude (or the one in terminal `buf`), as keys typed in its
--- terminal; false when none runs there.
---@param data string
---@param buf? integer
---@return boolean
function M.input(data, buf)
  buf = buf or (current and current.buf)
  for _, claude in ipairs(running()) do
    if claude.buf == buf and claude.input then return claude.input(data) end
  end
  return false
end

--- The running Claudes, oldest first: { n, buf, job (its terminal's channel: see M.info),
--- started (os.time()), current }.
---@return {n: integer, buf: integer, job: integer|nil, started: integer, current: boolean}[]
function M.list()
  return vim.tbl_map(function(claude)
    return { n = claude.n, buf = claude.buf, job = claude.job, started = claude.started,
             current = claude == current }
  end, running())
end

--- :ClaudeNvimRename [name]: name the current Claude (tabs, its bar, messages); with no name,
--- it is named by its title again.
---@param name string '' for its title
function M.rename(name)
  adopt()
  if not M.running() then return tell('no Claude runs: :ClaudeNvim starts one', 'WARN') end
  name = name and vim.trim((name:gsub('%c', ' '))) or ''
  vim.b[current.buf].claude_nvim_name = name ~= '' and name or nil
  M.keep_names()
  names().refresh()
end

--- Each held Claude's name, told to its holder until it has it (for the next Neovim); its
--- holder may not listen yet when the user names it (claude_nvim.claudes' timer calls this).
function M.keep_names()
  for _, claude in ipairs(running()) do
    local name = vim.b[claude.buf].claude_nvim_name or ''
    if claude.sock and claude.job and (claude.kept_name or '') ~= name and not claude.naming then
      claude.naming = true
      held().name(claude.sock, name, function(ok)
        claude.naming = nil
        if ok then claude.kept_name = name end
      end)
    end
  end
end

--- :ClaudeNvimStop[!]: end the current Claude; with `all`, all of them (under holders: all of
--- this project's, those open in another Neovim too).
---@param all boolean
function M.stop(all)
  adopt()
  if all and held().enabled() then
    for _, holder in ipairs(held().holders()) do held().stop(holder.sock) end
  end
  if not M.running() then
    if not all then tell('no Claude runs', 'WARN') end
    return
  end
  for _, claude in ipairs(all and vim.list_slice(running()) or { current }) do
    claude.stopping = true  -- its buffer goes, whatever its code
    if claude.sock and claude.job then
      held().stop(claude.sock)
    elseif claude.job then
      vim.fn.jobstop(claude.job)
    else  -- waiting for its server
      forget(claude)
      pcall(api.nvim_buf_delete, claude.buf, { force = true })
    end
  end
end

--- Attach terminals to this project's Claudes that outlived a Neovim (at start-up, and at the
--- commands that show a Claude); true when it found any (then they need the server).
---@return boolean
function M.adopt() return adopt() end

--- :ClaudeNvimFocus: to the current Claude (opening it if hidden), or from it back.
function M.focus()
  adopt()
  local win = M.running() and window_of(current)
  if win and win == api.nvim_get_current_win() then return back() end
  M.open({})
end

--- Show the current Claude if it is hidden (in the Claude window of this tab, else a new one);
--- the cursor stays where it is.
function M.reveal()
  if not M.running() or window_of(current) then return end
  local here = api.nvim_get_current_win()
  place(current.buf, claude_window())
  if api.nvim_win_is_valid(here) then api.nvim_set_current_win(here) end
end

--- The current Claude: its number, buffer, terminal's channel (`job`: nil while its server
--- starts; a held Claude's terminal has no job, so type into a Claude with M.input) and window
--- in this tab (nil when hidden); nil when none runs (for tests and the user's own mappings).
---@return {n: integer, buf: integer, job: integer|nil, win: integer|nil}|nil
function M.info()
  if not M.running() then return nil end
  return { n = current.n, buf = current.buf, job = current.job, win = window_of(current) }
end

return M
