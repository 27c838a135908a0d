-- claude_nvim.follow: follow Claude's edits (opts.follow, :ClaudeNvimFollow). When a Claude is
-- about to write a file (its PreToolUse hook, from the server: `writing`), the file shows in
-- the user's editor window; once written (`written`, with the lines that changed, which the
-- server knows from the file before and after) its buffer shows the write at once and the
-- cursor goes to those lines. Never in the middle of the user's typing: while
-- they are in Insert, Visual or Command-line mode, or pressed a key within PAUSE_MS, it waits
-- until they pause (the latest file wins). Never for a Claude whose terminal is hidden,
-- unless follow is 'all'. The focus never moves: only what the editor window shows.
-- Lifecycle: setup(opts) / stop().
local api = vim.api
local uv = vim.uv or vim.loop
local core = require('claude_nvim.core')
local reload = require('claude_nvim.reload')
local M = {}

local PAUSE_MS = 1000
local KEYS = api.nvim_create_namespace('claude_nvim_follow_keys')
local last_key = 0    -- uv.now() of the user's last key
local pending = nil   -- { path, lines }: to show once the user pauses
local timer = nil     -- while something is pending

--- Whether to follow: false, true, or 'all' (hidden Claudes too); :ClaudeNvimFollow sets
--- g:claude_nvim_follow, else opts.follow decides.
---@return boolean|'all'
function M.enabled()
  local how = vim.g.claude_nvim_follow
  if how == nil then
    local opts = vim.g.claude_nvim_opts
    how = type(opts) == 'table' and opts.follow or false
  end
  return how == 'all' and 'all' or how == true
end

-- Whether the Claude of `entry` (the server's) is followed: one in a terminal of Neovim only
-- while that terminal shows in this tab; one elsewhere (its own terminal) always.
local function followed(entry)
  local how = M.enabled()
  if how ~= true then return how == 'all' end
  local buf = type(entry) == 'table' and entry.terminal
  if type(buf) ~= 'number' or not api.nvim_buf_is_valid(buf) then return true end
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if api.nvim_win_get_tabpage(win) == api.nvim_get_current_tabpage() then return true end
  end
  return false
end

-- Whether the user is in the middle of something: a mode other than Normal or Terminal, a
-- pending operator or key, or a key pressed within PAUSE_MS.
local function busy()
  local mode = api.nvim_get_mode()
  if mode.blocking or not (mode.mode == 'n' or mode.mode == 'nt' or mode.mode == 't') then
    return true
  end
  return uv.now() - last_key < PAUSE_MS
end

-- Show `path` in the editor window; `lines` ({ first, last }, or nil): the cursor goes there.
local function show(path, lines)
  local win = core.editor_window()
  if win == nil then return end
  local buf = core.find_buffer({ path })
  if buf == nil or not api.nvim_buf_is_loaded(buf) then return end
  if api.nvim_win_get_buf(win) ~= buf then
    api.nvim_win_call(win, function() vim.cmd("normal! m'") end)  -- <C-o> goes back
    if not pcall(api.nvim_win_set_buf, win, buf) then return end
  end
  if lines then
    api.nvim_win_set_cursor(win, { math.min(lines[1], api.nvim_buf_line_count(buf)), 0 })
    api.nvim_win_call(win, function() vim.cmd('normal! zv') end)
  end
end

local function stop_timer()
  if timer then
    timer:stop()
    timer:close()
    timer = nil
  end
end

-- Show it now, or once the user pauses (the latest wins).
local function follow(path, lines)
  if not busy() then
    pending = nil
    return show(path, lines)
  end
  if pending and pending.path == path then lines = lines or pending.lines end
  pending = { path = path, lines = lines }
  if timer then return end
  timer = uv.new_timer()
  timer:start(PAUSE_MS, PAUSE_MS / 4, vim.schedule_wrap(core.guard(function()
    if pending == nil then return stop_timer() end
    if busy() then return end
    stop_timer()
    local now = pending
    pending = nil
    show(now.path, now.lines)
  end)))
end

--- Claude (`entry`: the server's, of vim.g.claude_nvim_server.claudes) is about to write
--- `path`: it shows (its buffer loaded if need be).
---@param entry claude_nvim.ServerClaude
---@param path string
function M.writing(entry, path)
  if not followed(entry) or core.unloadable(path) then return end
  local buf = core.load(path, core.find_buffer({ path }), false)
  if buf == nil then return end
  vim.bo[buf].buflisted = true
  follow(path, nil)
end

--- Claude wrote `path`, changing `lines` ({ first, last }, 1-based; nil: none): its buffer
--- shows it now (as bufsync would a moment later) and the cursor goes there.
---@param entry claude_nvim.ServerClaude
---@param path string
---@param lines? { [1]: integer, [2]: integer }
function M.written(entry, path, lines)
  if not followed(entry) then return end
  local buf = core.find_buffer({ path })
  if buf == nil or not api.nvim_buf_is_loaded(buf) then return end
  -- Read again whatever Neovim last saw: a buffer loaded as the write began may have taken the
  -- file's state from after it with its text from before.
  reload.disk[buf] = nil
  reload.refresh(buf)
  follow(path, type(lines) == 'table' and lines or nil)
end

local ENABLED

--- Tell the server whether to follow now (it reads files for it only then).
function M.changed()
  core.notify(ENABLED, M.enabled() ~= false)
end

--- Start: `opts` from FollowFeature (enabled: the notification that says whether it is on).
---@param opts { enabled: string }
function M.setup(opts)
  ENABLED = opts.enabled
  vim.on_key(function() last_key = uv.now() end, KEYS)
  M.changed()
end

function M.stop()
  vim.on_key(nil, KEYS)
  stop_timer()
  pending = nil
end

return M
