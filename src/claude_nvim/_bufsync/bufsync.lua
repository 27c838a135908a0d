-- claude_nvim.bufsync: buffers follow their files. Claude Code writes files behind Neovim's
-- back (its auto and acceptEdits modes, sed, formatters, git checkout); a buffer with no
-- unsaved changes shows the new text at once, without a prompt, and a buffer with unsaved
-- changes is left alone with one warning.
--
-- One libuv fs_event watcher per directory that holds a loaded file buffer (not per file: a
-- directory watch survives atomic saves, which replace the file's inode by rename, and 1,000
-- buffers in a few directories cost a few inotify watches). Idle, nothing runs: no timer, no
-- polling. An event starts a short timer that gathers a write's burst of events; then each
-- changed buffer is reloaded by Neovim's own :checktime (with 'autoread'), which keeps undo,
-- marks and options and tells LSP clients.

local api = vim.api
local uv = vim.uv or vim.loop
local core = package.loaded['claude_nvim.core']
local M = {}

local GROUP = 'claude_nvim_bufsync'
-- Milliseconds of quiet after a file's last event before it is read: an in-place write comes
-- as several events (truncate, then chunks), and a reload between them would read half a file
-- with an mtime the rest of the write may not change (mtimes tick by a kernel jiffy, 1-10 ms).
local QUIET_MS = 20
-- A file written without pause still gets reloaded this often.
local MAX_WAIT_MS = 200

local dirs = {}     -- directory -> { watcher = fs_event, names = { file name -> { buf -> true } } }
local watched = {}  -- buf -> { name =, at = { {dir, name}, ... }, waiting = }
local pending = {}  -- buf -> true: an event came for its file
local timer = nil
local first_event = nil  -- uv.now() of the oldest pending event
local disk = {}     -- buf -> what its file was when Neovim last read or wrote it (signature)
local warned = {}   -- buf -> what it was warned about ('changed', 'deleted'), until reread

-- What identifies a version of a file on disk: a rename-over changes the inode, a write the
-- size or the mtime. nil when there is no file.
local function signature(path)
  local stat = uv.fs_stat(path)
  if stat == nil then return nil end
  return ('%d:%d:%d.%d'):format(stat.ino, stat.size, stat.mtime.sec, stat.mtime.nsec)
end

local function remember(buf)
  if watched[buf] then
    disk[buf] = signature(api.nvim_buf_get_name(buf)) or false
    warned[buf] = nil
  end
end

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
  for _, at in ipairs(watched[buf] and watched[buf].at or {}) do
    local entry = dirs[at[1]]
    local bufs = entry and entry.names[at[2]]
    if bufs then
      bufs[buf] = nil
      if next(bufs) == nil then entry.names[at[2]] = nil end
      if next(entry.names) == nil then close(at[1]) end
    end
  end
  watched[buf], disk[buf], warned[buf], pending[buf] = nil, nil, nil, nil
end

