-- claude_nvim.reload: a buffer brought up to date with its file, as Neovim's own reload would
-- do it but without its cost: the smallest change, one undo step, marks and cursors kept (the
-- one way in is M.refresh), and the record of what Neovim last read or wrote of each file
-- (M.disk, M.remember, M.changed_on_disk). Its bytes are read as text by claude_nvim.codec.
-- Started by core's setup (M.start).
local api = vim.api
local uv = vim.uv or vim.loop
local core = require('claude_nvim.core')
local codec = require('claude_nvim.codec')
local split = core.split_lines

---@class claude_nvim.reload
local M = {}

-- What Neovim last read or wrote of each buffer's file (buf -> { sig, mode }, false: there was
-- no file): saveDocument's "changed on disk" and bufsync's "changed since last seen" are both
-- this. A signature tells versions of a file apart: a rename-over changes the inode, a write
-- the size or the mtime.
---@type table<integer, {sig: string, mode: integer}|false>
M.disk = {}

local function signature(stat)
  return ('%d:%d:%d.%d'):format(stat.ino, stat.size, stat.mtime.sec, stat.mtime.nsec)
end

--- Record `stat` (fs_stat's of its file now when not given) as what `buf` last saw of its file.
---@param buf integer
---@param stat? uv.fs_stat.result
function M.remember(buf, stat)
  if not (api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == '') then return end
  local name = api.nvim_buf_get_name(buf)
  if name == '' then return end
  stat = stat or uv.fs_stat(name)
  M.disk[buf] = stat and { sig = signature(stat), mode = stat.mode } or false
end

--- Whether `buf`'s file changed on disk since Neovim read or wrote it (as far as we saw).
---@param buf integer
---@return boolean
function M.changed_on_disk(buf)
  local seen = M.disk[buf]
  if seen == nil then return false end
  local stat = uv.fs_stat(api.nvim_buf_get_name(buf))
  return (stat and signature(stat)) ~= (seen and seen.sig)
end


-- Close the current undo block of the current buffer (setting 'undolevels' does, even to
-- its own value): the reload is one undo step of its own, apart from the user's edits.
local function close_undo_block()
  vim.cmd('noautocmd let &g:undolevels = &g:undolevels')
end

-- How many bytes `a` and `b` have in common at their start (`from_end`: at their end), up to
-- `most`: pieces that double while they match, then halve where they differ.
local function common(a, b, most, from_end)
  local function same(i, j)  -- bytes i+1..j from the start (or the end) are the same
    if from_end then return a:sub(#a - j + 1, #a - i) == b:sub(#b - j + 1, #b - i) end
    return a:sub(i + 1, j) == b:sub(i + 1, j)
  end
  local low, step = 0, 64
  while low < most do
    local high = math.min(most, low + step)
    if not same(low, high) then
      most = high - 1
      break
    end
    low, step = high, step * 2
  end
  while low < most do
    local mid = math.ceil((low + most) / 2)
    if same(low, mid) then low = mid else most = mid - 1 end
  end
  return low
end

-- The line breaks in `s` from byte `i` to byte `j`: how many, and where the last one is.
local function breaks(s, i, j)
  local count, last = 0, nil
  local at = s:find('\n', i, true)
  while at and at <= j do
    count, last = count + 1, at
    at = s:find('\n', at + 1, true)
  end
  return count, last
end

-- How the buffer's lines (`old_lines`) and `text` compare: `head` lines both start with
-- (`text` goes on at byte `from`), `tail` lines both end with (`text` stops before them at
-- byte `to`), and the buffer's lines between them. Compared line by line: a piece of `text`
-- equal to a line is that line's string (Lua strings are interned), no copy.
local function compare_lines(old_lines, text)
  local head, from = 0, 1
  while head < #old_lines do
    local line = old_lines[head + 1]
    local stop = from + #line
    if text:byte(stop) ~= 10 or text:sub(from, stop - 1) ~= line then break end
    head, from = head + 1, stop + 1
  end
  local tail, to = 0, #text
  while head + tail < #old_lines do
    local line = old_lines[#old_lines - tail]
    local start = to - #line
    if start < from or (start > from and text:byte(start - 1) ~= 10)
        or text:sub(start, to - 1) ~= line then break end
    tail, to = tail + 1, start - 1
  end
  return head, from, tail, to, vim.list_slice(old_lines, head + 1, #old_lines - tail)
end

-- The same from `old`, the buffer's text as a string (each line followed by "\n"): no line
-- of the buffer fetched (100,000 lines: 20-30 ms).
local function compare_text(old, text)
  local shorter = math.min(#old, #text)
  local same = #text > #old and text:sub(1, #old) == old and #old  -- an append: one compare
    or common(old, text, shorter)
  local head, last = breaks(old, 1, same)
  local from = last and last + 1 or 1
  same = common(old, text, shorter - (from - 1), true)
  -- The tail starts after a line break in both texts: one inside the bytes both end with, or
  -- the one just before them if `text` has it too (or the head ends there).
  local stop = #old - same  -- the byte before the common end, in `old`
  if not (stop == from - 1 or (old:byte(stop) == 10
      and (#text - same == from - 1 or text:byte(#text - same) == 10))) then
    stop = old:find('\n', stop + 1, true) or #old
  end
  local tail = breaks(old, stop + 1, #old)
  local to = #text - (#old - stop)
  return head, from, tail, to, split(old:sub(from, stop))
end

-- The text each big buffer was last given, while it is unchanged since (buf -> { text, tick }):
-- its next reload compares strings instead of fetching its lines.
local known = {}
local KNOWN_LINES = 20000

-- Make `buf`'s lines `text` by the smallest change: the lines that differ between the lines
-- both start with and those both end with, as vim.diff splits them into hunks. Undo keeps
-- what changed only (an append costs the appended lines), marks, folds and every window's
-- cursor stay where their lines are, and LSP clients get the change. One undo step.
local function apply(buf, text)
  local edits = {}
  local middle
  local was = known[buf]
  known[buf] = nil
  if api.nvim_buf_line_count(buf) == 1 and api.nvim_buf_get_lines(buf, 0, 1, true)[1] == '' then
    middle = { '' }  -- empty, or one empty line (the API tells them not apart): all of it
    edits[1] = { 0, 1, split(text) }
  else
    local head, from, to, _
    if was and was.tick == api.nvim_buf_get_changedtick(buf) then
      if was.text == text then return end
      head, from, _, to, middle = compare_text(was.text, text)
    else
      head, from, _, to, middle = compare_lines(api.nvim_buf_get_lines(buf, 0, -1, false), text)
    end
    if #middle == 0 and to < from then return end  -- the same text
    local hunks = vim.diff(#middle > 0 and table.concat(middle, '\n') .. '\n' or '',
                           text:sub(from, to), { result_type = 'indices' })
    -- Lines between hunks are the same bytes in both texts: a hunk's new lines start at its
    -- old lines' offset plus what the hunks before it added.
    local row, offset, delta = 0, from - 1, 0  -- row: of `middle`
    for i, hunk in ipairs(hunks) do
      local first = hunk[2] == 0 and hunk[1] or hunk[1] - 1
      local last = first + hunk[2]
      while row < first do
        row, offset = row + 1, offset + #middle[row + 1] + 1
      end
      local lines, start = {}, offset + delta + 1
      local at = start
      for k = 1, hunk[4] do
        local newline = text:find('\n', at, true)
        lines[k], at = text:sub(at, newline - 1), newline + 1
      end
      local removed = offset
      while row < last do
        row, offset = row + 1, offset + #middle[row + 1] + 1
      end
      delta = delta + (at - start) - (offset - removed)
      edits[i] = { head + first, head + last, lines, first }
    end
  end
  -- Rows that hold a cursor or a mark are changed as text: Neovim 0.12 moves the marks and
  -- cursors of lines that set_lines replaces, as if they were deleted.
  local held = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do held[api.nvim_win_get_cursor(win)[1]] = true end
  for _, marks in ipairs({ vim.fn.getmarklist(buf), vim.fn.getmarklist() }) do
    for _, mark in ipairs(marks) do
      if mark.pos[1] == 0 or mark.pos[1] == buf then held[mark.pos[2]] = true end
    end
  end
  api.nvim_buf_call(buf, function()
    close_undo_block()
    for i = #edits, 1, -1 do
      local first, last, lines, at = edits[i][1], edits[i][2], edits[i][3], edits[i][4] or 0
      local same = math.min(last - first, #lines)  -- lines replaced one for one
      if last - first > same or #lines > same then
        api.nvim_buf_set_lines(buf, first + same, last, false,
                               same > 0 and vim.list_slice(lines, same + 1) or lines)
      end
      local run = 0  -- rows first+run .. first+k-1 are replaced as lines, held ones as text
      for k = 1, same + 1 do
        local row = first + k - 1
        if k > same or held[row + 1] then
          if run < k - 1 then
            api.nvim_buf_set_lines(buf, first + run, row, false, vim.list_slice(lines, run + 1,
                                                                                k - 1))
          end
          if k <= same then
            api.nvim_buf_set_text(buf, row, 0, row, #middle[at + k], { lines[k] })
          end
          run = k
        end
      end
    end
    close_undo_block()
  end)
end

-- Whether a :write of `buf` now would run the BufWriteCmd `sync` adds, and no other: no other
-- one matches its file (netrw's are for URLs), none is ignored ('eventignore', ':noautocmd'),
-- and autocmds run here (in a callback of an autocmd without `nested`, as in an RPC call that
-- came while one waits, they do not). That last is found by trying: setting an option to its
-- value runs OptionSet as a write would run BufWriteCmd.
local HAS_EVENTIGNOREWIN = vim.fn.exists('+eventignorewin') == 1  -- Neovim 0.11+
local function only_ours_write(buf, name)
  local ignored = (vim.o.eventignore .. ','):lower()
  if HAS_EVENTIGNOREWIN then
    for _, win in ipairs(vim.fn.win_findbuf(buf)) do
      ignored = ignored .. vim.wo[win].eventignorewin:lower() .. ','
    end
  end
  for _, event in ipairs({ 'all,', 'bufwritecmd,', 'optionset,' }) do
    if ignored:find(event, 1, true) then return false end
  end
  for _, au in ipairs(api.nvim_get_autocmds({ event = 'BufWriteCmd' })) do
    if au.buflocal then
      if au.buffer == buf then return false end
    else
      local target = au.pattern:find('/', 1, true) and name or name:match('[^/]*$')
      if vim.fn.match(target, vim.fn.glob2regpat(au.pattern)) >= 0 then return false end
    end
  end
  local ran = false
  local probe = api.nvim_create_autocmd('OptionSet', { pattern = 'undolevels', once = true,
    callback = function() ran = true end })
  vim.cmd('let &g:undolevels = &g:undolevels')
  pcall(api.nvim_del_autocmd, probe)
  return ran
end

-- Tell Neovim that `buf` is its file as it is on disk now. Neovim keeps its own record of the
-- file (what :w compares before it asks "The file has been changed since reading it!!!", and
-- its own checks), updated only when it reads or writes it. A :write that a BufWriteCmd
-- answers ("written": 'modified' reset) updates that record from a stat of the path (it opens
-- nothing) and marks every undo state as changed, as a real write does. Where that :write
-- could do anything else, it waits until Neovim is idle (SafeState), if `buf` is still as it
-- is now then; if it still could, only 'modified' is reset (a later :w may then ask).
local syncing = {}  -- buf -> its changedtick while it waits to be synced: not the user's change
local function sync(buf, again)
  local name, tick = api.nvim_buf_get_name(buf), api.nvim_buf_get_changedtick(buf)
  syncing[buf] = nil
  if not api.nvim_buf_call(buf, function() return only_ours_write(buf, name) end) then
    if again then
      vim.bo[buf].modified = false
      return
    end
    syncing[buf] = tick
    api.nvim_create_autocmd('SafeState', { once = true, nested = true, callback = function()
      syncing[buf] = nil
      if api.nvim_buf_is_loaded(buf) and api.nvim_buf_get_changedtick(buf) == tick then
        sync(buf, true)
      end
    end })
    return
  end
  local written = false
  local id = api.nvim_create_autocmd('BufWriteCmd', { buffer = buf, callback = function(ev)
    vim.bo[ev.buf].modified = false
    written = true
  end })
  local ok, err = pcall(api.nvim_buf_call, buf, function()
    vim.cmd('silent keepalt keepjumps lockmarks write!')
  end)
  pcall(api.nvim_del_autocmd, id)
  if not (ok and written) then
    core.log('error', ('could not record %s as read: %s'):format(name, tostring(err)))
  end
end

-- A big file leaves copies of its text behind (read, joined, diffed): they are collected soon,
-- a step every few milliseconds, rather than when Lua gets round to it (Neovim would hold a
-- few times the file per reload meanwhile). Not at once: a full collection of a big heap (50
-- ms with 50,000 diagnostics) would be a freeze of its own.
local GARBAGE_BYTES = 1024 * 1024
local collecting = nil  -- the timer of the steps, while a collection goes on
local function collect_soon()
  if collecting then return end
  collecting = uv.new_timer()
  collecting:start(0, 5, function()
    if collectgarbage('step', 256) and collecting then
      collecting:close()
      collecting = nil
    end
  end)
end

-- Called with a buffer whose reload is about to change its text, if set: the review of
-- Claude's turns keeps the text it had (claude_nvim.review).
M.before_reload = nil

-- Make `buf` (unmodified) show its file as read now, from `data` and `stat` (its fstat).
-- Returns nil, or why it could not.
local function reload(buf, data, stat)
  local text, read = codec.decode(data, buf)
  if text == nil then return read end
  if M.before_reload then
    local ok, err = pcall(M.before_reload, buf)
    if not ok then core.log('error', 'before_reload: ' .. tostring(err)) end
  end
  local bo, name = vim.bo[buf], api.nvim_buf_get_name(buf)
  local modifiable, readonly = bo.modifiable, bo.readonly
  if not modifiable then bo.modifiable = true end  -- as a reload: no E21,
  if readonly then bo.readonly = false end         -- nor a W10 warning and its 1 s wait
  local ok, err = pcall(apply, buf, text)
  for option, value in pairs(read) do
    if bo[option] ~= value then bo[option] = value end
  end
  if not modifiable then bo.modifiable = false end
  -- As a reload: read-only if the file is not writable, and still if the user set it.
  local seen = M.disk[buf]
  readonly = not uv.fs_access(name, 'W') or (readonly and (seen and seen.mode) == stat.mode)
  if readonly then bo.readonly = true end
  sync(buf)
  if not ok then
    M.disk[buf] = { sig = signature(stat), mode = stat.mode }
    error(err, 0)
  end
  pcall(api.nvim_exec_autocmds, 'FileChangedShellPost', { buffer = buf, modeline = false })
  M.disk[buf] = { sig = signature(stat), mode = stat.mode }
  if api.nvim_buf_line_count(buf) >= KNOWN_LINES then
    known[buf] = { text = text, tick = api.nvim_buf_get_changedtick(buf) }
  end
  if #data > GARBAGE_BYTES then collect_soon() end
  return nil
end

--- Bring `buf` up to date with its file if that changed on disk since Neovim last read or
--- wrote it: the one way claude-nvim reloads a buffer. A buffer with unsaved changes is never
--- touched; nor is it for a file Neovim must not read (M.unloadable), which it never opens.
--- Returns what it found: 'current', 'reloaded', 'modified' (the file changed, the buffer has
--- unsaved changes), 'deleted', or 'refused' and why; nil for a buffer with no file.
---@param buf integer
---@return 'current'|'reloaded'|'modified'|'deleted'|'refused'|nil
---@return string? why
function M.refresh(buf)
  if not (api.nvim_buf_is_valid(buf) and api.nvim_buf_is_loaded(buf))
      or vim.bo[buf].buftype ~= '' then return nil end
  local name = api.nvim_buf_get_name(buf)
  if not (name:sub(1, 1) == '/' or name:match('^%a:[/\\]')) then return nil end
  local seen, stat = M.disk[buf], uv.fs_stat(name)
  if stat == nil then return seen and 'deleted' or 'current' end
  if seen and seen.sig == signature(stat) then return 'current' end
  if vim.bo[buf].modified and syncing[buf] ~= api.nvim_buf_get_changedtick(buf) then
    return seen == nil and 'current' or 'modified'
  end
  local why = core.unloadable(name)
  if why == nil then
    local data
    data, stat = core.read_file(name)
    if data == nil then
      why = stat
    else
      why = reload(buf, data, stat)
      if why then why = name .. ' ' .. why end
    end
  elseif stat.type ~= 'file' then
    sync(buf)  -- Neovim's own checks see no change: none of them opens it
  end
  if why then return 'refused', why --[[@as string]] end
  return 'reloaded'
end

--- Start the records for the server: what Neovim last saw of each loaded buffer's file, kept
--- by autocmds in core's `group` (deleted with it when the server stops).
---@param group integer
function M.start(group)
  M.disk, known = {}, {}
  for _, buf in ipairs(api.nvim_list_bufs()) do M.remember(buf) end
  api.nvim_create_autocmd({ 'BufReadPost', 'BufNewFile', 'BufWritePost', 'FileChangedShellPost' },
    { group = group, callback = function(ev) M.remember(ev.buf) end })
  api.nvim_create_autocmd({ 'BufUnload', 'BufWipeout' }, {
    group = group, callback = function(ev) M.disk[ev.buf], known[ev.buf] = nil, nil end,
  })
end

return M
