-- claude_nvim.bufsync: buffers follow their files. Claude Code writes files behind Neovim's
-- back (its auto and acceptEdits modes, sed, formatters, git checkout); a buffer with no
-- unsaved changes shows the new text at once, without a prompt, and a buffer with unsaved
-- changes is left alone with one warning.
--
-- One libuv fs_event watcher per directory that holds a loaded file buffer (not per file: a
-- directory watch survives atomic saves, which replace the file's inode by rename, and 1,000
-- buffers in a few directories cost a few inotify watches). Idle, nothing runs: no timer, no
-- polling. An event starts a short timer that gathers a write's burst of events; then each
-- changed buffer is brought up to date by reload.refresh, which reads the file from one
-- descriptor and applies what changed as one undo step (undo, marks, folds and views kept,
-- LSP clients told). Buffers in windows come first; the others, and a file written without
-- pause, get a bounded share of Neovim's time (SLICE_MS, SHARE), so that a `git checkout`
-- under 1,000 buffers or a log written 10 times a second never holds the user up.
--
-- Neovim checks files itself too (focus gained, :checktime, after :!cmd, entering a buffer).
-- With 'autoread' it would read a changed file again by path, whatever it has become (a FIFO
-- blocks it in open() for good), and keep the whole old text for undo. Followed buffers get a
-- local 'noautoread', so that those checks come to FileChangedShell, answered here: Neovim
-- does nothing, and the buffer is followed at once.

local api = vim.api
local uv = vim.uv or vim.loop
local core = package.loaded['claude_nvim.core'] ---@module 'claude_nvim.core'
local reload = require('claude_nvim.reload')
local M = {}

local GROUP = 'claude_nvim_bufsync'
-- Milliseconds of quiet after a file's last event before it is read: an in-place write comes
-- as several events (truncate, then chunks), and a reload between them would read half a file
-- with an mtime the rest of the write may not change (mtimes tick by a kernel jiffy, 1-10 ms).
local QUIET_MS = 20
-- A file written without pause still gets reloaded this often.
local MAX_WAIT_MS = 200
-- Milliseconds of following per turn of Neovim's event loop: keys and calls come between.
local SLICE_MS = 15
-- A file reloaded again and again takes at most 1/SHARE of Neovim's time (1/HIDDEN_SHARE in no
-- window: it is followed at once when shown), and one whose reload takes longer than SLOW_COST
-- milliseconds (a big file: ~50 ms for 26 MB) is reloaded at most once every SLOW_MS.
local SHARE, HIDDEN_SHARE, SLOW_COST, SLOW_MS = 5, 20, 40, 1000

---@class claude_nvim.WatchedDir
---@field watcher uv.uv_fs_event_t
---@field names table<string, table<integer, true>> file name -> { buf -> true }
---@field ino integer the directory's, to see it replaced
---@field name string
---@field check boolean? an event came: is the directory still there?

---@type table<string, claude_nvim.WatchedDir>
local dirs = {}     -- directory -> { watcher = fs_event, names = { file name -> { buf -> true } } }
local watched = {}  -- buf -> { name =, at = { {dir, name}, ... }, waiting =, autoread = }
local pending = {}  -- buf -> true: its file may have changed since it was last followed
local not_before = {}  -- buf -> uv.now() before which it is not reloaded again (its share)
---@type uv.uv_timer_t?
local timer = nil   -- the quiet time after events
---@type uv.uv_timer_t?
local later = nil   -- the next turn of following
local first_event = nil  -- uv.now() of the oldest pending event
local warned = {}   -- buf -> what it was warned about ('changed', 'deleted', why not read)

local function display_name(buf)
  return vim.fn.fnamemodify(api.nvim_buf_get_name(buf), ':~:.')
end

local function warn_once(buf, key, message)
  if warned[buf] == key then return end
  warned[buf] = key
  core.tell(message, 'WARN')
end

