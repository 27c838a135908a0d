-- The Claude terminals: `claude-nvim claude [args]` in a terminal buffer named claude-nvim://N
-- that can be hidden (claude keeps running) and shown again; it closes when claude exits.
-- Several can run: they take turns in one window (the Claude window) and :ClaudeNvim toggles
-- the current one, the last shown or entered.
local api = vim.api
local M = {}

local claudes = {}    -- the running ones, oldest first: { n = N, buf = buffer, job = job id }
local current = nil   -- one of them, or nil
local previous = nil  -- the window to go back to from a Claude
local numbered = 0    -- the last N given: a Claude keeps its number, and no number comes back

local function warn(msg) vim.notify('claude-nvim: ' .. msg, vim.log.levels.WARN) end

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
function M.running() return #running() > 0 end

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

-- Going to a Claude: remember where from (not from another Claude).
local function leaving()
  local here = api.nvim_get_current_win()
  if not is_claude(api.nvim_win_get_buf(here)) then previous = here end
end

-- A share (< 1) of `total`, or a number of cells.
local function cells(size, total)
  size = tonumber(size) or 0.4
  return math.max(1, math.floor(size < 1 and total * size or size))
end

-- A new window for `buf`, where opts.terminal.position says; it becomes the current one.
local function open_window(buf)
  local opts = require('claude_nvim').config.terminal
  local position, size = opts.position or 'right', opts.size
  if position == 'float' then
    local width, height = cells(size or 0.8, vim.o.columns), cells(size or 0.8, vim.o.lines)
    return api.nvim_open_win(buf, true, { relative = 'editor', border = 'rounded',
      width = width, height = height, row = math.floor((vim.o.lines - height) / 2) - 1,
      col = math.floor((vim.o.columns - width) / 2) })
  end
  if position == 'tab' then
    vim.cmd('tab split')
  else
    local split = ({ right = 'botright vsplit', left = 'topleft vsplit',
                     bottom = 'botright split', top = 'topleft split' })[position]
    if split == nil then
      vim.notify('claude-nvim: opts.terminal.position ' .. vim.inspect(position) .. ' is not '
        .. 'right, left, bottom, top, float or tab: using right', vim.log.levels.WARN)
      split, position = 'botright vsplit', 'right'
    end
    vim.cmd(split)
  end
  local win = api.nvim_get_current_win()
  api.nvim_win_set_buf(win, buf)
  if position == 'right' or position == 'left' then
    api.nvim_win_set_width(win, cells(size, vim.o.columns))
    vim.wo[win].winfixwidth = true
  elseif position == 'bottom' or position == 'top' then
    api.nvim_win_set_height(win, cells(size, vim.o.lines))
    vim.wo[win].winfixheight = true
  end
  return win
end

local function style(win)
  for option, value in pairs({ number = false, relativenumber = false, signcolumn = 'no',
                                spell = false }) do
    vim.wo[win][option] = value
  end
end

-- In the Claude window `win` (the buffer it showed stays running), else in a new window.
local function place(buf, win)
  if win == nil then return open_window(buf) end
  api.nvim_set_current_win(win)
  api.nvim_win_set_buf(win, buf)
  return win
end

