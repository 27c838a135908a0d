-- getQuickfixList's Neovim half (claude_nvim.tools.getQuickfixList): the quickfix list or a
-- window's location list, capped, in UTF-16 columns (tools/get_quickfix_list.py).
local api = vim.api
local core = package.loaded['claude_nvim.core'] ---@module 'claude_nvim.core'
local M = {}
local TYPES = { E = 'Error', W = 'Warning', I = 'Info', N = 'Note', H = 'Hint' }

local cut = core.cut

--- The quickfix list (`which`: 'quickfix') or the editor window's location list, at most
--- `max_items` items and `max_text` bytes of each item's text.
---@param which 'quickfix'|'location'
---@param max_items integer
---@param max_text integer
---@return table answer the tool's, or {error = why}
function M.get(which, max_items, max_text)
  local get = vim.fn.getqflist
  if which == 'location' then
    local win = core.editor_window()  -- the user's, from Claude's terminal too
    if win == nil then
      return { error = 'No editor window: a location list belongs to a window' }
    end
    get = function(what) return vim.fn.getloclist(win, what) end
  end
  local info = get({ title = 1, items = 1 })
  info.idx = get({ idx = 0 }).idx  -- with `items`, `idx` would pick that one item
  local read = core.reader()
  local items = {}
  for i = 1, math.min(#info.items, max_items) do
    local it = info.items[i]
    local item = { text = cut(it.text or '', max_text) }
    local path = nil
    if it.bufnr and it.bufnr > 0 and api.nvim_buf_is_valid(it.bufnr) then
      local name = api.nvim_buf_get_name(it.bufnr)
      if name ~= '' then path = core.absolute(name); item.uri = core.file_url(path) end
    end
    local function character(row, col)  -- 1-based byte column -> 0-based UTF-16
      local text = path and it.vcol == 0 and read(path, row, it.bufnr)
      return text and core.utf16(text, col - 1) or (col - 1)
    end
    if it.lnum and it.lnum > 0 then
      item.line = it.lnum - 1
      if it.col and it.col > 0 then item.character = character(item.line, it.col) end
      if it.end_lnum and it.end_lnum > 0 then
        item.endLine = it.end_lnum - 1
        if it.end_col and it.end_col > 0 then
          item.endCharacter = character(item.endLine, it.end_col)
        end
      end
    end
    if it.type and it.type ~= '' then item.type = TYPES[it.type:upper()] or it.type end
    if it.valid == 0 then item.valid = false end
    items[i] = item
  end
  local answer = { list = which, title = cut(info.title or '', max_text), items = items }
  if #info.items > 0 then answer.current = info.idx - 1 end
  if #info.items > max_items then answer.truncated = true; answer.total = #info.items end
  return answer
end

return M
