-- Actions for pickers: the picked files (with their line, where the picker has one) go to
-- Claude, as :ClaudeNvimAdd sends them. Each is the picker's own kind of action (README,
-- :help claude-nvim-pickers); the picker closes first.
local M = {}

local function add(items) require('claude_nvim').add(items) end

local function absolute(path, cwd)
  if path and cwd and not path:match('^[/~]') then return cwd .. '/' .. path end
  return path
end

--- telescope.nvim: an action, `function(prompt_bufnr)`: its multi-selection, else the entry
--- under the cursor.
---@param prompt_bufnr integer
function M.telescope(prompt_bufnr)
  ---@diagnostic disable-next-line: unresolved-require (the user's plugin, when present)
  local state = require('telescope.actions.state')
  local entries = state.get_current_picker(prompt_bufnr):get_multi_selection()
  if #entries == 0 then entries = { state.get_selected_entry() } end
  ---@diagnostic disable-next-line: unresolved-require (the user's plugin, when present)
  require('telescope.actions').close(prompt_bufnr)
  add(vim.tbl_map(function(entry)
    local path = entry.path or entry.filename or (type(entry.value) == 'string' and entry.value)
    return { path = absolute(path, entry.cwd), line = entry.lnum }
  end, entries))
end

--- fzf-lua: an action, `function(selected, opts)` (fzf has closed already).
---@param selected string[]
---@param opts table
function M.fzf_lua(selected, opts)
  ---@diagnostic disable-next-line: unresolved-require (the user's plugin, when present)
  local path = require('fzf-lua').path
  add(vim.tbl_map(function(entry)
    local file = path.entry_to_file(entry, opts)
    local where = file.path ~= nil and file.path ~= '' and file.path or file.bufname or nil
    return { path = where, line = file.line }  -- line 0: none
  end, selected))
end

--- snacks.nvim's picker: an action, `function(picker)`: the selected items, else the current.
---@param picker table
function M.snacks(picker)
  local items = picker:selected({ fallback = true })
  picker:close()
  add(vim.tbl_map(function(item)
    return { path = _G.Snacks.picker.util.path(item), line = item.pos and item.pos[1] }
  end, items))
end

return M