local flush  -- defined below: the watchers' callbacks call it
local on_quiet = vim.schedule_wrap(function() flush() end)

-- A file's directory and name; cheaper than vim.fs's, which validate their arguments (a
-- thousand buffers at setup count). nil for a root.
local function split(path)
  local dir, name = path:match('^(.*)[/\\]([^/\\]+)$')
  if dir == nil then return nil end
  return (dir == '' or dir:match('^%a:$')) and dir .. '/' or dir, name
end

-- A watcher's callback: in libuv's loop, where the API may not be called.
local function on_event(dir, err, filename)
  local entry = dirs[dir]
  if entry == nil then return end
  local bufs = filename and entry.names[filename]
  if bufs then
    for buf in pairs(bufs) do pending[buf] = true end
  end
  -- The directory itself (libuv names it by its own name): it may be gone, its watch dead.
  if err or filename == nil or filename == entry.name then
    entry.check = true
  elseif not bufs then
    return  -- another file of the directory
  end
  local now = uv.now()
  first_event = first_event or now
  if now - first_event < MAX_WAIT_MS or not timer:is_active() then
    timer:stop()
    timer:start(QUIET_MS, 0, on_quiet)
  end
end

local function directory(path)
  local stat = uv.fs_stat(path)
  return stat and stat.type == 'directory' and stat or nil
end

-- Watch for changes of file `path` in its directory; while that does not exist (git checkout
-- removes directories and brings them back), in the nearest one that does, for the next
-- directory down. Returns where ({dir, name}) and whether it waits for a directory, or nil.
local function watch(buf, path)
  local dir, name = split(path)
  local waiting = false
  local stat = dir and (dirs[dir] or directory(dir))  -- a watched one exists (or is checked)
  while dir and not stat do
    dir, name = split(dir)
    stat, waiting = dir and (dirs[dir] or directory(dir)), true
  end
  if dir == nil then return nil end
  local entry = dirs[dir]
  if entry == nil then
    local watcher = uv.new_fs_event()
    if watcher == nil then return nil end
    local ok, err = watcher:start(dir, {}, function(e, file) on_event(dir, e, file) end)
    if not ok then  -- e.g. out of inotify watches (fs.inotify.max_user_watches)
      watcher:close()
      core.log('warn', ('bufsync: cannot watch %s: %s'):format(dir, tostring(err)))
      return nil
    end
    entry = { watcher = watcher, names = {}, ino = stat.ino, name = select(2, split(dir)) }
    dirs[dir] = entry
  end
  entry.names[name] = entry.names[name] or {}
  entry.names[name][buf] = true
  return { dir, name }, waiting
end

local function close(dir)
  local entry = dirs[dir]
  entry.watcher:stop()
  entry.watcher:close()
  dirs[dir] = nil
end

local function unwatch(buf)
  local tracked = watched[buf]
  for _, at in ipairs(tracked and tracked.at or {}) do
    local entry = dirs[at[1]]
    local bufs = entry and entry.names[at[2]]
    if bufs then
      bufs[buf] = nil
      if next(bufs) == nil then entry.names[at[2]] = nil end
      if next(entry.names) == nil then close(at[1]) end
    end
  end
  watched[buf], warned[buf], pending[buf], not_before[buf] = nil, nil, nil, nil
  return tracked
end

-- Give `buf` back the 'autoread' it had before it was followed (nil: the global one).
local function restore_autoread(buf, autoread)
  if api.nvim_buf_is_valid(buf) then vim.bo[buf].autoread = autoread end
end

