-- claude_nvim.selection: the selection's Neovim half. On each cursor or mode event it computes
-- the selection of the active editor and sends it to the server with a leading+trailing
-- throttle; it also answers the selection tools (M.current, M.latest, M.slice).
-- Lifecycle: setup(opts) / stop(); opts (from SelectionFeature): cap, window_ms, lua_rows, event.
local api = vim.api
local core = require('claude_nvim.core')
local M = {}
local CAP, WINDOW_MS, LUA_ROWS, EVENT  -- set by M.setup, from SelectionFeature
-- A selection's end: 0-based row and byte column; eol: it runs to the end of the line.
---@alias claude_nvim.SelectionEnd { [1]: integer, [2]: integer, eol: boolean? }

local VISUAL = { v = 'v', V = 'V', ['\22'] = '\22', s = 'v', S = 'V', ['\19'] = '\22' }

local function line_at(buf, row)
  return api.nvim_buf_get_lines(buf, row, row + 1, false)[1] or ''
end

local cut = core.cut

-- Join fragment(row, line) for rows r1..r2 with '\n'. With a cap, read lines in small chunks
-- and stop once `cap` bytes are collected, so a huge selection costs no more than a small one.
-- With a budget, stop after `budget_ms` and say where to go on: (text, truncated, next row).
local function collect(buf, r1, r2, fragment, cap, budget_ms)
  local parts, size, row = {}, 0, r1
  local chunk = (cap or budget_ms) and 64 or (r2 - r1 + 1)
  local started = (vim.uv or vim.loop).hrtime()
  while row <= r2 do
    if cap and size > cap then break end
    if budget_ms and row > r1 and (vim.uv or vim.loop).hrtime() - started > budget_ms * 1e6 then
      return table.concat(parts, '\n'), false, row
    end
    local last = math.min(r2, row + chunk - 1)
    for i, line in ipairs(api.nvim_buf_get_lines(buf, row, last + 1, false)) do
      local piece = fragment(row + i - 1, line)
      parts[#parts + 1] = piece
      size = size + #piece + 1
    end
    row = last + 1
  end
  local text = table.concat(parts, '\n')
  if cap and (#text > cap or row <= r2) then return (cut(text, cap)), true end
  return text, false
end

local function payload(buf, text, truncated, sl, sc, el, ec)
  local name = api.nvim_buf_get_name(buf)
  local p = {
    text = text, filePath = name, fileUrl = core.file_url(name),
    selection = {
      start = { line = sl, character = sc }, ['end'] = { line = el, character = ec },
      isEmpty = sl == el and sc == ec,
    },
  }
  if truncated then p.truncated = true end
  return p
end

-- The shape of a selection of kind 'v', 'V' or CTRL-V from a to b ({row, byte col}, both
-- 0-based, a before b; b.eol: it takes in b's line break): its range, the text it takes from
-- each row, and what follows the last row. Run it with `buf` current (block columns).
-- claude counts end.line - start.line + 1 lines, one less when end.character is 0: a range
-- whose last row is empty ends at the start of the next row instead (the text is still what
-- Neovim yanks), or claude would show one line less than the user selected.
local function shape(buf, kind, a, b)
  if kind == 'V' then
    local last = line_at(buf, b[1])
    return { sl = a[1], sc = 0, el = b[1] + (last == '' and 1 or 0), ec = core.utf16(last, #last),
             fragment = function(_, l) return l end }
  elseif kind == 'v' then
    local first, last = line_at(buf, a[1]), line_at(buf, b[1])
    local s = math.min(a[2], #first)
    local e  -- the exclusive end byte on row b[1]
    local eol = b.eol or b[2] >= #last
    if vim.o.selection == 'exclusive' then
      -- b itself is left out, so a line break (`$`, an empty line) is never taken in; as `y`.
      eol, e = false, math.min(b[2], #last)
    elseif eol then
      e = #last
    else
      e = b[2] + vim.str_utf_end(last, b[2] + 1) + 1
    end
    local r = { sl = a[1], sc = core.utf16(first, s), el = b[1], ec = core.utf16(last, e),
                fragment = function(row, l)
                  return l:sub((row == a[1] and s or 0) + 1, row == b[1] and e or #l)
                end }
    if eol and b[1] + 1 < api.nvim_buf_line_count(buf) then
      r.tail, r.el, r.ec = '\n', b[1] + 1, 0
    elseif eol and e == 0 then
      r.el = b[1] + 1  -- an empty last line (see above)
    end
    return r
  end
  -- Blockwise: the covering span from (top, leftmost column) to (bottom, rightmost column + 1).
  local va = vim.fn.virtcol({ a[1] + 1, a[2] + 1 }, 1)
  local vb = vim.fn.virtcol({ b[1] + 1, b[2] + 1 }, 1)
  local left = math.min(va[1], vb[1])
  local right = (a.eol or b.eol) and math.huge or math.max(va[2], vb[2])
  if right ~= math.huge and vim.o.selection == 'exclusive' and vb[1] - 1 >= va[2] then
    right = vb[1] - 1  -- as `y` does: b, the later corner, is left out when right of a
  end
  local function span(row, l)  -- the block's bytes [s, e) on a row
    if l == '' or vim.fn.strdisplaywidth(l) < left then return #l, #l end
    local s = vim.fn.virtcol2col(0, row + 1, left) - 1
    if right == math.huge then return s, #l end
    local e = vim.fn.virtcol2col(0, row + 1, right)
    return s, math.min(#l, e + vim.str_utf_end(l, e))
  end
  local top, bottom = line_at(buf, a[1]), line_at(buf, b[1])
  local ts = span(a[1], top)
  local _, be = span(b[1], bottom)
  return { sl = a[1], sc = core.utf16(top, ts), el = b[1] + (bottom == '' and 1 or 0),
           ec = core.utf16(bottom, be),
           fragment = function(row, l)
             local s, e = span(row, l)
             return l:sub(s + 1, e)
           end }
end

local function ordered(a, b)
  if b[1] < a[1] or (b[1] == a[1] and b[2] < a[2]) then return b, a end
  return a, b
end

-- The selection from a to b (in either order) as a payload. With a budget, a big one stops
-- early and says how to read on (`more`): the editor is never held for long. The whole middle
-- rows of a big charwise or linewise selection are left to nvim_buf_get_lines requests, which
-- skip Lua strings and cost a third of reading them here (`more.rows`, `more.tail`); other
-- selections go on with M.slice.
local function region(buf, kind, a, b, cap, budget_ms)
  a, b = ordered(a, b)
  return api.nvim_buf_call(buf, function()
    local s = shape(buf, kind, a, b)
    if budget_ms and kind ~= '\22' and b[1] - a[1] > LUA_ROWS then
      local p = payload(buf, s.fragment(a[1], line_at(buf, a[1])), false, s.sl, s.sc, s.el, s.ec)
      p.more = { buf = buf, tick = api.nvim_buf_get_changedtick(buf), rows = { a[1] + 1, b[1] },
                 tail = '\n' .. s.fragment(b[1], line_at(buf, b[1])) .. (s.tail or '') }
      return p
    end
    local text, truncated, next_row = collect(buf, a[1], b[1], s.fragment, cap, budget_ms)
    if s.tail and not truncated and not next_row then text = text .. s.tail end
    local p = payload(buf, text, truncated, s.sl, s.sc, s.el, s.ec)
    if next_row then
      p.more = { buf = buf, kind = kind, tick = api.nvim_buf_get_changedtick(buf),
                 a = { a[1], a[2], a.eol or false }, b = { b[1], b[2], b.eol or false },
                 next = next_row }
    end
    return p
  end)
end

--- The next slice of a big selection, or nil when the buffer changed since (read it again).
---@param more {buf: integer, tick: integer, kind: string, a: table, b: table, next: integer}
---@param budget_ms number
---@return {text: string, next: integer|nil}|vim.NIL
function M.slice(more, budget_ms)
  local buf = more.buf
  if not api.nvim_buf_is_valid(buf) or api.nvim_buf_get_changedtick(buf) ~= more.tick then
    return vim.NIL
  end
  local a, b = { more.a[1], more.a[2], eol = more.a[3] }, { more.b[1], more.b[2], eol = more.b[3] }
  return api.nvim_buf_call(buf, function()
    local s = shape(buf, more.kind, a, b)
    local text, _, next_row = collect(buf, more.next, b[1], s.fragment, nil, budget_ms)
    if s.tail and not next_row then text = text .. s.tail end
    return { text = text, next = next_row }
  end)
end

local function cursor_payload(buf, win)
  local cur = api.nvim_win_get_cursor(win)
  local col = core.utf16(line_at(buf, cur[1] - 1), cur[2])
  return payload(buf, '', false, cur[1] - 1, col, cur[1] - 1, col)
end

-- The live selection in the current window: {kind, a, b} while in Visual or Select mode.
local function live_region()
  local kind = VISUAL[api.nvim_get_mode().mode:sub(1, 1)]
  if not kind then return nil end
  local v, c = vim.fn.getpos('v'), vim.fn.getcurpos()
  local b = { c[2] - 1, c[3] - 1 } ---@type claude_nvim.SelectionEnd
  b.eol = c[5] == vim.v.maxcol  -- `$` was pressed: the selection runs to the end of line
  return { kind = kind, a = { v[2] - 1, v[3] - 1 }, b = b }
end

--- The current selection (or cursor) of the active editor (core.editor_window: the current
--- window, else the file window the user was in last), or nil when there is none.
--- `cap`: cut the text there (notifications); `budget_ms`: full text, read in slices.
---@param cap integer|nil
---@param budget_ms? number
---@return table|nil payload the selection_changed parameters
function M.current(cap, budget_ms)
  if cap == vim.NIL then cap = nil end
  local win = core.editor_window()
  if win == nil then return nil end
  local buf = api.nvim_win_get_buf(win)
  local r = win == api.nvim_get_current_win() and live_region()
  if r then return region(buf, r.kind, r.a, r.b, cap, budget_ms) end
  return cursor_payload(buf, win)
end

-- The latest completed Visual selection: {buf, tick, kind, a, b, payload}. `payload` has
-- capped text; the full text is re-read while the buffer is unchanged.
---@class claude_nvim.LatestSelection
---@field buf integer
---@field tick integer? its changedtick then (nil: the text changed: payload is all there is)
---@field kind string? 'v', 'V' or CTRL-V
---@field a claude_nvim.SelectionEnd?
---@field b claude_nvim.SelectionEnd?
---@field payload table? the selection_changed parameters

---@type claude_nvim.LatestSelection?
local latest = nil
local visual_snapshot = nil  -- the last state seen inside Visual mode

--- The latest completed Visual selection's payload (its full text re-read while its buffer is
--- unchanged), or nil.
---@param budget_ms? number
---@return table|nil payload
function M.latest(budget_ms)
  if latest == nil then return nil end
  if api.nvim_buf_is_valid(latest.buf) and latest.kind
      and api.nvim_buf_get_changedtick(latest.buf) == latest.tick then
    return region(latest.buf, latest.kind, latest.a, latest.b, nil, budget_ms)
  end
  return latest.payload
end

-- Throttled sending: a leading edge at once, then at most one send per window, and the
-- trailing edge always sends the final state.
---@type uv.uv_timer_t?
local timer = nil
local state, last_key, pending = nil, nil, false

local function key(p)
  local s = p.selection
  return table.concat({ p.filePath, s.start.line, s.start.character, s['end'].line,
    s['end'].character, p.text }, '\0')
end

local function send()
  pending = false
  if state == nil then return end
  local k = key(state)
  if k ~= last_key and core.notify(EVENT, state) then last_key = k end
end

local function arm()
  timer:start(WINDOW_MS, 0, vim.schedule_wrap(core.guard(function()
    if pending then send(); arm() end
  end)))
end

local function on_event()
  local win = api.nvim_get_current_win()
  if not core.is_editor(win) then return end  -- keep showing the last editor's state
  local buf = api.nvim_win_get_buf(win)
  local r = live_region()
  if r then
    state = region(buf, r.kind, r.a, r.b, CAP)
    visual_snapshot = { buf = buf, tick = api.nvim_buf_get_changedtick(buf), payload = state,
      eol = r.b.eol }
  else
    state = cursor_payload(buf, win)
  end
  if timer:is_active() then pending = true; return end
  send(); arm()
end

-- Leaving Visual mode records the latest selection and sends it at once, outside the throttle.
local function on_mode_changed()
  ---@diagnostic disable-next-line: undefined-field (ModeChanged's v:event)
  local old, new = vim.v.event.old_mode:sub(1, 1), vim.v.event.new_mode:sub(1, 1)
  if not (VISUAL[old] and not VISUAL[new]) then return on_event() end
  local win = api.nvim_get_current_win()
  if not core.is_editor(win) then return end
  local buf = api.nvim_win_get_buf(win)
  local tick = api.nvim_buf_get_changedtick(buf)
  local snap = visual_snapshot
  visual_snapshot = nil
  if snap and snap.buf == buf and snap.tick ~= tick then
    latest = { buf = buf, payload = snap.payload }  -- the command changed the text (d, c, ...)
  else
    local s, e = api.nvim_buf_get_mark(buf, '<'), api.nvim_buf_get_mark(buf, '>')
    if s[1] == 0 then return end
    local kind = VISUAL[vim.fn.visualmode()] or 'v'
    local b = { e[1] - 1, e[2] } ---@type claude_nvim.SelectionEnd
    -- The marks do not say that CTRL-V `$` ran the block to each line's end; the snapshot does.
    b.eol = e[2] >= vim.v.maxcol or (kind == '\22' and snap ~= nil and snap.buf == buf and snap.eol)
    latest = { buf = buf, tick = tick, kind = kind, a = { s[1] - 1, s[2] }, b = b }
    latest.payload = region(buf, kind, latest.a, latest.b, CAP)
  end
  state = latest.payload
  send()
  if not timer:is_active() then arm() end
end

--- Start pushing the selection: `opts` from SelectionFeature.options.
---@param opts {cap: integer, window_ms: integer, lua_rows: integer, event: string}
function M.setup(opts)
  CAP, WINDOW_MS, LUA_ROWS, EVENT = opts.cap, opts.window_ms, opts.lua_rows, opts.event
  timer = timer or (vim.uv or vim.loop).new_timer()
  local group = api.nvim_create_augroup('claude_nvim_selection', { clear = true })
  api.nvim_create_autocmd({ 'CursorMoved', 'CursorMovedI', 'BufEnter' }, {
    group = group, callback = core.guard(on_event),
  })
  api.nvim_create_autocmd('ModeChanged', { group = group, callback = core.guard(on_mode_changed) })
  last_key = nil
  on_event()
end

--- Stop pushing it: the autocmds and the timer.
function M.stop()
  pcall(api.nvim_del_augroup_by_name, 'claude_nvim_selection')
  if timer then timer:stop(); timer:close(); timer = nil end
end

return M
