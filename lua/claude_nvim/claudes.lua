-- What the user sees of the Claude terminals: their names, the Claude window's bar, the picker.
--
-- A Claude is named by its number and what it works on: the user's name for it
-- (:ClaudeNvimRename), else the title claude gives its terminal (OSC 0, `b:term_title`: a
-- status sign, ✳ idle or a spinner while working, then the /rename name or the topic of the
-- conversation). Its label, "Claude 2 · fix the parser", is its terminal's name (tab labels
-- read it) and `b:claude_nvim_label` (the server's messages and the diff bar read that).
local api = vim.api
local M = {}

local function terminal() return require('claude_nvim.terminal') end

local NAME_CELLS = 40
local DEFAULT_TITLE = 'Claude Code'  -- claude's title before a conversation has a topic

-- A name comes from at most this many bytes of a title (or of the user's name): 40 cells are at
-- most 160 bytes, and claude may set any title, of any length, every second it works.
local NAME_BYTES = 256

-- `s` cut to `width` cells, '…' included (also when `cut`: it was longer than `s`). ASCII by
-- the byte; else claude_nvim.tell's cut, on a string of about NAME_BYTES bytes at most.
local function fit(s, width, cut)
  if not s:find('[\128-\255]') then
    if #s <= width and not cut then return s end
    return s:sub(1, math.min(#s, width - 1)) .. '…'
  end
  return require('claude_nvim').fit(cut and s .. '…' or s, width)  -- a cut one always ends in …
end

-- `s`'s first NAME_BYTES bytes (no character cut in two: its last one goes), and whether more
-- followed.
local function prefix(s)
  if #s <= NAME_BYTES then return s, false end
  local last = NAME_BYTES
  while last > 0 and s:byte(last) >= 0x80 and s:byte(last) < 0xC0 do last = last - 1 end
  if last > 0 and s:byte(last) >= 0xC0 then last = last - 1 end  -- a character's first byte
  return s:sub(1, last), true
end

-- What claude's title says it works on, or nil: its title is a status sign (one non-ASCII
-- character), a space, the name. Anything else (the terminal's own title before claude sets
-- one) is not a name; nor is claude's default. Only the title's first NAME_BYTES bytes count.
---@param title any
---@return string|nil
function M.title_name(title)
  if type(title) ~= 'string' then return nil end
  local head, cut = prefix(title)
  local name = head:match('^[\194-\244][\128-\191]* (.+)$')
  name = name and vim.trim((name:gsub('%c', ' ')))
  if name == nil or name == '' or name == DEFAULT_TITLE then return nil end
  return fit(name, NAME_CELLS, cut)
end

-- The user's name for a Claude (:ClaudeNvimRename) as its label shows it: NAME_CELLS at most.
local function user_name(name)
  if type(name) ~= 'string' then return nil end
  local head, cut = prefix(name)
  return fit((head:gsub('%c', ' ')), NAME_CELLS, cut)
end

-- Buffer variable `name` of `buf` if it is set and not '': read every second for each Claude,
-- getbufvar() is the cheap way (vim.b costs up to 10 us a read, an unset one most).
local function var(buf, name)
  local value = vim.fn.getbufvar(buf, name)
  return value ~= '' and value or nil
end

-- Each Claude's last name from its title, by buffer: { key, name }; the key is what of a title
-- makes the name (not its status sign: claude turns that spinner every second).
local from_title = {}
local function title_key(title)
  local key, signs = title:sub(1, NAME_BYTES + 8):gsub('^[\194-\244][\128-\191]* ', '', 1)
  return signs .. key
end

-- The label of `claude` (a running one of claude_nvim.terminal): "Claude 2 · fix the parser".
---@param claude { buf: integer, n: integer }
---@return string
function M.label(claude)
  local buf = claude.buf
  if not api.nvim_buf_is_valid(buf) then return 'Claude ' .. claude.n end
  local name = user_name(var(buf, 'claude_nvim_name'))
  if not name then
    local title, known = var(buf, 'term_title'), from_title[buf]
    local key = title and title_key(title)
    if not (known and known.key == key) then
      known = { key = key, name = M.title_name(title) }
      from_title[buf] = known
    end
    name = known.name
  end
  return 'Claude ' .. claude.n .. (name and (' · ' .. name) or '')
end

---@class claude_nvim.ServerClaude a Claude as the server tells (vim.g.claude_nvim_server.claudes)
---@field id? string its connection
---@field terminal? integer the terminal buffer it runs in, when it runs in one of this Neovim
---@field label? string the server's name for it
---@field state? 'unknown'|'working'|'waiting'|'done' by its hooks
---@field since? number when it came into that state (seconds)

-- What claude-nvim's server says of each Claude in a terminal (its hooks: state, since), by
-- terminal buffer: read once (vim.g copies the whole record into Lua at each read).
local function by_terminal()
  local server = vim.g.claude_nvim_server
  local claudes = type(server) == 'table' and server.claudes
  local entries = {}
  for _, entry in ipairs(type(claudes) == 'table' and claudes or {}) do
    if type(entry) == 'table' and type(entry.terminal) == 'number' then
      entries[entry.terminal] = entries[entry.terminal] or entry
    end
  end
  return entries
end

-- What claude-nvim's server says of the Claude in terminal `buf` (its hooks: state, since),
-- or nil (none connected there, or one started without claude-nvim's hooks).
---@param buf integer
---@return claude_nvim.ServerClaude|nil
function M.server_entry(buf) return by_terminal()[buf] end

-- The state of the Claude in `buf` ('working', 'waiting', 'done'), or nil when unknown.
---@param buf integer
---@return string|nil
function M.state(buf)
  local entry = M.server_entry(buf)
  local state = entry and entry.state
  return type(state) == 'string' and state ~= 'unknown' and state or nil
end

-- The name of a Claude the server knows (`entry`, of vim.g.claude_nvim_server.claudes): its
-- terminal's label, else the server's ("the Claude with pid 4242").
---@param entry claude_nvim.ServerClaude
---@return string
function M.entry_label(entry)
  local buf = entry.terminal
  if type(buf) == 'number' and api.nvim_buf_is_valid(buf) then
    local n = vim.b[buf].claude_nvim_terminal
    local label = vim.b[buf].claude_nvim_label or (n and ('Claude ' .. n))
    if label then return label end
  end
  return type(entry.label) == 'string' and entry.label or 'Claude'
end

-- For statuslines (claude_nvim.status()): what the Claudes (`entries`, `count` of them) are
-- doing that the user may want to know: "waiting" (one Claude), "Claude 2 waiting · 1
-- working" (several); nil when nothing is known.
---@param entries claude_nvim.ServerClaude[]|nil
---@param count integer
---@return string|nil
function M.states(entries, count)
  local waiting, working = {}, 0
  for _, entry in ipairs(type(entries) == 'table' and entries or {}) do
    if entry.state == 'waiting' then
      waiting[#waiting + 1] = count > 1 and (M.entry_label(entry):gsub(' · .*', '') .. ' waiting')
        or 'waiting'
    elseif entry.state == 'working' then
      working = working + 1
    end
  end
  if working > 0 then waiting[#waiting + 1] = count > 1 and (working .. ' working') or 'working' end
  return #waiting > 0 and table.concat(waiting, ' · ') or nil
end

-- Whether Neovim has the focus (FocusGained / FocusLost, where the terminal reports them).
local focused = true
---@param has boolean
function M.focus(has)
  focused = has
  if not has then M.out_of_sight() end
end

-- Whether the terminal of `entry`'s Claude shows in a window of this tab.
local function in_view(entry)
  local buf = entry.terminal
  if type(buf) ~= 'number' or not api.nvim_buf_is_valid(buf) then return false end
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if api.nvim_win_get_tabpage(win) == api.nvim_get_current_tabpage() then return true end
  end
  return false
end

-- Tell the user `msg`: through vim.notify when a plugin replaced it (its popups), else in one
-- line that never holds Neovim at a hit-enter prompt.
local function notify(msg)
  local source = debug.getinfo(vim.notify, 'S').source
  if source:find('vim/_editor.lua', 1, true) then return require('claude_nvim').tell(msg) end
  vim.notify(msg, vim.log.levels.INFO, { title = 'claude-nvim' })
end

-- Ring the outer terminal's bell: Neovim's own beep, sent to its UIs (whatever 'belloff' says;
-- 'visualbell' makes it a flash), from any mode.
local function bell()
  local belloff = vim.o.belloff
  vim.o.belloff = ''
  local scratch = api.nvim_create_buf(false, true)
  pcall(api.nvim_buf_call, scratch, function() vim.cmd('silent undo') end)  -- nothing to undo
  api.nvim_buf_delete(scratch, { force = true })
  vim.o.belloff = belloff
end

local TOLD = { waiting = 'is waiting for you', done = 'is done' }
local NOTICE_GAP_MS = 1000  -- between two notices of one Claude: hooks may change it 1000s a second
local told = {}   -- Claude id -> what the user was last told of it: { state, since, at (ms) }
local later = {}  -- Claude id -> true: its next notice waits for the end of the gap

local function now_ms() return (vim.uv or vim.loop).hrtime() / 1e6 end

local function server_entries()
  local server = vim.g.claude_nvim_server
  local claudes = type(server) == 'table' and server.claudes
  return type(claudes) == 'table' and claudes or {}
end

-- Tell the user that `entry`'s Claude waits or is done, if they cannot see it (its window
-- hidden in this tab, or Neovim without the focus) and were not told of this state yet: at
-- most one notice a NOTICE_GAP_MS per Claude, the one at the end of a gap of its state then.
local function announce(entry)
  local what = TOLD[entry.state]
  local opts = require('claude_nvim').config
  if not what or opts.notify == false or (focused and in_view(entry)) then return end
  local id = entry.id or entry.terminal or 0
  local last = told[id]
  if last and last.state == entry.state and last.since == entry.since then return end
  local gap = last and NOTICE_GAP_MS - (now_ms() - last.at) or 0
  if gap > 0 then
    if not later[id] then
      later[id] = true
      vim.defer_fn(function()
        later[id] = nil
        for _, latest in ipairs(server_entries()) do
          if type(latest) == 'table' and (latest.id or latest.terminal or 0) == id then
            return announce(latest)
          end
        end
      end, math.ceil(gap))
    end
    return
  end
  told[id] = { state = entry.state, since = entry.since, at = now_ms() }
  notify((M.entry_label(entry):gsub('^%l', string.upper)) .. ' ' .. what)
  if opts.bell then bell() end
end

--- A Claude's state changed (User ClaudeNvimWorking, ClaudeNvimWaiting, ClaudeNvimDone; its
--- entry): the bars show it (one redraw for many changes); waiting or done, the user is told
--- once if they cannot see that Claude (see announce), and with opts.bell the terminal's bell
--- rings.
---@param entry claude_nvim.ServerClaude
function M.changed(entry)
  M.redraw_soon()
  if type(entry) == 'table' then announce(entry) end
end

--- Something may have hidden a Claude (a window closed, another buffer or tab shown, Neovim
--- lost the focus): one that waits, which the user saw start waiting, is told now.
function M.out_of_sight()
  for _, entry in ipairs(server_entries()) do
    if type(entry) == 'table' and entry.state == 'waiting' then announce(entry) end
  end
end

-- A duration in seconds, short: "40 s", "12 min", "3 h".
local function ago(seconds)
  seconds = math.max(0, seconds)
  if seconds < 60 then return ('%d s'):format(seconds) end
  if seconds < 3600 then return ('%d min'):format(seconds / 60) end
  return ('%d h'):format(seconds / 3600)
end

-- Bring every running Claude's label up to date: its buffer's name and b:claude_nvim_label,
-- and the bars and tab labels that show them. Cheap: a few buffer variables read. A buffer's
-- rename costs Neovim up to 1 ms (a buffer of the old name made and wiped): one a tick, the
-- others at the next ticks, in turn, if Claudes' titles change all at once.
local turn = 0
function M.refresh()
  local changed, unnamed, live = false, {}, {}
  for _, claude in ipairs(terminal().list()) do
    -- (Not before claude runs there: starting it names the buffer.)
    if claude.job then
      local label = M.label(claude)
      live[claude.buf] = from_title[claude.buf]
      if label ~= var(claude.buf, 'claude_nvim_label') then
        vim.b[claude.buf].claude_nvim_label = label
        changed = true
      end
      if label ~= var(claude.buf, 'claude_nvim_named') then
        unnamed[#unnamed + 1] = { claude.buf, label }
      end
    end
  end
  from_title = live
  if #unnamed > 0 then
    turn = turn + 1
    local buf, label = unpack(unnamed[(turn - 1) % #unnamed + 1])
    terminal().set_name(buf, label)
    vim.b[buf].claude_nvim_named = label
    changed = true
  end
  if changed then M.redraw() end
end

function M.redraw()
  vim.cmd('redrawstatus! | redrawtabline')
end

local REDRAW_MS = 50  -- a redraw of the bars costs ~1 ms with a UI: at most 20 a second
local redraw_due = false
--- M.redraw in REDRAW_MS: a flood of changes, one redraw.
function M.redraw_soon()
  if redraw_due then return end
  redraw_due = true
  vim.defer_fn(function()
    redraw_due = false
    M.redraw()
  end, REDRAW_MS)
end

-- claude changes its title without an event Neovim reports (before 0.12): the labels are
-- brought up to date every second while a Claude runs, and the timer stops with the last one.
local timer = nil

function M.watch()
  if timer then return end
  timer = (vim.uv or vim.loop).new_timer()
  timer:start(0, 1000, vim.schedule_wrap(function()
    if #terminal().list() == 0 then
      if timer then timer:close() end
      timer = nil
      return
    end
    M.refresh()
    terminal().keep_names()
  end))
end

-- The Claude window's bar: the Claudes, the one shown in this window marked, each a click
-- away; their states where known. Evaluated as Neovim draws the window ('winbar' %!).
local CLICK = "%%%d@v:lua.require'claude_nvim.claudes'.click@"

local function escape(s) return (s:gsub('%%', '%%%%')) end

---@return string
function M.bar()
  local ok, text = pcall(function()
    local win = vim.g.statusline_winid or api.nvim_get_current_win()
    local shown = api.nvim_win_is_valid(win) and api.nvim_win_get_buf(win)
    local width = api.nvim_win_is_valid(win) and api.nvim_win_get_width(win) or 80
    local entries = by_terminal()
    local items, total = {}, 0
    for _, claude in ipairs(terminal().list()) do
      local state = entries[claude.buf] and entries[claude.buf].state
      state = type(state) == 'string' and state ~= 'unknown' and state or nil
      local here = claude.buf == shown
      local label = var(claude.buf, 'claude_nvim_label') or M.label(claude)
      local item = { n = claude.n, here = here, state = state,
                     text = here and label or (label:gsub('^Claude ', '')) }
      item.cells = vim.fn.strdisplaywidth(item.text)
      total = total + item.cells + (state and #state + 3 or 0) + 3
      items[#items + 1] = item
    end
    -- Too wide: the others lose their names, then this one's name is cut.
    for _, item in ipairs(items) do
      if total <= width then break end
      if not item.here then
        item.text = tostring(item.n)
        total, item.cells = total - item.cells + #item.text, #item.text
      end
    end
    for _, item in ipairs(items) do
      if total > width and item.here then
        item.text = fit(item.text, math.max(8, item.cells - (total - width)))
      end
    end
    local parts = {}
    for _, item in ipairs(items) do
      local hl = item.here and '%#TabLineSel#' or '%#TabLine#'
      local state = item.state and (' · ' .. item.state) or ''
      parts[#parts + 1] = CLICK:format(item.n) .. hl .. ' ' .. (item.here and '▸' or '') ..
        escape(item.text) .. state .. ' %X'
    end
    return table.concat(parts, '%#TabLineFill# ') .. '%#TabLineFill#'
  end)
  return ok and text or ''
end

--- A click on the bar: Claude `n` in the Claude window.
---@param n integer
function M.click(n)
  vim.schedule(function() terminal().switch(n) end)
end

--- The picker of :ClaudeNvimSwitch: the running Claudes (vim.ui.select, so pickers that
--- replace it show it their way), each with its state and age; the chosen one is shown.
function M.pick()
  local now = os.time()
  local items = vim.tbl_map(function(claude)
    local entry = M.server_entry(claude.buf)
    local state = M.state(claude.buf)
    local since = entry and tonumber(entry.since)
    return { n = claude.n, label = vim.b[claude.buf].claude_nvim_label or M.label(claude),
             state = state and (state .. (since and (' ' .. ago(now - since)) or '')),
             age = ago(now - claude.started), current = claude.current }
  end, terminal().list())
  vim.ui.select(items, {
    prompt = 'Claude',
    kind = 'claude_nvim',
    format_item = function(item)
      return table.concat(vim.tbl_filter(function(s) return s ~= nil end, {
        (item.current and '▸ ' or '  ') .. item.label, item.state, 'started ' .. item.age .. ' ago',
      }), ' · ')
    end,
  }, function(choice)
    if choice then terminal().switch(choice.n) end
  end)
end

return M