-- Follow `buf`'s file as it is now (its name may have changed), or stop if it is no file
-- buffer any more; `gone`: it is being unloaded.
local function track(buf, gone)
  local before = unwatch(buf)
  local autoread = before and before.autoread
  local name = api.nvim_buf_get_name(buf)
  if gone or not api.nvim_buf_is_loaded(buf)
      or api.nvim_get_option_value('buftype', { buf = buf }) ~= ''
      or not (name:sub(1, 1) == '/' or name:match('^%a:[/\\]')) then  -- a URL, no name
    if before then restore_autoread(buf, autoread) end
    return
  end
  if before == nil then
    autoread = api.nvim_buf_call(buf, function()
      return api.nvim_get_option_value('autoread', { scope = 'local' })
    end)
    vim.bo[buf].autoread = false
  end
  local link = uv.fs_lstat(name)  -- a symbolic link: its target's directory is watched too
  local real = link and link.type == 'link' and uv.fs_realpath(name) or nil
  local tracked = { name = name, at = {}, waiting = false, autoread = autoread }
  for _, path in ipairs({ name, real }) do
    local at, waiting = watch(buf, path)
    if at then
      tracked.at[#tracked.at + 1] = at
      tracked.waiting = tracked.waiting or waiting
    end
  end
  -- Followed even with no watch (out of inotify watches): Neovim's own checks come here.
  watched[buf] = tracked
end

-- Watch `buf`'s file from where it can be watched now; what it was warned about stays.
local function retrack(buf)
  local told = warned[buf]
  track(buf)
  if watched[buf] then warned[buf] = told end
end

-- The file of `buf` changed on disk (or may have): reload, warn, or nothing. Returns whether
-- it was reloaded.
local function follow(buf)
  pending[buf] = nil
  if not (api.nvim_buf_is_valid(buf) and api.nvim_buf_is_loaded(buf) and watched[buf]) then
    return false
  end
  if watched[buf].waiting then retrack(buf) end  -- a directory on the way came back
  if not watched[buf] then return false end
  local found, why = reload.refresh(buf)
  if found == 'reloaded' then
    warned[buf] = nil
  elseif found == 'deleted' then
    warn_once(buf, 'deleted', ('%s was deleted on disk; the buffer keeps its text '
      .. '(:w writes it again)'):format(display_name(buf)))
  elseif found == 'modified' then
    warn_once(buf, 'changed', ('%s changed on disk, but its buffer has unsaved changes: '
      .. 'both kept. :e! loads the file (your changes are lost), :w writes your version over '
      .. 'it'):format(display_name(buf)))
  elseif found == 'refused' then
    warn_once(buf, why, why .. '; not reloaded')  -- once for each reason
  end
  return found == 'reloaded'
end

-- Follow `buf` now, whatever its share of time: the user is looking at it, or Neovim asks.
local function follow_now(buf)
  not_before[buf] = nil
  local ok, err = pcall(follow, buf)
  if not ok then core.log('error', 'bufsync: ' .. tostring(err)) end
end

local run
local run_later = vim.schedule_wrap(function() run() end)

-- Follow the pending buffers, those in windows first, for at most SLICE_MS: the rest on a
-- later turn of the event loop, or once their share of time allows.
function run()
  local start, shown, wait = uv.hrtime(), {}, nil
  for _, win in ipairs(api.nvim_list_wins()) do shown[api.nvim_win_get_buf(win)] = true end
  -- In order: windows first. A list, as Neovim may run the watchers' callbacks (which add to
  -- `pending`) while it reloads.
  local order = {}
  for buf in pairs(pending) do order[#order + 1] = buf end
  table.sort(order, function(a, b) return (shown[a] and 0 or 1) < (shown[b] and 0 or 1) end)
  for i, buf in ipairs(order) do
    local due, now = not_before[buf], uv.now()
    if due and due > now then
      if pending[buf] then wait = math.min(wait or math.huge, due - now) end
    elseif pending[buf] then  -- not followed meanwhile
      local began = uv.hrtime()
      local ok, reloaded = pcall(follow, buf)
      if not ok then core.log('error', 'bufsync: ' .. tostring(reloaded)) end
      if reloaded then
        local cost = (uv.hrtime() - began) / 1e6
        local pause = shown[buf] and (SHARE - 1) * cost or (HIDDEN_SHARE - 1) * cost
        if cost > SLOW_COST then pause = math.max(pause, SLOW_MS) end
        not_before[buf] = uv.now() + pause
      end
      if i < #order and (uv.hrtime() - start) / 1e6 >= SLICE_MS then
        later:stop()
        later:start(0, 0, run_later)
        return
      end
    end
  end
  later:stop()
  if wait then later:start(math.ceil(wait), 0, run_later) end
end

function flush()
  first_event = nil
  -- A watched directory that is gone (or replaced) has a dead watch: its buffers move on.
  local moved = {}
  for dir, entry in pairs(dirs) do
    if entry.check then
      entry.check = nil
      local stat = directory(dir)
      if not stat or stat.ino ~= entry.ino then
        for _, bufs in pairs(entry.names) do
          for buf in pairs(bufs) do moved[buf] = true end
        end
        close(dir)
      end
    end
  end
  for buf in pairs(moved) do
    pcall(retrack, buf)
    pending[buf] = true
  end
  run()
end

--- Start following every loaded file buffer, and those loaded later. `opts`: nothing yet.
---@param opts table
function M.setup(opts)  -- luacheck: ignore opts
  M.stop()
  timer, later = uv.new_timer(), uv.new_timer()
  local group = api.nvim_create_augroup(GROUP, { clear = true })
  local function on(events, fn, nested)  -- nested: what it does runs autocmds (reload.refresh)
    api.nvim_create_autocmd(events, { group = group, callback = core.guard(fn), nested = nested })
  end
  on({ 'BufReadPost', 'BufNewFile', 'BufFilePost' }, function(ev) track(ev.buf) end)
  api.nvim_create_autocmd('OptionSet', {
    group = group, pattern = 'buftype', callback = core.guard(function(ev) track(ev.buf) end),
  })
  on({ 'BufWritePost' }, function(ev)  -- :w newname, :saveas: a new file to follow
    local w = watched[ev.buf]
    if not w or w.waiting or api.nvim_buf_get_name(ev.buf) ~= w.name then
      track(ev.buf)
    end
    warned[ev.buf] = nil
  end)
  on({ 'BufUnload', 'BufWipeout' }, function(ev) track(ev.buf, true) end)
  -- Shown again: what changed meanwhile shows up now.
  on({ 'BufWinEnter' }, function(ev)
    if pending[ev.buf] then follow_now(ev.buf) end
  end, true)
  -- Neovim checks followed buffers with their 'noautoread': whatever it found, it does nothing
  -- here (a reload would open the file by path) and the buffer is followed at once.
  on({ 'FileChangedShell' }, function(ev)
    if not watched[ev.buf] then
      vim.v.fcs_choice = 'ask'  -- not ours: as if there were no handler
      return
    end
    vim.v.fcs_choice = ''
    local buf = ev.buf
    pending[buf] = true
    vim.schedule(function() if pending[buf] then follow_now(buf) end end)
  end)
  -- The UI regains focus: Neovim checks every buffer just after this. Follow first what the
  -- watchers saw, so that it finds them current.
  on({ 'FocusGained' }, function()
    if timer:is_active() then
      timer:stop()
      flush()
    end
  end, true)
  for _, buf in ipairs(api.nvim_list_bufs()) do track(buf) end
end

--- Stop following the buffers: every watcher and timer closed.
function M.stop()
  pcall(api.nvim_del_augroup_by_name, GROUP)
  for buf, tracked in pairs(watched) do
    unwatch(buf)
    pcall(restore_autoread, buf, tracked.autoread)
  end
  for dir in pairs(dirs) do close(dir) end
  for _, t in ipairs({ timer, later }) do
    if t then
      t:stop()
      t:close()
    end
  end
  timer, later = nil, nil
  pending, not_before, first_event = {}, {}, nil
end

return M
