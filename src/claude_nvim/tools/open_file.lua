-- openFile's Neovim half (claude_nvim.tools.openFile): find the file, load it with
-- core.load, show it in an editor window and select lines or text (tools/open_file.py).
local api = vim.api
local core = package.loaded['claude_nvim.core'] ---@module 'claude_nvim.core'
local M = {}

-- Not filereadable(): it expands $VARS, and file names may contain '$'.
local function readable(path)
  local stat = (vim.uv or vim.loop).fs_stat(path)
  return stat ~= nil and stat.type ~= 'directory' and (vim.uv or vim.loop).fs_access(path, 'R')
end

-- A window fit to show a file: a normal editor window, never a terminal, sidebar, floating or
-- diff window. The current one if it fits, else the first that does.
local function fits(win)
  local buf = api.nvim_win_get_buf(win)
  -- Replacing a modified buffer shown only here would abandon it (with 'nohidden' and
  -- 'autowrite', even write it): leave such a window alone.
  local abandons = vim.bo[buf].modified and not vim.o.hidden and #vim.fn.win_findbuf(buf) == 1
  return api.nvim_win_get_config(win).relative == '' and vim.bo[buf].buftype == ''
    and not vim.wo[win].diff and not vim.wo[win].winfixbuf and not vim.b[buf].claude_nvim_proposal
    and not (vim.wo[win].winfixwidth and vim.bo[buf].filetype ~= '') and not abandons
end

-- The user's editor window (core.editor_window) if it fits, else the first of this tab that
-- does.
local function editor_window()
  local user = core.editor_window()
  if user and fits(user) then return user end
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if fits(win) then return win end
  end
  -- None: split the current (or first normal) window, the new one on the left, as VS Code does.
  local current = api.nvim_get_current_win()
  local base = api.nvim_win_get_config(current).relative == '' and current
    or api.nvim_tabpage_list_wins(0)[1]
  local win = api.nvim_open_win(api.nvim_win_get_buf(base), false, { split = 'left', win = base })
  if vim.fn.exists('+winfixbuf') == 1 then vim.wo[win].winfixbuf = false end  -- a Claude's split
  return win
end

-- The buffer of `path` loaded and listed, or nil and why not.
local function load(path)
  local buf, refusal = core.load(path, core.find_buffer({ path }))
  if buf == nil then return nil, refusal end
  vim.bo[buf].buflisted = true
  if vim.bo[buf].filetype == '' then
    api.nvim_buf_call(buf, function() vim.cmd('silent! filetype detect') end)
  end
  return buf
end

-- The byte offset of plain `needle` in the buffer at or after `from` (0-based row, byte col).
local function find(buf, needle, from_row, from_col)
  local lines = api.nvim_buf_get_lines(buf, 0, -1, false)
  local text = table.concat(lines, '\n')
  local offset = 0
  for row = 0, from_row - 1 do offset = offset + #lines[row + 1] + 1 end
  local s, e = text:find(needle, offset + from_col + 1, true)
  if not s then return nil end
  local function pos(byte)  -- 1-based byte in text -> {row, col}, both 0-based
    local row, start = 0, 1
    while true do
      local nl = text:find('\n', start, true)
      if not nl or nl >= byte then return { row, byte - start } end
      row, start = row + 1, nl + 1
    end
  end
  return pos(s), pos(e)
end

local function select_range(win, s, e, linewise)
  api.nvim_win_set_cursor(win, { s[1] + 1, s[2] })
  api.nvim_win_call(win, function()
    vim.cmd('normal! ' .. (linewise and 'V' or 'v'))
    api.nvim_win_set_cursor(win, { e[1] + 1, e[2] })
    vim.cmd('normal! zz')
  end)
end

--- Open the first existing candidate as openFile asks (`o`: its arguments).
---@param candidates string[]
---@param o table
---@return {json?: table, text?: string, error?: string}
function M.open(candidates, o)
  local path = core.existing(candidates, readable)
  if path == nil then
    local message = 'File not found: ' .. candidates[1]
    if not o.makeFrontmost then return { json = { success = false, message = message } } end
    return { error = message }  -- docs/protocol.md §10.5
  end
  local buf, refusal = load(path)
  if buf == nil then return { error = refusal } end
  local name = api.nvim_buf_get_name(buf)
  if not o.makeFrontmost then
    local ft = vim.bo[buf].filetype
    return { json = { success = true, filePath = name, languageId = ft ~= '' and ft or 'plaintext',
                      lineCount = api.nvim_buf_line_count(buf) } }
  end

  local mode = api.nvim_get_mode().mode
  if mode:match('^[vVsS\22\19]') then vim.cmd('normal! \27') end
  local win = editor_window()
  api.nvim_win_set_buf(win, buf)
  api.nvim_set_current_win(win)
  if mode:match('^[it]') then vim.cmd('stopinsert') end
  if o.preview then vim.wo[win].previewwindow = true end

  local count = api.nvim_buf_line_count(buf)
  if o.startLine then
    local s = math.max(1, math.min(o.startLine, count))
    local e = math.max(s, math.min(o.endLine or o.startLine, count))
    select_range(win, { s - 1, 0 }, { e - 1, 0 }, true)
    return { text = ('Opened file and selected lines %d to %d'):format(s, e) }
  end
  if o.startText then
    local s, s_end = find(buf, o.startText, 0, 0)
    if not s then return { text = 'Opened file, but text "' .. o.startText .. '" not found' } end
    if not o.endText then
      if o.selectToEndOfLine then
        local line = api.nvim_buf_get_lines(buf, s_end[1], s_end[1] + 1, false)[1]
        s_end = { s_end[1], math.max(0, #line - 1) }
      end
      select_range(win, s, s_end, false)
      return { text = 'Opened file and selected text "' .. o.startText .. '"' }
    end
    local _, e_end = find(buf, o.endText, s_end[1], s_end[2] + 1)
    if not e_end then
      api.nvim_win_set_cursor(win, { s[1] + 1, s[2] })
      api.nvim_win_call(win, function() vim.cmd('normal! zz') end)
      return { text = ('Opened file and positioned at "%s" (end text "%s" not found)')
        :format(o.startText, o.endText) }
    end
    if o.selectToEndOfLine then
      local line = api.nvim_buf_get_lines(buf, e_end[1], e_end[1] + 1, false)[1]
      e_end = { e_end[1], math.max(0, #line - 1) }
    end
    select_range(win, s, e_end, false)
    return { text = ('Opened file and selected text from "%s" to "%s"')
      :format(o.startText, o.endText) }
  end
  return { text = 'Opened file: ' .. name }
end

return M
