-- claude_nvim.review: the review of what Claude changed, turn by turn. The server keeps the
-- turns (the files' texts before and after); here: what bufsync sees change on disk while a
-- Claude works (the buffer's text before it reloads, sent once a turn per file), the signs of
-- the last turn's changes in loaded buffers, :ClaudeNvimReview (a tab showing each changed
-- file against its text before the turn, as the diffs show them, and the quickfix list with
-- one entry per hunk) and :ClaudeNvimRevert (hunks, or a whole file, back as they were).
-- Lifecycle: setup(opts) / stop(); opts (from ReviewFeature): before, request (event names).
local api = vim.api
local uv = vim.uv or vim.loop
local core = require('claude_nvim.core')
local codec = require('claude_nvim.codec')
local reload = require('claude_nvim.reload')
local diffs = require('claude_nvim.diffs')
local M = {}

---@type string, string
local BEFORE, REQUEST  -- notifications to the server
local SIGNS = api.nvim_create_namespace('claude_nvim_review_signs')
local reported = {}     -- file name -> true: its text before was sent, this turn
---@type { number: integer, files: integer }?
local unreviewed = nil  -- the latest turn recorded and not reviewed
local signed = {}       -- buf -> true: it shows signs (and listens for the edit that ends them)

---@class claude_nvim.ReviewView the review on screen (see M.show)
---@field number integer the turn's
---@field label string the Claude's
---@field files table[] each changed file, as `prepare` makes it
---@field index integer? the file shown
---@field main integer the window of the file
---@field side integer? the window of its text before the turn (layouts but 'inline')
---@field scratch integer? the buffer of that text
---@field tab integer
---@field group integer its autocommands
---@field presenting boolean? `present` is changing the main window's buffer

---@type claude_nvim.ReviewView?
local view = nil
local GROUP = 'claude_nvim_review'

local function nil_if_none(value)
  if value == nil or value == vim.NIL then return nil end
  return value
end

-- Whether a change on disk may be a Claude's: one works, or one without claude-nvim's hooks
-- (which never says when it works) is connected.
local function recording()
  local info = vim.g.claude_nvim_server
  for _, claude in ipairs(type(info) == 'table' and type(info.claudes) == 'table'
                          and info.claudes or {}) do
    if claude.state == 'unknown' or claude.state == 'working' then return true end
  end
  return false
end

-- A file's bytes as the text Neovim reads from them into `buf` (its options), or into a new
-- buffer (nil): claude_nvim.codec's, as the reload reads them. Bytes it cannot convert from
-- 'fileencoding' are shown as they are.
local function to_text(data, buf)
  data = nil_if_none(data)
  if data == nil or data == '' then return '' end
  return codec.decode(data, buf) or codec.decode(data)
end

local split = core.split_lines

-- A file's bytes as lines, as Neovim reads them into `buf` (or into a new buffer: nil).
local function to_lines(data, buf) return split(to_text(data, buf)) end

-- Line `n` of `text`.
local function nth_line(text, n)
  local at = 1
  for _ = 2, n do
    at = text:find('\n', at, true)
    if at == nil then return nil end
    at = at + 1
  end
  return text:sub(at, (text:find('\n', at, true) or (#text + 1)) - 1)
end

-- What `buf` holds, as text (each line ended by "\n").
local function buffer_text(buf)
  local lines = api.nvim_buf_get_lines(buf, 0, -1, false)
  if #lines == 1 and lines[1] == '' then return '' end  -- empty (one empty line: near enough)
  return table.concat(lines, '\n') .. '\n'
end

-- bufsync is about to reload `buf` (reload.before_reload): while a Claude may be the one who
-- wrote its file, the server gets its text before, once a turn.
local function before_reload(buf)
  local name = api.nvim_buf_get_name(buf)
  if reported[name] or not recording() then return end
  reported[name] = true
  core.notify(BEFORE, name, codec.encode(buf))
end

--- A new turn: the texts before are sent again.
function M.forget_reported() reported = {} end

-- Hunks ---------------------------------------------------------------------------------------

local function slice(lines, first, count)
  return vim.list_slice(lines, first, first + count - 1)
end

-- A hunk's side as rows [x, y), 0-based; a side of no line is the position between rows.
local function span(start, count)
  if count > 0 then return start - 1, start - 1 + count end
  return start, start
end

-- Where a hunk's new lines (`start`, `count` in the turn's text after) are now, given `moved`,
-- the hunks from that text to the text now; nil when later changes touched them.
local function locate(start, count, moved)
  local x, y = span(start, count)
  local shift = 0
  for _, m in ipairs(moved) do
    local mx, my = span(m[1], m[2])
    local touched
    if count > 0 and m[2] > 0 then touched = mx < y and x < my
    elseif count > 0 then touched = x < mx and mx < y
    elseif m[2] > 0 then touched = mx < x and x < my
    else touched = mx == x end
    if touched then return nil end
    if my <= x then shift = shift + m[4] - m[2] end
  end
  return start + shift
end

-- A changed file of a turn, as the review shows it: its texts before and after the turn and
-- now (its buffer's, if loaded), and the turn's hunks with where they are now. Its lines
-- (file.before, file.after, file.now) are split from the texts when first asked for.
local LINES = { before = true, after = true, now = true }
local File = { __index = function(file, key)
  if not LINES[key] then return nil end
  local lines = split(file.texts[key])
  rawset(file, key, lines)
  return lines
end }

local function prepare(change, buf)
  local file = setmetatable({ path = change.path, created = nil_if_none(change.before) == nil,
                              deleted = nil_if_none(change.after) == nil, buf = buf,
                              change = change }, File)
  local before, after = to_text(change.before, buf), to_text(change.after, buf)
  local now = buf and buffer_text(buf) or after
  file.texts = { before = before, after = after, now = now }
  local moved = now == after and {} or diffs.text_hunks(after, now)
  file.hunks = {}
  for _, h in ipairs(diffs.text_hunks(before, after)) do
    local at = locate(h[3], h[4], moved)
    file.hunks[#file.hunks + 1] = { old = h[1], old_count = h[2], start = at or h[3],
                                    count = h[4], stale = at == nil }
  end
  return file
end

local function hunk_text(file, h)
  local line = h.count > 0 and nth_line(file.texts.now, h.start)
    or nth_line(file.texts.before, h.old)
  line = vim.trim(line or '')
  return ('+%d −%d%s%s'):format(h.count, h.old_count, h.stale and ' (changed since)' or '',
                               line ~= '' and '  ' .. line or '')
end

-- Signs -----------------------------------------------------------------------------------

local function unsign(buf)
  signed[buf] = nil
  if api.nvim_buf_is_valid(buf) then api.nvim_buf_clear_namespace(buf, SIGNS, 0, -1) end
end

local function sign(buf, before)
  unsign(buf)
  local now = api.nvim_buf_get_lines(buf, 0, -1, false)
  for _, h in ipairs(diffs.hunks(before, now, true)) do
    if h[4] == 0 then
      api.nvim_buf_set_extmark(buf, SIGNS, math.max(h[3] - 1, 0), 0, {
        sign_text = '_', sign_hl_group = 'ClaudeNvimSignDelete', priority = 8 })
    end
    for row = h[3], h[3] + h[4] - 1 do
      local added = h[2] == 0
      api.nvim_buf_set_extmark(buf, SIGNS, row - 1, 0, {
        sign_text = added and '+' or '~', priority = 8,
        sign_hl_group = added and 'ClaudeNvimSignAdd' or 'ClaudeNvimSignChange' })
    end
  end
  signed[buf] = true
  -- Until the buffer is edited (by the user, or by a later change on disk).
  api.nvim_buf_attach(buf, false, { on_lines = function()
    if signed[buf] then vim.schedule(function() unsign(buf) end) end
    return true
  end, on_detach = function() signed[buf] = nil end })
end

-- Those of `paths` a buffer holds.
local function loaded_of(paths)
  local loaded, find = {}, core.buffer_finder(true)
  for _, path in ipairs(paths) do
    if find(path) then loaded[#loaded + 1] = path end
  end
  return loaded
end

-- The server recorded a turn that changed `paths` (summary: number, label, files): the loaded
-- ones, for their signs (M.mark). The server sends a big turn's paths a slice a call.
---@param summary { number: integer, label: string, files: integer }
---@param paths string[]
---@return string[] loaded
function M.recorded(summary, paths)
  unreviewed = { number = summary.number, files = summary.files }
  pcall(vim.cmd, 'redrawstatus!')
  return loaded_of(paths)
end

-- The server outlived the last Neovim: the review as that one showed it. `unreviewed_turn`
-- (number, files; nil: none) is the latest turn recorded and not reviewed, for status();
-- `paths` the files whose signs that Neovim showed, a slice a call: the loaded ones, for
-- M.mark (with no number).
---@param unreviewed_turn { number: integer, files: integer }|vim.NIL
---@param paths string[]
---@return string[] loaded
function M.restore(unreviewed_turn, paths)
  local turn = nil_if_none(unreviewed_turn)
  unreviewed = turn and { number = turn.number, files = turn.files }
  pcall(vim.cmd, 'redrawstatus!')
  return loaded_of(paths)
end

-- Signs in the loaded buffers of turn `number`'s files: `befores`, path -> bytes before it
-- (no number: each file's latest turn, M.restore). A buffer bufsync has not brought up to
-- date yet gets them once it has.
---@param number integer|vim.NIL
---@param befores table<string, string|vim.NIL>
function M.mark(number, befores)
  number = nil_if_none(number)
  if number ~= nil and (unreviewed == nil or unreviewed.number ~= number) then return end
  local find = core.buffer_finder(true)
  for path, data in pairs(befores) do
    local buf = find(path)
    if buf then
      local before = to_lines(data, buf)
      if reload.changed_on_disk(buf) then
        api.nvim_create_autocmd('FileChangedShellPost', { buffer = buf, once = true,
          group = GROUP, callback = core.guard(function() sign(buf, before) end) })
      else
        sign(buf, before)
      end
    end
  end
end

--- How many files Claude's latest turn changed that were not reviewed (status()).
---@return integer
function M.to_review() return unreviewed and unreviewed.files or 0 end

-- The review on screen ------------------------------------------------------------------------

local function tell(msg, level) core.tell(msg, level or 'INFO') end

-- The review on screen is over (its tab closed, or another review replaces it: `close_tab`).
local function close_view(close_tab)
  local v = view
  view = nil
  if v == nil then return end
  if close_tab and api.nvim_tabpage_is_valid(v.tab) and #api.nvim_list_tabpages() > 1 then
    pcall(vim.cmd, 'tabclose! ' .. api.nvim_tabpage_get_number(v.tab))
  end
  pcall(api.nvim_del_augroup_by_id, v.group)
  for _, file in ipairs(v.files) do
    if file.buf and api.nvim_buf_is_valid(file.buf) then
      api.nvim_buf_clear_namespace(file.buf, diffs.INLINE, 0, -1)
    end
  end
  if v.scratch and api.nvim_buf_is_valid(v.scratch) then
    pcall(api.nvim_buf_delete, v.scratch, { force = true })
  end
  if api.nvim_win_is_valid(v.main) then
    pcall(api.nvim_win_call, v.main, function() vim.cmd('diffoff') end)
  end
end

local function escape(s) return (s:gsub('%%', '%%%%')) end

-- Show file `i` of the review in its tab, in the layout of opts.diff.layout.
local function present(i)
  local v = view
  local file = v.files[i]
  v.index = i
  local buf = core.find_buffer({ file.path })
  local loaded, why = core.load(file.path, buf, false)
  if loaded == nil then return tell(why, 'WARN') end
  vim.bo[loaded].buflisted = true
  file = prepare(file.change, loaded)
  v.files[i] = file
  v.presenting = true
  if api.nvim_win_get_buf(v.main) ~= loaded then api.nvim_win_set_buf(v.main, loaded) end
  v.presenting = false
  local layout = diffs.options().layout
  local added, removed = 0, 0
  for _, h in ipairs(file.hunks) do added, removed = added + h.count, removed + h.old_count end
  vim.wo[v.main].winbar = escape(('Claude\'s turn %d (%s) · file %d of %d · +%d −%d · %d hunk%s'
    .. ' · :ClaudeNvimRevert takes one back, ! the file'):format(v.number, v.label, i, #v.files,
    added, removed, #file.hunks, #file.hunks == 1 and '' or 's')) .. ' %<'
  if layout == 'inline' then
    diffs.inline(loaded, file.before, diffs.hunks(file.before, file.now))
    return
  end
  if v.scratch == nil or not api.nvim_buf_is_valid(v.scratch) then
    v.scratch = api.nvim_create_buf(false, true)
    vim.bo[v.scratch].bufhidden = 'wipe'
  end
  local scratch = v.scratch
  vim.bo[scratch].modifiable = true
  api.nvim_buf_set_lines(scratch, 0, -1, false, file.before)
  vim.bo[scratch].modifiable = false
  vim.b[scratch].claude_nvim_review_before = { path = file.path, number = v.number }
  pcall(api.nvim_buf_set_name, scratch, ('%s (before Claude\'s turn %d)'):format(
    vim.fs.basename(file.path), v.number))
  vim.bo[scratch].filetype = vim.bo[loaded].filetype
  if v.side == nil or not api.nvim_win_is_valid(v.side) then
    v.side = api.nvim_open_win(scratch, false, { split = layout == 'horizontal' and 'above'
                                                  or 'left', win = v.main })
    if vim.fn.exists('+winfixbuf') == 1 then vim.wo[v.side].winfixbuf = true end
  elseif api.nvim_win_get_buf(v.side) ~= scratch then
    api.nvim_win_set_buf(v.side, scratch)
  end
  vim.wo[v.side].winbar = escape(('before Claude\'s turn %d%s'):format(v.number,
    file.created and ' (the file did not exist)' or '')) .. ' %<'
  for _, win in ipairs({ v.side, v.main }) do
    api.nvim_win_call(win, function() vim.cmd('diffthis') end)
  end
end

-- Show turn `turn` (from the server: number, label, prompt, changes = { path, before, after },
-- too_big): its files in a tab, its hunks in the quickfix list.
---@param turn table
function M.show(turn)
  close_view(true)
  local items, files, find = {}, {}, core.buffer_finder(true)
  for _, change in ipairs(turn.changes) do
    local buf = find(change.path)
    local file = prepare(change, buf)
    files[#files + 1] = file
    for _, h in ipairs(file.hunks) do
      items[#items + 1] = { filename = file.path, lnum = math.max(h.start, 1),
                            text = hunk_text(file, h) }
    end
    if buf then unsign(buf) end
  end
  if unreviewed and unreviewed.number <= turn.number then unreviewed = nil end
  pcall(vim.cmd, 'redrawstatus!')
  local title = ('Claude\'s turn %d (%s)%s'):format(turn.number, turn.label,
    turn.prompt ~= '' and (': ' .. turn.prompt:gsub('%s+', ' ')) or '')
  vim.fn.setqflist({}, ' ', { title = title, items = items })
  if #turn.too_big > 0 then
    tell(('%d file(s) of turn %d not kept (over the size limit): %s'):format(#turn.too_big,
      turn.number, table.concat(vim.tbl_map(function(p) return vim.fn.fnamemodify(p, ':~:.') end,
      turn.too_big), ', ')), 'WARN')
  end
  if (turn.dropped or 0) > 0 then
    tell(('turn %d changed %d more file(s), not kept (a turn keeps %d)'):format(turn.number,
      turn.dropped, turn.max_files), 'WARN')
  end
  if #files == 0 then return tell(('turn %d changed no file it could keep'):format(turn.number)) end
  vim.cmd('tab split')
  local main = api.nvim_get_current_win()
  if vim.fn.exists('+winfixbuf') == 1 then vim.wo[main].winfixbuf = false end
  local group = api.nvim_create_augroup(GROUP .. '_view', { clear = true })
  view = { number = turn.number, label = turn.label, files = files, main = main,
           tab = api.nvim_get_current_tabpage(), group = group }
  -- Moving through the quickfix list (or :edit) to another of its files shows that one.
  api.nvim_create_autocmd('BufWinEnter', { group = group, callback = core.guard(function(ev)
    local v = view
    if v == nil or v.presenting or api.nvim_get_current_win() ~= v.main then return end
    local find_buf = core.buffer_finder()
    for i, file in ipairs(v.files) do
      if find_buf(file.path) == ev.buf then return present(i) end
    end
  end) })
  api.nvim_create_autocmd({ 'TextChanged', 'InsertLeave' }, { group = group,
    callback = core.guard(function(ev)
      local v = view
      if v == nil or diffs.options().layout ~= 'inline' then return end
      local file = v.index and v.files[v.index]
      if file and file.buf == ev.buf then
        diffs.inline(ev.buf, file.before, diffs.hunks(file.before,
          api.nvim_buf_get_lines(ev.buf, 0, -1, false)))
      end
    end) })
  -- After TabClosed: while it runs, the closed tab and its windows still look valid.
  api.nvim_create_autocmd('TabClosed', { group = group, callback = function()
    vim.schedule(core.guard(function()
      if view and not api.nvim_tabpage_is_valid(view.tab) then close_view() end
    end))
  end })
  present(1)
  local first = files[1].hunks[1]
  if first then pcall(api.nvim_win_set_cursor, main, { math.max(first.start, 1), 0 }) end
end

-- No turn `number` (nil: none at all) to review.
---@param number integer|vim.NIL|nil
function M.none(number)
  if number == nil or number == vim.NIL then
    return tell('nothing to review: no change of Claude\'s was recorded yet')
  end
  tell(('no turn %d to review (:ClaudeNvimReview list shows them)'):format(number), 'WARN')
end

-- Pick a turn to review among `summaries` (the latest first).
---@param summaries { number: integer, label: string, files: integer }[]
function M.pick(summaries)
  if #summaries == 0 then return M.none(nil) end
  vim.ui.select(summaries, { prompt = 'Review which turn of Claude?',
    format_item = function(t)
      return ('%d  %s · %d file%s%s%s'):format(t.number, t.label, t.files,
        t.files == 1 and '' or 's', t.open and ' · working' or '',
        t.prompt ~= '' and ('  ' .. t.prompt:gsub('%s+', ' ')) or '')
    end }, function(choice)
      if choice then core.notify(REQUEST, 'show', choice.number) end
    end)
end

-- Reverting -------------------------------------------------------------------------------

-- Write `buf` (it was unmodified before the revert): the file on disk is what it shows, its
-- last line ended by a newline if `eol` ('fixeol' would add one the file may never have had).
local function write(buf, eol)
  local bo = vim.bo[buf]
  local fixeol = bo.fixeol
  bo.eol, bo.fixeol = eol, false
  local ok, err = pcall(api.nvim_buf_call, buf, function() vim.cmd('silent keepalt write!') end)
  bo.fixeol = fixeol
  if not ok then tell(('could not write %s: %s'):format(api.nvim_buf_get_name(buf),
    tostring(err):gsub('^Vim:', '')), 'ERROR') end
  return ok
end

-- Why the whole of `change`'s file may not be taken back or deleted, if it may not: for a
-- Claude on another host (`change.check`, a path map), the file here must still be the one
-- its write left, byte for byte (or still absent, if it deleted it); anything else is not
-- the file Claude's turn recorded. A hunk is taken back only where its lines are still
-- Claude's (stale hunks are refused), so hunks need no such check.
local function not_as_left(change, name, whose)
  if not change.check then return nil end
  local after = nil_if_none(change.after)
  local data = core.read_file(change.path)
  if (data ~= nil and data == after) or (after == nil and uv.fs_lstat(change.path) == nil) then
    return nil
  end
  return ('%s is not as %s left it (it changed since, or is another file): not taken back, '
    .. 'nothing written or deleted'):format(name, whose)
end

-- Take back, in `change` (path, before, after, number, label: from the server), the hunks on
-- `how`'s lines (line1, line2; side 'before': lines of the text before), or the whole file
-- (bang): in its buffer, written to disk unless the buffer has unsaved changes.
---@param path string
---@param change table|vim.NIL
---@param how { line1: integer, line2: integer, bang: boolean, side: 'before'|'now' }
function M.revert(path, change, how)
  change = nil_if_none(change)
  local name = vim.fn.fnamemodify(path, ':~:.')
  if change == nil then
    return tell(('no change of Claude\'s recorded in %s'):format(name), 'WARN')
  end
  local whose = ('Claude\'s turn %d'):format(change.number)
  local refused = how.bang and not_as_left(change, name, whose)
  if refused then return tell(refused, 'WARN') end
  local buf = core.find_buffer({ path })
  if buf and api.nvim_buf_is_loaded(buf) then reload.refresh(buf) end
  if nil_if_none(change.before) == nil then
    -- Claude made the file: before the turn there was none.
    if not how.bang then
      return tell(('%s made %s: :ClaudeNvimRevert! deletes it'):format(whose, name), 'WARN')
    end
    local ok, err = os.remove(change.path)
    if not ok then return tell(('could not delete %s: %s'):format(name, err), 'ERROR') end
    return tell(('deleted %s, which %s made (its buffer, if any, keeps the text: :w writes it '
      .. 'again)'):format(name, whose))
  end
  local loaded, why = core.load(path, buf, false)
  if loaded == nil then return tell(why, 'WARN') end
  local file = prepare(change, loaded)
  local unsaved = vim.bo[loaded].modified
  local edits = {}  -- { start row, end row, lines }, bottom first
  if how.bang then
    for _, h in ipairs(diffs.hunks(file.now, file.before)) do
      local first = h[2] > 0 and h[1] - 1 or h[1]
      table.insert(edits, 1, { first, first + h[2], slice(file.before, h[3], h[4]) })
    end
  else
    local line1, line2 = how.line1 or 1, how.line2 or how.line1 or 1
    local stale = 0
    for _, h in ipairs(file.hunks) do
      local lo, hi
      if how.side == 'before' then
        lo, hi = h.old, h.old + math.max(h.old_count, 1) - 1
        if h.old_count == 0 then lo, hi = h.old, h.old + 1 end
      else
        lo, hi = h.start, h.start + math.max(h.count, 1) - 1
        if h.count == 0 then lo, hi = h.start, h.start + 1 end
      end
      if lo <= line2 and line1 <= hi then
        if h.stale then
          stale = stale + 1
        else
          local first = h.count > 0 and h.start - 1 or h.start
          table.insert(edits, 1, { first, first + h.count, slice(file.before, h.old,
                                                                    h.old_count) })
        end
      end
    end
    if #edits == 0 then
      return tell(stale > 0 and ('those lines of %s changed since %s: take them back by hand, '
        .. 'or the whole file with :ClaudeNvimRevert!'):format(name, whose)
        or ('no change of %s on %s'):format(whose, line1 == line2 and ('line ' .. line1)
          or ('lines ' .. line1 .. '-' .. line2)), 'WARN')
    end
  end
  if #edits == 0 then return tell(('%s is as it was before %s'):format(name, whose)) end
  table.sort(edits, function(a, b) return a[1] > b[1] end)
  for _, edit in ipairs(edits) do
    api.nvim_buf_set_lines(loaded, edit[1], edit[2], false, edit[3])
  end
  unsign(loaded)
  local what = how.bang and ('%s as before %s'):format(name, whose)
    or ('%d change%s of %s in %s'):format(#edits, #edits == 1 and '' or 's', whose, name)
  if unsaved then
    return tell(('took back %s in the buffer, not written: it has unsaved changes (:w writes '
      .. 'it, u undoes)'):format(what), 'WARN')
  end
  -- The file's end as it is now, or as before the turn once the whole file is back.
  local eol = vim.bo[loaded].eol
  if buffer_text(loaded) == file.texts.before then
    local before = change.before
    eol = before == '' or before:sub(-1) == '\n' or before:sub(-1) == '\r'
  end
  if write(loaded, eol) then tell(('took back %s (u undoes it)'):format(what)) end
end

-- The commands ------------------------------------------------------------------------------

--- :ClaudeNvimReview [N | list]
---@param arg string?
function M.review_command(arg)
  arg = arg and vim.trim(arg) or ''
  if arg == 'list' then return core.notify(REQUEST, 'list') end
  if arg ~= '' and not tonumber(arg) then
    return tell('usage: :ClaudeNvimReview [N | list]', 'WARN')
  end
  core.notify(REQUEST, 'show', tonumber(arg))
end

--- :[range]ClaudeNvimRevert[!]: in the review (either side) or in a file's own buffer.
---@param o { line1: integer, line2: integer, bang: boolean }
function M.revert_command(o)
  local buf = api.nvim_get_current_buf()
  local before = vim.b[buf].claude_nvim_review_before
  local path, number, side
  if type(before) == 'table' then
    path, number, side = before.path, before.number, 'before'
  else
    path = api.nvim_buf_get_name(buf)
    if path == '' or vim.bo[buf].buftype ~= '' then
      return tell('not a file buffer: nothing to take back', 'WARN')
    end
    if view and api.nvim_get_current_tabpage() == view.tab then number = view.number end
  end
  core.notify(REQUEST, 'revert', path, number or vim.NIL,
              { line1 = o.line1, line2 = o.line2, bang = o.bang, side = side or 'now' })
end

--- Start recording and showing turns: `opts` from ReviewFeature.
---@param opts { before: string, request: string }
function M.setup(opts)
  BEFORE, REQUEST = opts.before, opts.request
  reported, unreviewed, signed = {}, nil, {}
  api.nvim_create_augroup(GROUP, { clear = true })
  for name, link in pairs({ ClaudeNvimSignAdd = 'Added', ClaudeNvimSignChange = 'Changed',
                            ClaudeNvimSignDelete = 'Removed' }) do
    api.nvim_set_hl(0, name, { link = link, default = true })
  end
  reload.before_reload = before_reload
end

--- Stop: the review closed, the signs gone.
function M.stop()
  close_view(true)
  if reload.before_reload == before_reload then reload.before_reload = nil end
  pcall(api.nvim_del_augroup_by_name, GROUP)
  for buf in pairs(signed) do unsign(buf) end
  unreviewed = nil
end

return M
