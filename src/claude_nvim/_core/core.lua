-- claude_nvim.core: what every part of claude-nvim's Neovim half shares. Installed by the
-- server (docs/architecture.md, "Lua"). Two parts:
--
-- 1. The helpers, for tools and every other module (`local core =
--    package.loaded['claude_nvim.core']`): positions, paths and text (utf16, cut, file_url,
--    absolute, existing, split_lines), the user's windows (is_editor, editor_window), buffers
--    and files (find_buffer, unloadable, read_file, load, reader; what Neovim last saw of a
--    file: changed_on_disk, refresh, show), messages (notify and log to the server, tell the
--    user, guard a callback) and workspace_folders.
-- 2. The server's lifecycle (at the end of this file), never called by tools: setup, publish,
--    ready, clients, stop, unload, and live_server, the one test of a live server (the
--    server's claim, the Neovim plugin and the doctor ask it).
local api = vim.api
local uv = vim.uv or vim.loop

--- vim.g.claude_nvim_server: the server that owns this Neovim.
---@class claude_nvim.ServerRecord
---@field channel integer its RPC channel
---@field pid integer its process
---@field port integer|nil where it listens, once it does
---@field clients? integer the Claudes listening now
---@field claude? {env: table<string, string>, args: string[]} once ready: what a claude needs

---@class claude_nvim.core
---@field chan integer|nil the server's channel (setup); nil once switched off
---@field port integer|nil the port published to the environment (publish)
---@field modules string[] the modules the server installed, core first (its claim sets it)
local M = { chan = nil, port = nil, modules = {} }

-- ---------------------------------------------------------------------------------------------
-- 1. The helpers: for tools and every module

--- Byte offset (0-based) in `line` -> UTF-16 code units, as LSP and the CLI count.
---@param line string
---@param byte integer a 0-based byte offset in `line`
---@return integer
function M.utf16(line, byte)
  if byte <= 0 then return 0 end
  if byte >= #line then byte = #line end
  local ok, n = pcall(vim.str_utfindex, line, 'utf-16', byte, false)
  if ok and n then return n end
  local _, n16 = vim.str_utfindex(line, byte)  -- Neovim < 0.11
  return n16
end

--- `path`'s URI as the CLI writes it: file:// and the path, not percent-encoded.
---@param path string an absolute path
---@return string
function M.file_url(path) return 'file://' .. path end

--- `s` cut to at most `n` bytes, never inside a UTF-8 sequence; and whether it was cut.
---@param s string
---@param n integer
---@return string
---@return boolean cut
function M.cut(s, n)
  if #s <= n then return s, false end
  while n > 0 and bit.band(s:byte(n + 1), 0xC0) == 0x80 do n = n - 1 end
  return s:sub(1, n), true
end

--- The CLI compares paths as strings: make ours absolute without resolving symlinks.
---@param path string
---@return string
function M.absolute(path)
  if path:sub(1, 1) == '~' and (path:len() == 1 or path:sub(2, 2) == '/') then
    path = (vim.env.HOME or '') .. path:sub(2)
  elseif path:sub(1, 1) ~= '/' and not path:match('^%a:[/\\]') then
    path = vim.fn.getcwd(-1, -1) .. '/' .. path
  end
  return vim.fs.normalize(path, { expand_env = false })
end

--- The first of `candidates` (paths as the model or the CLI gave them) that exists on disk, made
--- absolute (`test`: what "exists" means, fs_stat by default), or nil.
---@param candidates string[]
---@param test? fun(path: string): any
---@return string|nil
function M.existing(candidates, test)
  test = test or uv.fs_stat
  for _, candidate in ipairs(candidates) do
    local path = M.absolute(candidate)
    if test(path) then return path end
  end
  return nil
end

--- An "active editor": a normal file buffer in a normal window, not one of our diff proposals.
---@param win? integer a window; nil or 0: the current one
---@return boolean
function M.is_editor(win)
  win = (win == nil or win == 0) and api.nvim_get_current_win() or win
  if api.nvim_win_get_config(win).relative ~= '' then return false end
  local buf = api.nvim_win_get_buf(win)
  return vim.bo[buf].buftype == '' and api.nvim_buf_get_name(buf) ~= ''
    and not vim.b[buf].claude_nvim_proposal
end

-- The file windows the user was in, most recent first (a few: one may close).
local editors = {}

local function entered()
  local win = api.nvim_get_current_win()
  if not M.is_editor(win) then return end
  for i = #editors, 1, -1 do
    if editors[i] == win then table.remove(editors, i) end
  end
  table.insert(editors, 1, win)
  editors[9] = nil
end

--- The user's editor window, by one rule: the current window if it is an editor, else the file
--- window the user was in last (while the cursor is in Claude's terminal, say); nil when there
--- is none. openFile opens files there, a diff beside Claude shows its file there,
--- getOpenEditors and getCurrentSelection take its file as the active one, getQuickfixList
--- reads its location list, and the Neovim plugin goes back there from Claude.
---@return integer|nil
function M.editor_window()
  local win = api.nvim_get_current_win()
  if M.is_editor(win) then return win end
  for _, last in ipairs(editors) do
    if api.nvim_win_is_valid(last) and M.is_editor(last) then return last end
  end
  return nil
end

-- Whether vim.fs.normalize would leave `name` as it is (most buffer names): it costs 20 us a
-- call, 20 ms for a thousand buffers.
local function normal(name)
  return name:sub(1, 1) == '/' and not (name:find('[\\~]') or name:find('//', 1, true)
    or name:find('/%.%.?/') or name:find('/%.%.?$') or (#name > 1 and name:sub(-1) == '/'))
end

-- `name` as the buffer indexes below know it (normalized, $VARS left alone).
local function key(name)
  return normal(name) and name or vim.fs.normalize(name, { expand_env = false })
end

--- The buffer whose file is the first of `candidates` (paths) that matches one, or nil.
---@param candidates string[]
---@return integer|nil
function M.find_buffer(candidates)
  local by_name, by_real = {}, {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    local name = api.nvim_buf_get_name(buf)
    if name ~= '' then
      local k = key(name)
      by_name[k] = by_name[k] or buf
    end
  end
  for _, path in ipairs(candidates) do
    local buf = by_name[M.absolute(path)]
    if buf then return buf end
  end
  for buf_name, buf in pairs(by_name) do
    local real = uv.fs_realpath(buf_name)
    if real then by_real[real] = by_real[real] or buf end
  end
  for _, path in ipairs(candidates) do
    local real = uv.fs_realpath(M.absolute(path))
    if real and by_real[real] then return by_real[real] end
  end
  return nil
end

-- Files a tool may make Neovim read. Neovim reads a file whole, in the thread that serves the
-- user: a FIFO blocks it in open() until a writer comes, for ever if none does (not even
-- SIGTERM ends that), /dev/zero never ends, and a big file freezes it and takes its size in
-- memory (200 MB: 1.7 s, 220 MB). The server sets the limit at start ($CLAUDE_NVIM_MAX_FILE_MB).
---@type integer
M.max_file_bytes = 50 * 1024 * 1024

local KINDS = { directory = 'a directory', fifo = 'a FIFO', socket = 'a socket',
                char = 'a character device', block = 'a block device' }

local function size(bytes)
  for _, unit in ipairs({ { 2 ^ 30, 'GB' }, { 2 ^ 20, 'MB' }, { 2 ^ 10, 'KB' } }) do
    if bytes >= unit[1] then
      return (('%.1f %s'):format(bytes / unit[1], unit[2]):gsub('%.0 ', ' '))
    end
  end
  return bytes .. ' bytes'
end

-- Why Neovim must not read a file whose fs_stat is `stat` (at `path`), or nil.
local function refusal(path, stat, limit)
  if stat.type ~= 'file' then
    return ('%s is not a regular file (%s)'):format(path, KINDS[stat.type] or stat.type)
  end
  if stat.size > (limit or M.max_file_bytes) then
    return ("%s is %s, over claude-nvim's limit of %s for opening files "
      .. '(CLAUDE_NVIM_MAX_FILE_MB)'):format(path, size(stat.size), size(limit or M.max_file_bytes))
  end
  return nil
end

--- Why a tool must not make Neovim read the file at `path`, or nil (also when there is none).
---@param path string
---@return string|nil why
function M.unloadable(path)
  local stat = uv.fs_stat(path)
  return stat and refusal(path, stat)
end

local OPEN_FLAGS = bit.bor(uv.constants.O_RDONLY, uv.constants.O_NONBLOCK,
                           uv.constants.O_NOCTTY or 0)
local function unreadable(path, err)  -- luv's "EACCES: permission denied: /path"
  return ('%s cannot be read (%s)'):format(path, tostring(err):match('^%u+: ([^:]+)') or err)
end

--- The bytes of the regular file at `path` and its fstat, read from one descriptor: opened
--- without blocking (a FIFO a racing process puts in its place cannot hold Neovim in open()),
--- checked with fstat (a regular file within `limit` bytes), never opened again by path.
--- Or nil and why not.
---@param path string
---@param limit? integer bytes; default M.max_file_bytes
---@return string|nil data
---@return uv.fs_stat.result|string stat_or_why
function M.read_file(path, limit)
  local fd, err = uv.fs_open(path, OPEN_FLAGS, 0)
  if fd == nil then return nil, unreadable(path, err) end
  local stat = uv.fs_fstat(fd)
  local why = stat == nil and path .. ' cannot be read' or refusal(path, stat, limit)
  limit = limit or M.max_file_bytes
  local chunks, total = {}, 0
  while why == nil do  -- to the end, which a file being appended to may have moved
    local chunk, read_err = uv.fs_read(fd, math.max(stat.size - total, 0) + 65536, total)
    if chunk == nil then
      why = unreadable(path, read_err)
    elseif chunk == '' then
      break
    else
      chunks[#chunks + 1], total = chunk, total + #chunk
      if total > limit then why = refusal(path, { type = 'file', size = total }, limit) end
    end
  end
  uv.fs_close(fd)
  if why then return nil, why end
  return #chunks == 1 and chunks[1] or table.concat(chunks), stat
end

--- The buffer of file `path` loaded, as :edit loads it for the user: `buf` (the file's buffer)
--- or a new unlisted one, with no swap file if `private` (it is only the tool's). An error in
--- the file's modeline or in an autocmd is Neovim's message to the user, not the tool's failure.
--- A file M.unloadable refuses is not touched, and gets no buffer. Returns the buffer, or nil
--- and why not.
---@param path string
---@param buf? integer
---@param private? boolean
---@return integer|nil buf
---@return string? why
function M.load(path, buf, private)
  if buf and api.nvim_buf_is_loaded(buf) then return buf end
  local why = M.unloadable(buf and api.nvim_buf_get_name(buf) or path)
  if why then return nil, why end
  if buf == nil then
    buf = vim.fn.bufadd(path)
    if private then vim.bo[buf].swapfile = false end
  end
  local ok, err = pcall(vim.fn.bufload, buf)  -- never a swap-file dialog, unlike :edit
  local message = (tostring(err):gsub('^Vim:', ''))
  if not api.nvim_buf_is_loaded(buf) then
    return nil, ok and 'Could not load ' .. path or message
  end
  if not ok then vim.notify(message, vim.log.levels.ERROR) end
  return buf
end

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

-- ---------------------------------------------------------------------------------------------
-- Reloading a buffer from its file: what M.refresh (below, the one way in) is made of

-- `data` (a file's bytes) as the text Neovim's reload of `buf` would read: converted from
-- 'fileencoding', its BOM taken off, lines ended as 'fileformat' says (forced, as a reload
-- forces them), each line followed by "\n". And the options that reading sets. Or nil, why.
local SWAP_CR_LF = { ['\r'] = '\n', ['\n'] = '\r' }  -- 'fileformat' mac: a CR ends a line
local function decode(buf, data)
  local bo = vim.bo[buf]
  local fenc, binary = bo.fileencoding, bo.binary
  if fenc ~= '' and fenc ~= 'utf-8' then
    local converted = vim.iconv(data, fenc, 'utf-8')
    if converted == nil then return nil, 'cannot be converted from ' .. fenc end
    data = converted
  end
  local read = { bomb = false, endoffile = false }
  if not binary and (fenc == '' or fenc:sub(1, 1) == 'u') and data:sub(1, 3) == '\239\187\191' then
    data, read.bomb = data:sub(4), true
  end
  if not binary and bo.fileformat == 'dos' then
    data = data:gsub('\r\n', '\n')
    if data:sub(-1) == '\26' and (#data == 1 or data:sub(-2, -2) == '\n') then
      data, read.endoffile = data:sub(1, -2), true  -- a last "line" of only CTRL-Z
    end
  elseif not binary and bo.fileformat == 'mac' then
    data = data:gsub('[\r\n]', SWAP_CR_LF)
  end
  read.eol = data == '' or data:sub(-1) == '\n'
  return read.eol and data or data .. '\n', read
end

--- The lines of `text`, each ended by "\n": "a\nb\n" -> { 'a', 'b' }.
---@param text string
---@return string[]
function M.split_lines(text)
  local lines = vim.split(text, '\n', { plain = true })
  lines[#lines] = nil
  return lines
end
local split = M.split_lines

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
  local edits, middle = {}
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
    M.log('error', ('could not record %s as read: %s'):format(name, tostring(err)))
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
  local text, read = decode(buf, data)
  if text == nil then return read end
  if M.before_reload then
    local ok, err = pcall(M.before_reload, buf)
    if not ok then M.log('error', 'before_reload: ' .. tostring(err)) end
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

--- Make `buf` show `data`, its file's bytes as they are elsewhere (on Claude's host, where
--- Neovim's file is another copy: sshfs, scp://), as a reload would: the smallest change, one
--- undo step, then unmodified; what Neovim knows of its own copy is left alone. Returns nil, or
--- why it could not.
---@param buf integer
---@param data string
---@return string? why
function M.show(buf, data)
  local text, read = decode(buf, data)
  if text == nil then return read end
  local bo = vim.bo[buf]
  local modifiable = bo.modifiable
  if not modifiable then bo.modifiable = true end
  local ok, err = pcall(apply, buf, text)
  if not modifiable then bo.modifiable = false end
  if not ok then return tostring(err) end
  for option, value in pairs(read) do
    if bo[option] ~= value then bo[option] = value end
  end
  bo.modified = false
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
  local why = refusal(name, stat)
  if why == nil then
    local data
    data, stat = M.read_file(name)
    if data == nil then
      why = stat
    else
      why = reload(buf, data, stat)
      if why then why = name .. ' ' .. why end
    end
  elseif stat.type ~= 'file' then
    sync(buf)  -- Neovim's own checks see no change: none of them opens it
  end
  if why then return 'refused', why end
  return 'reloaded'
end

-- ---------------------------------------------------------------------------------------------
-- More helpers: messages (to the server, to the user), workspace folders, lines by path

--- Notify the server. A dead channel (the server went away) switches its claude-nvim off here,
--- so no autocmd ever raises "Invalid channel" at the user.
---@param event string
---@param ... any
---@return boolean sent
function M.notify(event, ...)
  if M.chan == nil then return false end
  if pcall(vim.rpcnotify, M.chan, event, ...) then return true end
  M.unload(M.chan)
  return false
end

--- A line in the server's log. level: 'debug', 'info', 'warn', 'error' or a vim.log.levels
--- number; any other level still logs (as a warning).
---@param level 'debug'|'info'|'warn'|'error'|integer
---@param msg string
---@return boolean sent
function M.log(level, msg) return M.notify('claude_nvim_log', level, msg) end

--- Tell the user `msg` (claude_nvim.tell, the one way); when this screen has no room at all,
--- the server's log has it.
---@param msg string
---@param level? 'INFO'|'WARN'|'ERROR'
function M.tell(msg, level)
  if not require('claude_nvim.tell').tell(msg, level) then
    M.log('warn', 'not shown (no room on the screen): ' .. msg)
  end
end

--- Wrap an autocmd callback: its errors go to the server's log, not to :messages.
---@generic F: function
---@param fn F
---@return F
function M.guard(fn)
  return function(...)
    local ok, err = pcall(fn, ...)
    if not ok then M.log('error', tostring(err)) end
  end
end

--- The workspace folders: the current directory, then the language servers' folders.
---@return string[]
function M.workspace_folders()
  local seen, out = {}, {}
  local function add(path)
    if not path or path == '' then return end
    path = M.absolute(path)
    if not seen[path] then seen[path] = true; out[#out + 1] = path end
  end
  add(vim.fn.getcwd(-1, -1))
  local get_clients = vim.lsp.get_clients or vim.lsp.get_active_clients
  for _, client in ipairs(get_clients()) do
    for _, folder in ipairs(client.workspace_folders or {}) do add(vim.uri_to_fname(folder.uri)) end
  end
  return out
end

--- A reader of lines by (path, 0-based row[, buf]): from `buf` or the loaded buffer of `path`
--- when there is one, else from the file, read once. Reading stops at 4 MB of files per reader,
--- so that a long answer never holds Neovim up: lines past that are nil.
---@return fun(path: string, row: integer, buf?: integer): string|nil
function M.reader()
  local buffers, files, budget = nil, {}, 4 * 1024 * 1024
  return function(path, row, buf)
    if buf == nil then
      if buffers == nil then
        buffers = {}
        for _, b in ipairs(api.nvim_list_bufs()) do
          local name = api.nvim_buf_get_name(b)
          if name ~= '' and api.nvim_buf_is_loaded(b) then buffers[key(name)] = b end
        end
      end
      buf = buffers[key(path)]
    end
    if buf and api.nvim_buf_is_loaded(buf) then
      return api.nvim_buf_get_lines(buf, row, row + 1, false)[1]
    end
    if files[path] == nil then  -- as readfile() reads it: a CR before each NL dropped
      local data = budget > 0 and M.read_file(path, budget)
      budget = budget - (data and #data or 0)
      files[path] = data and split((data:gsub('\r\n', '\n'):gsub('^\239\187\191', '')
        :gsub('[^\n]$', '%0\n'))) or {}
    end
    return files[path][row + 1]
  end
end

-- ---------------------------------------------------------------------------------------------
-- 2. The server's lifecycle, in its order: the claim (_nvim/lua.py's CLAIM_LUA: live_server,
-- then M.modules), setup, publish, ready, clients (as Claudes come and go), unload -> stop.
-- Tools never call these.

--- Start core for the server on channel `opts.chan`: the records of what Neovim last saw of
--- each file and of the user's editor windows, and the workspace folders' changes.
--- `opts.max_file_bytes`: the limit of M.unloadable; `opts.editor_script`: editor.lua's path.
---@param opts {chan: integer, max_file_bytes?: integer, editor_script?: string}
function M.setup(opts)
  M.chan = opts.chan
  M.max_file_bytes = opts.max_file_bytes or M.max_file_bytes
  M.editor_script = opts.editor_script
  local group = api.nvim_create_augroup('claude_nvim', { clear = true })
  M.disk, known = {}, {}
  for _, buf in ipairs(api.nvim_list_bufs()) do M.remember(buf) end
  api.nvim_create_autocmd({ 'BufReadPost', 'BufNewFile', 'BufWritePost', 'FileChangedShellPost' },
    { group = group, callback = function(ev) M.remember(ev.buf) end })
  api.nvim_create_autocmd({ 'BufUnload', 'BufWipeout' }, {
    group = group, callback = function(ev) M.disk[ev.buf], known[ev.buf] = nil, nil end,
  })
  editors = {}
  local previous = vim.fn.win_getid(vim.fn.winnr('#'))
  for _, win in ipairs({ previous, api.nvim_get_current_win() }) do
    if win ~= 0 and M.is_editor(win) then table.insert(editors, 1, win) end
  end
  api.nvim_create_autocmd({ 'WinEnter', 'BufEnter' }, { group = group, callback = entered })
  local function folders_changed()
    vim.schedule(M.guard(function() M.notify('claude_nvim_folders', M.workspace_folders()) end))
  end
  api.nvim_create_autocmd({ 'DirChanged', 'LspAttach', 'LspDetach' }, {
    group = group, callback = folders_changed,
  })
end

--- The live server of this Neovim: its record (vim.g.claude_nvim_server: channel, pid, port,
--- clients, and once ready `claude`, what a claude needs to connect), or nil. A server that died
--- without cleaning up leaves its record behind: its channel is gone. The one test of "is a
--- server here": the claim (_nvim/lua.py's CLAIM_LUA), the Neovim plugin and the doctor ask it.
---@return claude_nvim.ServerRecord|nil
function M.live_server()
  local info = vim.g.claude_nvim_server
  if type(info) ~= 'table' or info.channel == nil then return nil end
  -- A closed channel has no id (Neovim 0.10 gives its info as {[true] = 6}, not {}).
  if api.nvim_get_chan_info(info.channel).id == nil then return nil end
  return info
end

--- Listening on `port`: the environment a `claude` needs to connect here (docs/protocol.md §4),
--- set in Neovim's own so that `claude` started from any :terminal connects here. `remote`: the
--- server runs on another host, where claude runs too: its no_proxy and NO_PROXY there, and
--- nothing is set here.
---@param port integer
---@param remote table<string, string>|nil
---@return {pid: integer, folders: string[], env: table<string, string>}
function M.publish(port, remote)
  if remote == vim.NIL then remote = nil end
  M.port = port
  local info = vim.g.claude_nvim_server or {}
  info.port = port
  vim.g.claude_nvim_server = info
  local env = { CLAUDE_CODE_SSE_PORT = tostring(port), ENABLE_IDE_INTEGRATION = 'true',
                FORCE_CODE_TERMINAL = 'true' }
  for _, var in ipairs({ 'no_proxy', 'NO_PROXY' }) do
    local value = (remote or vim.env)[var] or ''
    local have = {}
    for _, host in ipairs(vim.split(value, ',', { trimempty = true })) do
      have[vim.trim(host)] = true
    end
    for _, host in ipairs({ 'localhost', '127.0.0.1', '::1' }) do
      if not have[host] then value = value == '' and host or (value .. ',' .. host) end
    end
    env[var] = value
  end
  if not remote then
    for var, value in pairs(env) do vim.env[var] = value end
  end
  local editor = not remote and M.editor_command()
  if editor then  -- only for the claudes started with this: not in Neovim's environment
    env.VISUAL, env.EDITOR = editor, editor
    local own = vim.env.CLAUDE_NVIM_USER_EDITOR or vim.env.VISUAL or vim.env.EDITOR or ''
    env.CLAUDE_NVIM_USER_EDITOR = own ~= editor and own or ''
  end
  return { pid = vim.fn.getpid(), folders = M.workspace_folders(), env = env }
end

--- The command claude runs as its editor (Ctrl+G, plans, memory: $VISUAL and $EDITOR): this
--- Neovim's nvim running editor.lua, which opens the file here (see that file); nil when
--- vim.g.claude_nvim_opts.editor is false. claude splits the command on spaces, with no shell:
--- a path with a space is reached through a symlink in a private directory without one.
---@return string|nil
function M.editor_command()
  local opts = vim.g.claude_nvim_opts
  if not M.editor_script or (type(opts) == 'table' and opts.editor == false) then return nil end
  local dir = vim.fn.stdpath('run') .. '/claude-nvim'
  local function spaceless(path, name)
    if not path:find(' ', 1, true) then return path end
    if dir:find(' ', 1, true) then return nil end
    vim.fn.mkdir(dir, 'p', tonumber('700', 8))
    local link = dir .. '/' .. name
    uv.fs_unlink(link)
    return uv.fs_symlink(path, link) and link or nil
  end
  -- This Neovim's binary, unless it runs through something else (a loader); named nvim in the
  -- command, so that claude adds the line (+N).
  local progpath = vim.v.progpath
  if not vim.fs.basename(progpath):match('^nvim') then
    progpath = vim.env.CLAUDE_NVIM_NVIM or vim.fn.exepath('nvim')
  end
  if progpath == '' then return nil end
  local nvim = spaceless(progpath, 'nvim')
  local script = spaceless(M.editor_script, 'editor.lua')
  return nvim and script and (nvim .. ' -l ' .. script) or nil
end

--- Ready (the lock file is written): `claude` = {env, args}, what a claude started by anyone
--- needs to use this server fully (its environment, and its command-line arguments: files the
--- server wrote). Kept in the record and announced: `User ClaudeNvimServerReady`, data: the
--- record. Whoever waits for a server waits for that.
---@param claude {env: table<string, string>, args: string[]}
function M.ready(claude)
  local info = vim.g.claude_nvim_server
  if type(info) ~= 'table' then return end
  info.claude = claude
  vim.g.claude_nvim_server = info
  pcall(api.nvim_exec_autocmds, 'User', { pattern = 'ClaudeNvimServerReady', data = info,
                                         modeline = false })
end

--- `count` Claudes are connected now, one more (`connected`) or one fewer: kept in
--- vim.g.claude_nvim_server.clients (statuslines read it) and told to the user's User autocmds.
---@param count integer
---@param connected boolean
function M.clients(count, connected)
  local info = vim.g.claude_nvim_server
  if type(info) ~= 'table' then return end
  info.clients = count
  vim.g.claude_nvim_server = info
  pcall(api.nvim_exec_autocmds, 'User', { modeline = false, data = { clients = count },
    pattern = connected and 'ClaudeNvimConnected' or 'ClaudeNvimDisconnected' })
end

--- Core's own half of switching off: its autocmds, the server mark, the port in the
--- environment. The server calls M.unload, which checks that it owns Neovim first.
function M.stop()
  pcall(api.nvim_del_augroup_by_name, 'claude_nvim')
  local info = vim.g.claude_nvim_server
  if type(info) == 'table' and (tonumber(info.clients) or 0) > 0 then M.clients(0, false) end
  if M.port and vim.env.CLAUDE_CODE_SSE_PORT == tostring(M.port) then
    vim.env.CLAUDE_CODE_SSE_PORT = nil
  end
  vim.g.claude_nvim_server = nil
  M.chan, M.port = nil, nil
end

--- Switch claude-nvim off in this Neovim for the server on channel `chan`: each module it
--- installed stops (the last installed first: autocmds, timers, commands, diff tabs), then
--- core. Only while that server owns Neovim (CLAIM_LUA): a refused or replaced server, or a
--- dead one's leftover Lua, must leave the owner's half alone. Returns whether it did.
---@param chan integer
---@return boolean
function M.unload(chan)
  local info = vim.g.claude_nvim_server
  if chan == nil or type(info) ~= 'table' or info.channel ~= chan then return false end
  local modules = M.modules or {}
  for i = #modules, 1, -1 do  -- ours only: a Neovim plugin may share the prefix
    local mod = package.loaded[modules[i]]
    if mod ~= M and type(mod) == 'table' and mod.stop then pcall(mod.stop) end
  end
  M.stop()
  return true
end

return M
