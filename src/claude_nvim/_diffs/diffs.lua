-- claude_nvim.diffs: diff review's Neovim half. Each diff the server opens is a tab (the target
-- file | an editable proposal, or the proposal alone with the old lines shown in it: the
-- layout, opts.diff.layout); the user's verdict (:w or :ClaudeNvimDiffAccept accepts, closing
-- the proposal or :ClaudeNvimDiffDeny rejects) goes to the server exactly once. Hunk by hunk,
-- the user may accept one (:ClaudeNvimHunkAccept) or reject it (:ClaudeNvimHunkReject: the old
-- text goes back in the proposal); the window bar counts what is left.
-- Lifecycle: setup(opts) / stop(); opts (from DiffsFeature, beside it): event.
local api = vim.api
local uv = vim.uv or vim.loop
local core = require('claude_nvim.core')
---@alias claude_nvim.Hunk integer[] { old_start, old_count, new_start, new_count }, 1-based
local M = {}
local EVENT  -- set by M.setup, from DiffsFeature
local diffs = {}  -- id -> {tab, target, proposal, scratch, group, tick, resolved, path, ...}

-- A User autocmd for the user's hooks (ClaudeNvimDiffOpened, ...); their errors are theirs.
local function announce(pattern, data)
  pcall(api.nvim_exec_autocmds, 'User', { pattern = pattern, data = data, modeline = false })
end

-- How to show a diff: vim.g.claude_nvim_opts.diff (the Neovim plugin's opts.diff, or the user's).
local LAYOUTS = { vertical = true, horizontal = true, inline = true }
local function options()
  local opts = vim.g.claude_nvim_opts
  local diff = type(opts) == 'table' and type(opts.diff) == 'table' and opts.diff or {}
  return { open_in = diff.open_in == 'current' and 'current' or 'tab',
           keep_focus = diff.keep_focus == true,
           layout = LAYOUTS[diff.layout] and diff.layout or 'vertical' }
end
M.options = options

-- The presentation the review of Claude's turns shares with the diffs: hunks and inline marks.

-- The hunks between two texts (each line ended by "\n"), as vim.diff's indices: { old_start,
-- old_count, new_start, new_count }, 1-based; a start with a count of 0 is the line after which.
local INDICES = { result_type = 'indices', algorithm = 'histogram' }
---@param old string
---@param new string
---@return claude_nvim.Hunk[]
function M.text_hunks(old, new) return vim.diff(old, new, INDICES) --[[@as claude_nvim.Hunk[] ]] end

-- For marks only (which rows changed, not hunks to read): xdiff's histogram costs lines times
-- hunks (a 35,000-line file with every other line changed: 18 s), Myers stays near linear
-- (17 ms; 72 ms for the same lines shuffled).
local FAST = { result_type = 'indices', algorithm = 'myers' }

--- The same between two lists of lines. The lines both start and end with are set aside first
--- (Lua compares equal strings at once): a 100,000-line file with a few changes is diffed in a
--- few milliseconds, not joined into texts of megabytes. `fast`: hunks only to mark rows with,
--- not to read, in bounded time whatever changed.
---@param old string[]
---@param new string[]
---@param fast boolean?
---@return claude_nvim.Hunk[]
function M.hunks(old, new, fast)
  local n, m, head, tail = #old, #new, 0, 0
  while head < n and head < m and old[head + 1] == new[head + 1] do head = head + 1 end
  while tail < n - head and tail < m - head and old[n - tail] == new[m - tail] do
    tail = tail + 1
  end
  local function text(lines, last)
    return last > head and table.concat(lines, '\n', head + 1, last) .. '\n' or ''
  end
  local hunks = vim.diff(text(old, n - tail), text(new, m - tail), fast and FAST or INDICES)
  ---@cast hunks claude_nvim.Hunk[]
  for _, h in ipairs(hunks) do h[1], h[3] = h[1] + head, h[3] + head end
  return hunks
end

