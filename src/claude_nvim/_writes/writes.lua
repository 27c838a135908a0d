-- claude_nvim.writes: files written on Claude's host, shown in their buffers here when Neovim
-- runs elsewhere and its buffer is another copy (_writes/__init__.py). Neovim says which files
-- it has open (for the server's watcher); the server sends each write of one, with its bytes.
local api = vim.api
local core = require('claude_nvim.core')
local reload = require('claude_nvim.reload')
local M = {}

local group, event, pending = nil, nil, false
local told = {}  -- buf -> true: told that its file changed there while it had unsaved changes

local function open_files()
  local names = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == '' then
      local name = api.nvim_buf_get_name(buf)
      if name ~= '' then names[#names + 1] = name end
    end
  end
  return names
end

local function send_soon()  -- one message for a burst of buffer events
  if pending then return end
  pending = true
  vim.schedule(function()
    pending = false
    if group then core.notify(event, open_files()) end
  end)
end

-- opts: event (the notification of the open files), watch (whether the server wants them).
---@param opts { event: string, watch: boolean }
function M.setup(opts)
  event = opts.event
  if not opts.watch then return end
  group = api.nvim_create_augroup('claude_nvim_writes', { clear = true })
  api.nvim_create_autocmd({ 'BufReadPost', 'BufNewFile', 'BufFilePost', 'BufUnload',
                            'BufWipeout' }, { group = group, callback = send_soon })
  send_soon()
end

function M.stop()
  if group then pcall(api.nvim_del_augroup_by_id, group) end
  group, told = nil, {}
end

-- The buffer of `path`: by exact name for a URL (scp://...), else as tools find files.
local function find(path)
  if path:match('^%a[%w+.-]*://') then
    for _, buf in ipairs(api.nvim_list_bufs()) do
      if api.nvim_buf_get_name(buf) == path then return buf end
    end
    return nil
  end
  return core.find_buffer({ path })
end

-- `path` (Neovim's name for the file) was written on Claude's host, where it now holds `data`.
-- An unmodified buffer shows it: reloaded from its file here if that is the same (a shared
-- mount: bufsync may have done it already), else given the text (another copy). A buffer with
-- unsaved changes is left alone, and the user told once. Returns what it did.
---@param path string
---@param data string
---@return 'not open'|'modified'|'current'|'refused'|'shown'|string
function M.written(path, data)
  local buf = find(path)
  if buf == nil or not api.nvim_buf_is_loaded(buf) then return 'not open' end
  if vim.bo[buf].modified then
    if not told[buf] then
      told[buf] = true
      core.tell(vim.fn.fnamemodify(path, ':~:.') .. ' changed where Claude runs; your unsaved '
        .. 'changes here are kept', 'WARN')
    end
    return 'modified'
  end
  told[buf] = nil
  local name = api.nvim_buf_get_name(buf)
  if name:sub(1, 1) == '/' and core.read_file(name) == data then
    return reload.refresh(buf) or 'current'
  end
  local why = reload.show(buf, data)
  if why then
    core.log('warn', ('cannot show %s as Claude wrote it: %s'):format(path, why))
    return 'refused'
  end
  return 'shown'
end

return M