-- Name the terminal (the current buffer) claude-nvim://N, leaving no buffer of its old name.
local function name(buf, n)
  local old = api.nvim_buf_get_name(buf)
  vim.cmd('silent keepalt file ' .. vim.fn.fnameescape('claude-nvim://' .. n))
  local bufs = api.nvim_list_bufs()  -- :file made one for the old name: the newest buffer
  local stale = bufs[#bufs]
  if stale ~= buf and api.nvim_buf_get_name(stale) == old then
    pcall(api.nvim_buf_delete, stale, { force = true })
  end
end

-- The server runs in a job of its own (`claude-nvim serve`), not in a Claude's terminal: the
-- Claude that started it exiting would stop it under the others. It stops with the last one.
local serving = nil   -- the server's job id, when this plugin started it
local stopping = nil  -- the one stopped, until it is gone: a new Claude must not reuse it
local SERVE_WAIT_MS, POLL_MS = 30000, 20

local function serve(cmd)
  local job = vim.fn.jobstart(vim.list_extend(vim.deepcopy(cmd),
    { 'serve', '--nvim', vim.v.servername }), { on_exit = function(job)
      if serving == job then serving = nil end
      if stopping == job then stopping = nil end
    end })
  return job > 0 and job or nil
end

-- Call `proceed` once a server serves this Neovim, starting one if need be; if none does (it
-- failed, or 30 s passed), call it all the same: `claude-nvim claude` then serves itself.
local function with_server(cmd, proceed)
  local plugin = require('claude_nvim')
  -- With no claude to run, `claude-nvim claude` says so at once, and no server is left behind.
  if vim.fn.executable(vim.env.CLAUDE_NVIM_CLAUDE or 'claude') == 0 then return proceed() end
  local waited, ours = 0, nil
  local function poll()
    if stopping == nil and plugin.server() then return proceed() end
    if stopping == nil and serving == nil then
      if ours then return proceed() end  -- it exited: it failed
      serving = serve(cmd)
      ours = serving
      if ours == nil then return proceed() end
    end
    waited = waited + POLL_MS
    if waited > SERVE_WAIT_MS then return proceed() end
    vim.defer_fn(poll, POLL_MS)
  end
  poll()
end

local function gone(claude)
  forget(claude)
  if #claudes == 0 and serving then
    stopping, serving = serving, nil
    vim.fn.jobstop(stopping)
  end
end

-- Run claude in `claude`'s buffer (once a server serves): Terminal mode if it is in view.
local function run(claude, cmd)
  local buf = claude.buf
  if not api.nvim_buf_is_valid(buf) then return gone(claude) end  -- closed meanwhile
  local function exited(_, code)
    vim.schedule(function()
      gone(claude)
      if not api.nvim_buf_is_valid(buf) then return end
      if code ~= 0 then  -- it stays on screen, saying why (claude not on PATH, ...)
        vim.bo[buf].bufhidden = 'wipe'
        return vim.notify('claude-nvim: `' .. table.concat(cmd, ' ') .. '` exited with code '
          .. code, vim.log.levels.WARN)
      end
      -- Its windows close with it; a last window gets an empty buffer instead.
      pcall(api.nvim_buf_delete, buf, { force = true })
    end)
  end
  local job_opts = { on_exit = exited }
  vim.bo[buf].modifiable = true
  local job = api.nvim_buf_call(buf, function()
    if vim.fn.has('nvim-0.11') == 1 then
      job_opts.term = true
      return vim.fn.jobstart(cmd, job_opts)
    end
    return vim.fn.termopen(cmd, job_opts)
  end)
  if job <= 0 then
    gone(claude)
    pcall(api.nvim_buf_delete, buf, { force = true })
    return vim.notify('claude-nvim: cannot run ' .. cmd[1], vim.log.levels.ERROR)
  end
  claude.job = job
  vim.bo[buf].bufhidden = 'hide'  -- a hidden Claude keeps running
  api.nvim_buf_call(buf, function() name(buf, claude.n) end)
  if api.nvim_get_current_buf() == buf then vim.cmd('startinsert') end
end

-- A new Claude, in the Claude window `win` (the one it showed keeps running) or a new one.
local function start(args, win)
  local cmd, why = require('claude_nvim').command()
  if cmd == nil then
    return vim.notify('claude-nvim: ' .. why, vim.log.levels.ERROR)
  end
  local buf = api.nvim_create_buf(false, true)
  leaving()
  style(place(buf, win))
  numbered = numbered + 1
  local claude = { n = numbered, buf = buf }
  vim.bo[buf].modifiable = false  -- until claude runs in it
  vim.b[buf].claude_nvim_terminal = claude.n
  claudes[#claudes + 1], current = claude, claude
  api.nvim_create_autocmd({ 'BufEnter', 'WinEnter' }, { buffer = buf, callback = function()
    if is_claude(buf) then current = claude end
  end })
  with_server(cmd, function()
    run(claude, vim.list_extend(vim.deepcopy(cmd), { 'claude', unpack(args) }))
  end)
end

-- Show `claude` here: in the Claude window of this tab, else in a new one.
local function show(claude)
  leaving()
  -- Shown in another tab: it moves here.
  for _, win in ipairs(vim.fn.win_findbuf(claude.buf)) do pcall(api.nvim_win_close, win, false) end
  local win = place(claude.buf, claude_window())
  style(win)
  current = claude
  vim.cmd('startinsert')
end

local function hide(win)
  local back = previous
  if not pcall(api.nvim_win_close, win, false) then
    -- The last window: it shows another buffer instead (a new empty one if need be).
    local alternate = vim.fn.bufnr('#')
    if alternate > 0 and vim.fn.buflisted(alternate) == 1 then
      api.nvim_win_set_buf(win, alternate)
    else
      api.nvim_win_set_buf(win, api.nvim_create_buf(true, false))
    end
  elseif back and api.nvim_win_is_valid(back) then
    api.nvim_set_current_win(back)
  end
end

-- To `claude`, focused and in Terminal mode: to its window in this tab, else shown here.
local function go(claude)
  local win = window_of(claude)
  if win == nil then return show(claude) end
  leaving()
  api.nvim_set_current_win(win)
  vim.cmd('startinsert')
end

--- Open (start or show) the current Claude terminal, focused and in Terminal mode.
function M.open(args)
  if not M.running() then return start(args or {}) end
  go(current)
end

--- :ClaudeNvim [args]: show the current Claude (starting claude the first time), or hide it.
function M.toggle(args)
  local win = M.running() and window_of(current)
  if win then return hide(win) end
  if args and #args > 0 and M.running() then
    warn('claude runs already; for another with these arguments: :ClaudeNvimNew '
      .. table.concat(args, ' '))
  end
  M.open(args)
end

--- :ClaudeNvimNew [args]: start another Claude, in the Claude window (the one it showed keeps
--- running) or a new one.
function M.new(args)
  start(args or {}, M.running() and claude_window() or nil)
end

--- :ClaudeNvimSwitch [n]: to Claude n, else to the next one, in the Claude window.
function M.switch(n)
  local all = running()
  if #all == 0 then return warn('no Claude runs: :ClaudeNvim starts one') end
  local target
  for i, claude in ipairs(all) do
    if n == nil and claude == current then target = all[i % #all + 1] end
    if n ~= nil and tostring(claude.n) == tostring(n) then target = claude end
  end
  if target == nil then
    return warn('no Claude ' .. tostring(n) .. ' (running: ' .. table.concat(M.numbers(), ', ')
      .. ')')
  end
  go(target)
end

--- The numbers of the running Claudes, as text (:ClaudeNvimSwitch completes them).
function M.numbers()
  return vim.tbl_map(function(claude) return tostring(claude.n) end, running())
end

--- :ClaudeNvimFocus: to the current Claude (opening it if hidden), or from it back.
function M.focus()
  local win = M.running() and window_of(current)
  if win and win == api.nvim_get_current_win() then
    if previous and api.nvim_win_is_valid(previous) and previous ~= win then
      return api.nvim_set_current_win(previous)
    end
    return vim.cmd('wincmd p')
  end
  M.open({})
end

--- The current Claude: its number, buffer, job id (nil while its server starts) and window
--- in this tab (nil when hidden); nil when none runs (for tests and the user's own mappings).
function M.info()
  if not M.running() then return nil end
  return { n = current.n, buf = current.buf, job = current.job, win = window_of(current) }
end

return M
