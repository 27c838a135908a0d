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
local watched = {}  -- buf -> { path, ... } the file paths it is watched under
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

-- The file of `buf` changed on disk (or may have): reload, warn, or nothing.
local function follow(buf)
  if not (api.nvim_buf_is_valid(buf) and api.nvim_buf_is_loaded(buf) and watched[buf]) then
    return
  end
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

local function flush()
  first_event = nil
  local bufs = pending
  pending = {}
  for buf in pairs(bufs) do
    local ok, err = pcall(follow, buf)
    if not ok then core.log('error', 'bufsync: ' .. tostring(err)) end
  end
end

local on_quiet = vim.schedule_wrap(flush)

-- A watcher's callback: in libuv's loop, where the API may not be called.
local function on_event(dir, err, filename)
  local entry = dirs[dir]
  if entry == nil then return end
  if err then  -- the directory went away, or the watch broke: check all its buffers
    filename = nil
  end
  if filename == nil then
    for _, bufs in pairs(entry.names) do
      for buf in pairs(bufs) do pending[buf] = true end
    end
  elseif entry.names[filename] then
    for buf in pairs(entry.names[filename]) do pending[buf] = true end
  else
    return  -- another file of the directory
  end
  local now = uv.now()
  first_event = first_event or now
  if now - first_event < MAX_WAIT_MS or not timer:is_active() then
    timer:stop()
    timer:start(QUIET_MS, 0, on_quiet)
  end
end

-- A file's directory and name; cheaper than vim.fs's, which validate their arguments (a
-- thousand buffers at setup count).
local function split(path)
  local dir, name = path:match('^(.*)[/\\]([^/\\]+)$')
  return (dir == '' or dir:match('^%a:$')) and dir .. '/' or dir, name
end

local function watch(buf, path)
  local dir, name = split(path)
  local entry = dirs[dir]
  if entry == nil then
    local watcher = uv.new_fs_event()
    if watcher == nil then return false end
    local ok = watcher:start(dir, {}, function(err, filename) on_event(dir, err, filename) end)
    if not ok then
      watcher:close()
      return false
    end
    entry = { watcher = watcher, names = {} }
    dirs[dir] = entry
  end
  entry.names[name] = entry.names[name] or {}
  entry.names[name][buf] = true
  return true
end

local function unwatch(buf)
  for _, path in ipairs(watched[buf] or {}) do
    local dir, name = split(path)
    local entry = dirs[dir]
    if entry and entry.names[name] then
      entry.names[name][buf] = nil
      if next(entry.names[name]) == nil then entry.names[name] = nil end
      if next(entry.names) == nil then
        entry.watcher:stop()
        entry.watcher:close()
        dirs[dir] = nil
      end
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
  local paths = {}
  local link = uv.fs_lstat(name)  -- a symbolic link: its target's directory is watched too
  local real = link and link.type == 'link' and uv.fs_realpath(name) or nil
  for _, path in ipairs({ name, real }) do
    if watch(buf, path) then paths[#paths + 1] = path end
  end
  if #paths > 0 then
    watched[buf] = paths
    disk[buf] = signature(name) or false
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
    if not watched[ev.buf] or api.nvim_buf_get_name(ev.buf) ~= watched[ev.buf][1] then
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
  if timer then
    timer:stop()
    timer:close()
    timer = nil
  end
  pending, first_event = {}, nil
end

return M
