-- claude_nvim.diffs: diff review's Neovim half. Each diff the server opens is a tab (the target
-- file | an editable proposal); the user's verdict (:w or :ClaudeNvimDiffAccept accepts, closing
-- the proposal or :ClaudeNvimDiffDeny rejects) goes to the server exactly once.
-- Lifecycle: setup(opts) / stop(); opts (from DiffsFeature, beside it): event.
local api = vim.api
local core = require('claude_nvim.core')
local M = {}
local EVENT  -- set by M.setup, from DiffsFeature
local diffs = {}  -- id -> {tab, target, proposal, scratch, group, tick, resolved, path, ...}

-- A User autocmd for the user's hooks (ClaudeNvimDiffOpened, ...); their errors are theirs.
local function announce(pattern, data)
  pcall(api.nvim_exec_autocmds, 'User', { pattern = pattern, data = data, modeline = false })
end

-- How to show a diff: vim.g.claude_nvim_opts.diff (the Neovim plugin's opts.diff, or the user's).
local function options()
  local opts = vim.g.claude_nvim_opts
  local diff = type(opts) == 'table' and type(opts.diff) == 'table' and opts.diff or {}
  return { open_in = diff.open_in == 'current' and 'current' or 'tab',
           keep_focus = diff.keep_focus == true }
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
  local result = vim.NIL
  if status == 'accepted' then
    local prop = d.proposal
    local edited = api.nvim_buf_get_changedtick(prop) ~= d.tick
    result = { edited = edited }
    if edited then result.lines = api.nvim_buf_get_lines(prop, 0, -1, false) end
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

function M.accept_current() verdict('accepted') end
function M.deny_current() verdict('rejected') end

-- Name `buf` `name` (a tab label shows it), or `name` with the diff's id where another
-- buffer has that name (two diffs of one file name).
local function name_buffer(buf, name, id)
  if not pcall(api.nvim_buf_set_name, buf, name) then
    api.nvim_buf_set_name(buf, (name:gsub('%)$', ' ' .. id .. ')')))
  end
end

-- Open diff `id`: a new tab with the target file (an empty scratch buffer for a new file)
-- beside an editable proposal buffer that no :w can write to disk.
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
  api.nvim_win_set_buf(left, target)
  local right = api.nvim_open_win(prop, true, { split = 'right', win = left })
  -- How to answer and what this window is, where the user looks (% is the winbar's escape;
  -- a narrow window cuts the file's name, at %<, not the keys: the status line has it too).
  local name = vim.fn.fnamemodify(path, ':~:.'):gsub('%%', '%%%%')
  -- `by`: which Claude proposed it, named when several share this Neovim (by the label the
  -- Neovim plugin keeps on its terminal, `by_terminal`, when there is one: its name now).
  local server = vim.g.claude_nvim_server
  local several = type(server) == 'table' and (tonumber(server.clients) or 0) > 1
  if type(by_terminal) == 'number' and api.nvim_buf_is_valid(by_terminal) then
    by = vim.b[by_terminal].claude_nvim_label or by
  end
  local whose = several and type(by) == 'string' and ('proposal of ' .. by:gsub('%%', '%%%%'))
    or "Claude's proposal"
  vim.wo[right].winbar = ':w accepts · :q rejects · ' .. whose .. ' for '
    .. (unsaved and 'unsaved ' or '') .. '%<' .. name .. (exists and '' or ' (new file)')
  for _, win in ipairs({ left, right }) do
    api.nvim_win_call(win, function() vim.cmd('diffthis') end)
  end
  local tab = api.nvim_get_current_tabpage()
  api.nvim_tabpage_set_var(tab, 'claude_nvim_tab_name', tab_name)

  local group = api.nvim_create_augroup('claude_nvim_diff_' .. id, { clear = true })
  diffs[id] = { tab = tab, target = target, proposal = prop, scratch = scratch, group = group,
                tick = api.nvim_buf_get_changedtick(prop), resolved = false, path = path,
                in_tab = how.open_in == 'tab', left = left, right = right, shown = shown,
                unsaved = unsaved, from = not how.keep_focus and { win = from_win, mode = mode }
                  or nil }
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

-- How many diffs wait for the user's verdict.
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

-- Close diff `id`'s tab and buffers; idempotent. The target follows what the CLI writes to it
-- as any buffer follows its file (bufsync).
function M.close(id)
  local d = diffs[id]
  if d == nil then return false end
  diffs[id] = nil
  d.resolved = true
  pcall(api.nvim_del_augroup_by_id, d.group)
  local back = user_in(d) and d.from or nil
  if not d.in_tab then
    -- A later diff may have taken the window over (it shows that diff's target now): leave
    -- it be, and hand it what this one would have put back.
    for _, other in pairs(diffs) do
      if other.left == d.left and other.shown == d.target then other.shown = d.shown end
    end
    if api.nvim_win_is_valid(d.left) and api.nvim_win_get_buf(d.left) == d.target then
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

function M.setup(opts)
  EVENT = opts.event
end

function M.stop()
  for id in pairs(diffs) do M.close(id) end
end

return M