--- Lines added and removed by `hunks`.
---@param hunks claude_nvim.Hunk[]
---@return integer added
---@return integer removed
function M.counts(hunks)
  local added, removed = 0, 0
  for _, h in ipairs(hunks) do added, removed = added + h[4], removed + h[2] end
  return added, removed
end

local INLINE = api.nvim_create_namespace('claude_nvim_inline')
M.INLINE = INLINE

--- Show in `buf` what `hunks` (from `old` to the buffer's lines) changed, in one buffer: the
--- removed lines as virtual lines above where they were, the added ones highlighted.
---@param buf integer
---@param old string[]
---@param hunks claude_nvim.Hunk[]
function M.inline(buf, old, hunks)
  api.nvim_buf_clear_namespace(buf, INLINE, 0, -1)
  local count = api.nvim_buf_line_count(buf)
  for _, h in ipairs(hunks) do
    local virt = {}
    for i = h[1], h[1] + h[2] - 1 do virt[#virt + 1] = { { old[i] or '', 'DiffDelete' } } end
    if #virt > 0 then  -- above the lines put in their place, else below the line before
      local row, above = h[3] - 1, true
      if h[4] == 0 then row, above = math.max(h[3] - 1, 0), h[3] == 0 end
      api.nvim_buf_set_extmark(buf, INLINE, math.min(row, count - 1), 0,
                               { virt_lines = virt, virt_lines_above = above })
    end
    for r = h[3], h[3] + h[4] - 1 do
      api.nvim_buf_set_extmark(buf, INLINE, r - 1, 0, { line_hl_group = 'DiffAdd',
                                                          priority = 50 })
    end
  end
end

-- A window not pinned to its buffer ('winfixbuf': a Claude window is, and a split copies it).
local function unpin(win)
  if vim.fn.exists('+winfixbuf') == 1 then vim.wo[win].winfixbuf = false end
  return win
end

-- A window of the current tab to show the target in: the user's editor window
-- (core.editor_window) if it is in this tab, else the first that shows a file, else a new
-- split left of the current one (the Claude terminal).
local function editor_window()
  local tab = api.nvim_get_current_tabpage()
  local user = core.editor_window()
  if user and api.nvim_win_get_tabpage(user) == tab then return user end
  for _, win in ipairs(api.nvim_tabpage_list_wins(tab)) do
    if core.is_editor(win) then return win end
  end
  vim.cmd('aboveleft vsplit')
  return unpin(api.nvim_get_current_win())
end

local function resolve(id, status)
  local d = diffs[id]
  if d == nil or d.resolved then return end
  d.resolved = true
  local result = vim.NIL ---@type { edited: boolean, lines: string[]? }|vim.NIL
  if status == 'accepted' then
    local prop = d.proposal
    local edited = api.nvim_buf_get_changedtick(prop) ~= d.tick
    result = { edited = edited,
               lines = edited and api.nvim_buf_get_lines(prop, 0, -1, false) or nil }
    -- The proposal stays on screen, read-only, until the CLI's close_tab.
    vim.bo[prop].modified = false
    vim.bo[prop].modifiable = false
    -- The file becomes the proposal (claude writes it): the buffer's unsaved changes, which the
    -- user saw against it, make way (undo brings them back), so that the buffer follows.
    if d.unsaved and api.nvim_buf_is_valid(d.target) then vim.bo[d.target].modified = false end
  end
  core.notify(EVENT, id, status, result)
end

-- The diff shown in the current tab (or whose proposal is the current buffer), if any.
local function current_id()
  local tab, buf = api.nvim_get_current_tabpage(), api.nvim_get_current_buf()
  for id, d in pairs(diffs) do
    if not d.resolved and (d.tab == tab or d.proposal == buf) then return id end
  end
  return nil
end

-- The user's verdict on the diff shown here (:ClaudeNvimDiffAccept, :ClaudeNvimDiffDeny).
local function verdict(status)
  local id = current_id()
  if id == nil then return core.tell('no pending diff here', 'WARN') end
  resolve(id, status)
end

--- :ClaudeNvimDiffAccept: accept the diff shown here.
function M.accept_current() verdict('accepted') end
--- :ClaudeNvimDiffDeny: reject it.
function M.deny_current() verdict('rejected') end

-- Hunks of a diff: its old lines are what the user sees of the file (the buffer's text, unsaved
-- changes included); nothing for a new file.
local function old_lines(d)
  if d.scratch or not api.nvim_buf_is_valid(d.target) then return {} end
  return api.nvim_buf_get_lines(d.target, 0, -1, false)
end

local function hunk_key(old, new, h)
  return table.concat(vim.list_slice(old, h[1], h[1] + h[2] - 1), '\n') .. '\0'
    .. table.concat(vim.list_slice(new, h[3], h[3] + h[4] - 1), '\n')
end

local function escape(s) return (s:gsub('%%', '%%%%')) end

-- Count what is left to decide in diff `d` (`new`: the proposal's lines, if at hand): its
-- hunks not accepted, and the lines they add and remove. Inline, the marks too.
local function tally(d, new)
  if d.resolved or not api.nvim_buf_is_valid(d.proposal) then return end
  local old = old_lines(d)
  new = new or api.nvim_buf_get_lines(d.proposal, 0, -1, false)
  local hunks = M.hunks(old, new)
  d.total = math.max(d.total or 0, #hunks)
  local left, added, removed = 0, 0, 0
  for _, h in ipairs(hunks) do
    if not d.accepted[hunk_key(old, new, h)] then
      left, added, removed = left + 1, added + h[4], removed + h[2]
    end
  end
  d.counts = ('+%d −%d · %d of %d hunk%s'):format(added, removed, left, d.total,
                                                  d.total == 1 and '' or 's')
  if d.layout == 'inline' then M.inline(d.proposal, old, hunks) end
end

-- The proposal's window bar: how to answer, whose proposal for which file, and what is left to
-- decide (`+12 −3 · 2 of 4 hunks`), fitted to the window (a narrow one names the Claude
-- shortly, then cuts the file's name, never the keys or the counts).
local function bar(d)
  if d.resolved or not api.nvim_win_is_valid(d.right) then return end
  local keys, file = ':w accepts · :q rejects · ', (d.unsaved and 'unsaved ' or '') .. d.name
    .. (d.scratch and ' (new file)' or '')
  local tail = file .. ' · ' .. (d.counts or '')
  local long = d.whose .. ' for '
  local text = escape(keys .. long) .. '%<' .. escape(tail)
  if vim.fn.strdisplaywidth(keys .. long .. tail) > api.nvim_win_get_width(d.right) then
    text = escape(keys .. (d.by and (d.by .. ': ') or '')) .. '%<' .. escape(tail)
  end
  vim.wo[d.right].winbar = text
end

local function refresh(d, new)
  tally(d, new)
  bar(d)
end

-- Count again once the user paused editing the proposal (a count reads both texts whole).
local RECOUNT_MS = 150
local function recount_soon(id)
  local d = diffs[id]
  if d == nil then return end
  d.timer = d.timer or uv.new_timer()
  d.timer:stop()
  d.timer:start(RECOUNT_MS, 0, vim.schedule_wrap(core.guard(function()
    if diffs[id] == d then refresh(d) end
  end)))
end

-- The pending diff shown in the current window: its id, record, and which side the cursor is
-- on ('old': the file, 'new': the proposal).
local function diff_here()
  local win, buf = api.nvim_get_current_win(), api.nvim_get_current_buf()
  for id, d in pairs(diffs) do
    if not d.resolved then
      if buf == d.proposal then return id, d, 'new' end
      if buf == d.target and win == d.left then return id, d, 'old' end
    end
  end
  return nil
end

--- Accept (keep) or reject (the old text back in the proposal) the hunks on lines
--- `line1`..`line2` of the current window, in the pending diff shown there.
---@param action 'accept'|'reject'
---@param line1 integer
---@param line2 integer
function M.hunk(action, line1, line2)
  local _, d, side = diff_here()
  if d == nil then return core.tell('no pending diff here', 'WARN') end
  local old, new = old_lines(d), api.nvim_buf_get_lines(d.proposal, 0, -1, false)
  local picked = {}
  for _, h in ipairs(M.hunks(old, new)) do
    local start, count = h[3], h[4]
    if side == 'old' then start, count = h[1], h[2] end
    local lo, hi = start, start + count - 1
    if count == 0 then lo, hi = start, start + 1 end
    if lo <= line2 and line1 <= hi then picked[#picked + 1] = h end
  end
  if #picked == 0 then
    return core.tell(('no change of Claude\'s on %s'):format(line1 == line2 and ('line ' .. line1)
      or ('lines ' .. line1 .. '-' .. line2)), 'WARN')
  end
  if action == 'accept' then
    for _, h in ipairs(picked) do d.accepted[hunk_key(old, new, h)] = true end
  else
    for i = #picked, 1, -1 do
      local h = picked[i]
      local first = h[4] > 0 and h[3] - 1 or h[3]
      api.nvim_buf_set_lines(d.proposal, first, first + h[4], false,
                             vim.list_slice(old, h[1], h[1] + h[2] - 1))
    end
  end
  refresh(d)
end

--- To the next (`step` 1) or previous (-1) hunk of the proposal shown here (]c and [c inline;
--- in diff mode Neovim's own do it).
---@param step 1|-1
function M.jump(step)
  local _, d = diff_here()
  if d == nil then return end
  local row = api.nvim_win_get_cursor(0)[1]
  local starts = {}
  for _, h in ipairs(M.hunks(old_lines(d), api.nvim_buf_get_lines(d.proposal, 0, -1, false))) do
    starts[#starts + 1] = math.max(h[4] > 0 and h[3] or h[3] + 1, 1)
  end
  if step < 0 then starts = vim.fn.reverse(starts) end
  for _, start in ipairs(starts) do
    if (step > 0 and start > row) or (step < 0 and start < row) then
      return api.nvim_win_set_cursor(0, { math.min(start, api.nvim_buf_line_count(0)), 0 })
    end
  end
end

-- Name `buf` `name` (a tab label shows it), or `name` with the diff's id where another
-- buffer has that name (two diffs of one file name).
local function name_buffer(buf, name, id)
  if not pcall(api.nvim_buf_set_name, buf, name) then
    api.nvim_buf_set_name(buf, (name:gsub('%)$', ' ' .. id .. ')')))
  end
end

--- Open diff `id`: a new tab with the target file (an empty scratch buffer for a new file)
--- beside an editable proposal buffer that no :w can write to disk.
---@param id integer
---@param candidates string[]
---@param lines string[] the proposal
---@param tab_name string
---@param by? string the Claude's label
---@param by_terminal? integer its terminal buffer
---@return string|vim.NIL refusal why it could not open (vim.NIL: it opened)
function M.open(id, candidates, lines, tab_name, by, by_terminal)
  -- The first candidate that exists on disk (it is an edit), else the first (a new file).
  local found = core.existing(candidates)
  local path, exists = found or core.absolute(candidates[1]), found ~= nil
  local target = core.find_buffer({ path })
  -- Unsaved changes: the diff is against them, what the user sees (its window bar says so).
  local unsaved = target ~= nil and vim.bo[target].modified
  local scratch = nil
  if not exists then
    scratch = api.nvim_create_buf(false, true)
    name_buffer(scratch, vim.fs.basename(path) .. ' (new file)', id)
    vim.bo[scratch].modifiable = false
    target = scratch
  else
    local refusal  -- a new buffer is ours only for the review: it leaves no swap file behind
    target, refusal = core.load(path, target, true)
    if target == nil then return 'Cannot open diff: ' .. refusal end
  end
  vim.bo[target].buflisted = target ~= scratch

  local prop = api.nvim_create_buf(false, true)
  name_buffer(prop, vim.fs.basename(path) .. " (Claude's proposal)", id)
  vim.bo[prop].buftype = 'acwrite'
  vim.bo[prop].bufhidden = 'wipe'
  vim.bo[prop].swapfile = false
  api.nvim_buf_set_lines(prop, 0, -1, false, lines)
  vim.bo[prop].modified = false
  vim.b[prop].claude_nvim_proposal = id
  local ft = vim.filetype.match({ filename = path, buf = prop })
  if ft then vim.bo[prop].filetype = ft end

  local how, from_win, mode = options(), api.nvim_get_current_win(), api.nvim_get_mode().mode
  local left, shown
  if how.open_in == 'current' then
    left = editor_window()
    shown = api.nvim_win_get_buf(left)  -- back in the window when the diff closes
  else
    vim.cmd('tab split')
    left = unpin(api.nvim_get_current_win())
  end
  local right
  if how.layout == 'inline' then  -- the proposal alone, the old lines shown in it
    api.nvim_win_set_buf(left, prop)
    api.nvim_set_current_win(left)
    right = left
    for _, key in ipairs({ ']c', '[c' }) do
      vim.keymap.set('n', key, function() M.jump(key == ']c' and 1 or -1) end,
                     { buffer = prop, desc = 'claude-nvim: to the next / previous hunk' })
    end
  else
    api.nvim_win_set_buf(left, target)
    right = api.nvim_open_win(prop, true, { split = how.layout == 'horizontal' and 'below'
                                            or 'right', win = left })
    for _, win in ipairs({ left, right }) do
      api.nvim_win_call(win, function() vim.cmd('diffthis') end)
    end
  end
  -- `by`: which Claude proposed it, named when several share this Neovim.
  local server = vim.g.claude_nvim_server
  local several = type(server) == 'table' and (tonumber(server.clients) or 0) > 1
  -- The label the Neovim plugin keeps on its terminal, `by_terminal`, is its name now.
  if type(by_terminal) == 'number' and api.nvim_buf_is_valid(by_terminal) then
    by = vim.b[by_terminal].claude_nvim_label or by
  end
  by = several and type(by) == 'string' and by or nil
  local tab = api.nvim_get_current_tabpage()
  api.nvim_tabpage_set_var(tab, 'claude_nvim_tab_name', tab_name)

  local group = api.nvim_create_augroup('claude_nvim_diff_' .. id, { clear = true })
  diffs[id] = { tab = tab, target = target, proposal = prop, scratch = scratch, group = group,
                tick = api.nvim_buf_get_changedtick(prop), resolved = false, path = path,
                in_tab = how.open_in == 'tab', left = left, right = right, shown = shown,
                unsaved = unsaved, from = not how.keep_focus and { win = from_win, mode = mode }
                  or nil, layout = how.layout, accepted = {}, by = by,
                name = vim.fn.fnamemodify(path, ':~:.'),
                whose = by and ('proposal of ' .. by) or "Claude's proposal" }
  refresh(diffs[id], lines)
  -- The window bar and the inline marks follow the proposal's text and the window's width.
  api.nvim_create_autocmd({ 'TextChanged', 'InsertLeave' }, { group = group, buffer = prop,
    callback = function() recount_soon(id) end })
  api.nvim_create_autocmd({ 'WinResized', 'VimResized' }, { group = group,
    callback = core.guard(function() if diffs[id] then bar(diffs[id]) end end) })
  api.nvim_create_autocmd('BufWriteCmd', { group = group, buffer = prop,
    callback = core.guard(function() resolve(id, 'accepted') end) })
  api.nvim_create_autocmd({ 'BufWipeout', 'BufUnload', 'BufDelete' }, { group = group,
    buffer = prop, callback = core.guard(function() resolve(id, 'rejected') end) })
  if how.keep_focus and api.nvim_win_is_valid(from_win) then
    api.nvim_set_current_win(from_win)
    if mode == 't' then vim.cmd('startinsert') end
  end
  announce('ClaudeNvimDiffOpened', { id = id, path = path, tab_name = tab_name, buf = prop })
  return vim.NIL
end

--- How many diffs wait for the user's verdict.
---@return integer
function M.pending()
  local count = 0
  for _, d in pairs(diffs) do if not d.resolved then count = count + 1 end end
  return count
end

-- Whether the user is in diff `d` (or was, when its tab went): the cursor then goes back.
local function user_in(d)
  local here = api.nvim_get_current_win()
  if d.in_tab then
    return not api.nvim_tabpage_is_valid(d.tab) or api.nvim_get_current_tabpage() == d.tab
  end
  return here == d.left or here == d.right or (d.from ~= nil and here == d.from.win)
end

-- Back where the user was when the diff opened: Terminal mode in a terminal (Claude's).
local function go_back(from)
  if not (from and api.nvim_win_is_valid(from.win)) then return end
  api.nvim_set_current_win(from.win)
  if from.mode == 't' and vim.bo[api.nvim_win_get_buf(from.win)].buftype == 'terminal' then
    vim.cmd('startinsert')
  end
end

--- Close diff `id`'s tab and buffers; idempotent. The target follows what the CLI writes to it
--- as any buffer follows its file (bufsync).
---@param id integer
---@return boolean closed false when it was not open
function M.close(id)
  local d = diffs[id]
  if d == nil then return false end
  diffs[id] = nil
  d.resolved = true
  if d.timer then
    d.timer:stop()
    d.timer:close()
  end
  pcall(api.nvim_del_augroup_by_id, d.group)
  local back = user_in(d) and d.from or nil
  if not d.in_tab then
    -- A later diff may have taken the window over (it shows that diff's target now): leave
    -- it be, and hand it what this one would have put back.
    for _, other in pairs(diffs) do
      if other.left == d.left and other.shown == d.target then other.shown = d.shown end
    end
    if d.layout == 'inline' and api.nvim_win_is_valid(d.left)
        and api.nvim_win_get_buf(d.left) == d.proposal and d.shown
        and api.nvim_buf_is_valid(d.shown) then
      pcall(api.nvim_win_set_buf, d.left, d.shown)  -- what the window showed before
    elseif api.nvim_win_is_valid(d.left) and api.nvim_win_get_buf(d.left) == d.target then
      pcall(api.nvim_win_call, d.left, function() vim.cmd('diffoff') end)
      if d.shown and api.nvim_buf_is_valid(d.shown) and d.shown ~= d.target then
        pcall(api.nvim_win_set_buf, d.left, d.shown)
        for _, other in pairs(diffs) do  -- the earlier diff this one covered is back
          if other.left == d.left and other.target == d.shown then
            pcall(api.nvim_win_call, d.left, function() vim.cmd('diffthis') end)
          end
        end
      end
    end
  elseif api.nvim_tabpage_is_valid(d.tab) then
    if #api.nvim_list_tabpages() > 1 then
      pcall(vim.cmd, 'tabclose! ' .. api.nvim_tabpage_get_number(d.tab))
    else
      for _, win in ipairs(api.nvim_tabpage_list_wins(d.tab)) do
        pcall(api.nvim_win_call, win, function() vim.cmd('diffoff') end)
      end
    end
  end
  for _, buf in ipairs({ d.proposal, d.scratch }) do
    if buf and api.nvim_buf_is_valid(buf) then pcall(api.nvim_buf_delete, buf, { force = true }) end
  end
  go_back(back)
  announce('ClaudeNvimDiffClosed', { id = id, path = d.path })
  return true
end

--- `opts.event`: the name of the verdicts' notification.
---@param opts {event: string}
function M.setup(opts)
  EVENT = opts.event
end

--- Close every diff.
function M.stop()
  for id in pairs(diffs) do M.close(id) end
end

return M
