-- The Claude terminal: `claude-nvim claude [args]` in a terminal window that can be hidden
-- (claude keeps running) and shown again; it closes when claude exits.
local api = vim.api
local M = {}

local state = { buf = nil, job = nil, win = nil, previous = nil }

--- Whether this Neovim's Claude terminal runs.
function M.running()
  return state.job ~= nil and state.buf ~= nil and api.nvim_buf_is_valid(state.buf)
end

-- The terminal's window in the current tab, or nil.
local function window()
  local win = state.win
  if win and api.nvim_win_is_valid(win) and api.nvim_win_get_buf(win) == state.buf
      and api.nvim_win_get_tabpage(win) == api.nvim_get_current_tabpage() then
    return win
  end
  return nil
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

local function start(args)
  local cmd, why = require('claude_nvim').command()
  if cmd == nil then
    return vim.notify('claude-nvim: ' .. why, vim.log.levels.ERROR)
  end
  vim.list_extend(cmd, { 'claude', unpack(args) })
  local buf = api.nvim_create_buf(false, false)
  state.previous = api.nvim_get_current_win()
  local win = open_window(buf)
  style(win)
  local function exited(_, code)
    vim.schedule(function()
      if state.buf == buf then state.buf, state.job, state.win = nil, nil, nil end
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
  local job
  if vim.fn.has('nvim-0.11') == 1 then
    job_opts.term = true
    job = vim.fn.jobstart(cmd, job_opts)
  else
    job = vim.fn.termopen(cmd, job_opts)
  end
  if job <= 0 then
    pcall(api.nvim_buf_delete, buf, { force = true })
    return vim.notify('claude-nvim: cannot run ' .. cmd[1], vim.log.levels.ERROR)
  end
  vim.bo[buf].bufhidden = 'hide'  -- a hidden Claude keeps running
  vim.bo[buf].buflisted = false
  vim.b[buf].claude_nvim_terminal = true
  state.buf, state.job, state.win = buf, job, win
  vim.cmd('startinsert')
end

local function show()
  state.previous = api.nvim_get_current_win()
  -- Shown in another tab: it moves here.
  for _, win in ipairs(vim.fn.win_findbuf(state.buf)) do pcall(api.nvim_win_close, win, false) end
  state.win = open_window(state.buf)
  style(state.win)
  vim.cmd('startinsert')
end

local function hide(win)
  local back = state.previous
  if not pcall(api.nvim_win_close, win, false) then
    -- The last window: it shows another buffer instead (a new empty one if need be).
    local alternate = vim.fn.bufnr('#')
    if alternate > 0 and alternate ~= state.buf and vim.fn.buflisted(alternate) == 1 then
      api.nvim_win_set_buf(win, alternate)
    else
      api.nvim_win_set_buf(win, api.nvim_create_buf(true, false))
    end
  elseif back and api.nvim_win_is_valid(back) then
    api.nvim_set_current_win(back)
  end
end

--- Open (start or show) the Claude terminal, focused and in Terminal mode.
function M.open(args)
  if not M.running() then return start(args or {}) end
  local win = window()
  if win then
    api.nvim_set_current_win(win)
    return vim.cmd('startinsert')
  end
  show()
end

--- :ClaudeNvim [args]: show the Claude terminal (starting claude the first time), or hide it.
function M.toggle(args)
  local win = M.running() and window()
  if win then return hide(win) end
  if args and #args > 0 and M.running() then
    vim.notify('claude-nvim: claude runs already; the arguments are for a new one (exit it '
      .. 'first)', vim.log.levels.WARN)
  end
  M.open(args)
end

--- :ClaudeNvimFocus: to the Claude terminal (opening it if hidden), or from it back.
function M.focus()
  local win = M.running() and window()
  if win and win == api.nvim_get_current_win() then
    local back = state.previous
    if back and api.nvim_win_is_valid(back) and back ~= win then
      return api.nvim_set_current_win(back)
    end
    return vim.cmd('wincmd p')
  end
  if win then state.previous = api.nvim_get_current_win() end
  M.open({})
end

--- The terminal's buffer and job id, or nil (for tests and the user's own mappings).
function M.info()
  if not M.running() then return nil end
  return { buf = state.buf, job = state.job, win = window() }
end

return M