-- Watch `buf`'s file as it is now (its name may have changed), or stop if it is no file
-- buffer any more; `gone`: it is being unloaded.
local function track(buf, gone)
  unwatch(buf)
  if gone or not api.nvim_buf_is_loaded(buf)
      or api.nvim_get_option_value('buftype', { buf = buf }) ~= '' then return end
  local name = api.nvim_buf_get_name(buf)
  if not (name:sub(1, 1) == '/' or name:match('^%a:[/\\]')) then return end  -- a URL, no name
  local link = uv.fs_lstat(name)  -- a symbolic link: its target's directory is watched too
  local real = link and link.type == 'link' and uv.fs_realpath(name) or nil
  local tracked = { name = name, at = {}, waiting = false }
  for _, path in ipairs({ name, real }) do
    local at, waiting = watch(buf, path)
    if at then
      tracked.at[#tracked.at + 1] = at
      tracked.waiting = tracked.waiting or waiting
    end
  end
  if #tracked.at > 0 then
    watched[buf] = tracked
    disk[buf] = signature(name) or false
  end
end

-- Watch `buf`'s file from where it can be watched now; what Neovim last saw of it stays.
local function retrack(buf)
  local seen, told = disk[buf], warned[buf]
  track(buf)
  if watched[buf] then disk[buf], warned[buf] = seen, told end
end

-- The file of `buf` changed on disk (or may have): reload, warn, or nothing.
local function follow(buf)
  if not (api.nvim_buf_is_valid(buf) and api.nvim_buf_is_loaded(buf) and watched[buf]) then
    return
  end
  if watched[buf].waiting then retrack(buf) end  -- a directory on the way came back
  if not watched[buf] then return end
  local name = api.nvim_buf_get_name(buf)
  local now = signature(name)
  if now == disk[buf] then return end  -- Neovim's own write, or an event that changed nothing
  if now == nil then
    return warn_once(buf, 'deleted', ('%s was deleted on disk; the buffer keeps its text '
      .. '(:w writes it again)'):format(display_name(buf)))
  end
  if vim.bo[buf].modified then
    return warn_once(buf, 'changed', ('%s changed on disk, but its buffer has unsaved changes: '
      .. 'both kept. :e! loads the file (your changes are lost), :w writes your version over '
      .. 'it'):format(display_name(buf)))
  end
  local refusal = core.unloadable(name)
  if refusal then
    return warn_once(buf, 'changed', refusal .. '; not reloaded')
  end
  if disk[buf] == false then  -- a new file's buffer: Neovim has no file time to compare
    local shortmess = vim.o.shortmess
    vim.o.shortmess = shortmess .. 'A'  -- never the swap file's ATTENTION dialog
    local ok, err = pcall(api.nvim_buf_call, buf, function() vim.cmd('silent edit') end)
    vim.o.shortmess = shortmess
    if not ok then core.tell(tostring(err):gsub('^Vim:', ''), 'WARN') end
    return
  end
  core.refresh(buf)  -- Neovim keeps each window's cursor and view where the lines still are
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
  local bufs = pending
  pending = {}
  for buf in pairs(bufs) do
    local ok, err = pcall(follow, buf)
    if not ok then core.log('error', 'bufsync: ' .. tostring(err)) end
  end
end

-- Start following every loaded file buffer, and those loaded later. `opts`: nothing yet.
function M.setup(opts)  -- luacheck: ignore opts
  M.stop()
  timer = uv.new_timer()
  local group = api.nvim_create_augroup(GROUP, { clear = true })
  local function on(events, fn)
    api.nvim_create_autocmd(events, { group = group, callback = core.guard(fn) })
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
    remember(ev.buf)
  end)
  on({ 'FileChangedShellPost' }, function(ev) remember(ev.buf) end)
  on({ 'BufUnload', 'BufWipeout' }, function(ev) track(ev.buf, true) end)
  -- Neovim checks files itself too (focus gained, after :!cmd, :checktime). For a buffer
  -- with unsaved changes it would stop at a dialog (W12), for a deleted file it would stall
  -- a second: here neither blocks, and the user gets the same warning as from the watcher.
  on({ 'FileChangedShell' }, function(ev)
    local reason = vim.v.fcs_reason
    if reason == 'changed' then
      vim.v.fcs_choice = 'reload'
    elseif reason == 'deleted' or reason == 'conflict' then
      vim.v.fcs_choice = ''
      local buf = ev.buf
      vim.schedule(function()
        if watched[buf] then
          pending[buf] = true
          flush()
        end
      end)
    else  -- 'mode' or 'time': nothing to do
      vim.v.fcs_choice = ''
    end
  end)
  for _, buf in ipairs(api.nvim_list_bufs()) do track(buf) end
end

function M.stop()
  pcall(api.nvim_del_augroup_by_name, GROUP)
  for buf in pairs(watched) do unwatch(buf) end
  for dir in pairs(dirs) do close(dir) end
  if timer then
    timer:stop()
    timer:close()
    timer = nil
  end
  pending, first_event = {}, nil
end

return M
