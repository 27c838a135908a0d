-- claude_nvim.rewind: :ClaudeNvimRewind[!] [N], every change of Claude's turns N..last taken
-- back. The server sends their combined change (rewind.py: each file's bytes before turn N and
-- as the last turn left it); here it is shown first as a review (claude_nvim.review's tab),
-- then, once confirmed, each file is written back to disk as it was, and its buffer follows
-- as a reload does (reload.refresh: one change, one `u` undoes it). A buffer with unsaved
-- changes is never touched (the user is told which); a file Claude made is deleted only if it
-- still holds what Claude wrote. Lifecycle: setup(opts) / stop(); opts: request (event name).
local api = vim.api
local core = require('claude_nvim.core')
local reload = require('claude_nvim.reload')
local M = {}

local REQUEST

local function none(value) return value == nil or value == vim.NIL end

local function tell(msg, level) core.tell(msg, level or 'INFO') end

local function name_of(path) return vim.fn.fnamemodify(path, ':~:.') end

-- What the file at `path` holds now (nil: no file, or unreadable).
local function read(path)
  local file = io.open(path, 'rb')
  if file == nil then return nil end
  local data = file:read('*a')
  file:close()
  return data
end

local function write(path, data)
  local file, err = io.open(path, 'wb')
  if file == nil then return false, err end
  local ok, werr = file:write(data)
  file:close()
  return ok ~= nil, werr
end

-- Put one file of the rewind back; what became of it: 'restored', 'deleted', 'unsaved',
-- 'changed' (a file Claude made that holds something else now), or 'failed' and why.
local function put_back(change)
  local path = change.path
  local buf = core.find_buffer({ path })
  local loaded = buf and api.nvim_buf_is_loaded(buf)
  if loaded then
    reload.refresh(buf)  -- what Claude wrote last, if bufsync has not shown it yet
    if vim.bo[buf].modified then return 'unsaved' end
  end
  if none(change.before) then  -- Claude made it
    local now = read(path)
    if now == nil then return 'restored' end  -- gone already
    if now ~= (none(change.after) and '' or change.after) then return 'changed' end
    local ok, err = os.remove(path)
    if not ok then return 'failed', err end
    -- Its buffer keeps the text (:w writes it again), as one that never had a file: no
    -- "deleted on disk" warning over the rewind's own message.
    if loaded then reload.disk[buf] = false end
    return 'deleted'
  end
  local ok, err = write(path, change.before)
  if not ok then return 'failed', err end
  if loaded then reload.refresh(buf) end
  return 'restored'
end

--- Rewind for real: `turn` (from the server: number, label, changes = { path, before,
--- after }, too_big) as before turn `number`.
---@param turn table
function M.apply(turn)
  local done, unsaved, kept, failed, deleted = 0, {}, {}, {}, 0
  for _, change in ipairs(turn.changes) do
    local what, why = put_back(change)
    if what == 'restored' then done = done + 1
    elseif what == 'deleted' then deleted = deleted + 1
    elseif what == 'unsaved' then unsaved[#unsaved + 1] = name_of(change.path)
    elseif what == 'changed' then kept[#kept + 1] = name_of(change.path)
    else failed[#failed + 1] = name_of(change.path) .. ' (' .. tostring(why) .. ')' end
  end
  local parts = { ('rewound %s: %d file%s as before turn %d'):format(turn.label, done,
    done == 1 and '' or 's', turn.number) }
  if deleted > 0 then
    parts[#parts + 1] = ('%d made by Claude deleted (a buffer keeps its text)'):format(deleted)
  end
  local level = 'INFO'
  if #unsaved > 0 then
    level = 'WARN'
    parts[#parts + 1] = 'not touched, unsaved: ' .. table.concat(unsaved, ', ')
  end
  if #kept > 0 then
    level = 'WARN'
    parts[#parts + 1] = 'kept, changed since Claude made them: ' .. table.concat(kept, ', ')
  end
  if #failed > 0 then
    level = 'ERROR'
    parts[#parts + 1] = 'failed: ' .. table.concat(failed, ', ')
  end
  if #turn.too_big > 0 then
    level = level == 'INFO' and 'WARN' or level
    parts[#parts + 1] = 'not kept (too big): ' .. table.concat(vim.tbl_map(name_of, turn.too_big),
      ', ')
  end
  if done > 0 then parts[#parts + 1] = 'u in a buffer undoes it there' end
  vim.g.claude_nvim_rewound = { unsaved = unsaved, kept = kept, failed = failed }
  tell(table.concat(parts, '; '), level)
end

--- Show `turn` (as M.apply takes it) as a review, then ask whether to rewind.
---@param turn table
function M.preview(turn)
  if #turn.changes == 0 then
    return tell(('%s changed nothing that can be rewound'):format(turn.label), 'WARN')
  end
  require('claude_nvim.review').show(turn)
  local tab = api.nvim_get_current_tabpage()
  vim.schedule(function()
    pcall(vim.cmd, 'redraw')  -- the preview on screen first: the question may take it over
    local files = #turn.changes
    vim.ui.select({ 'yes', 'no' }, {
      prompt = ('Rewind %s: %d file%s back as before turn %d?'):format(turn.label, files,
        files == 1 and '' or 's', turn.number),
      kind = 'claude_nvim_rewind',
    }, function(choice)
      if api.nvim_tabpage_is_valid(tab) and #api.nvim_list_tabpages() > 1 then
        pcall(vim.cmd, 'tabclose ' .. api.nvim_tabpage_get_number(tab))
      end
      -- After the question's own screen is gone: no hit-enter prompt for the summary.
      if choice == 'yes' then vim.schedule(function()
        pcall(vim.cmd, 'redraw!')
        M.apply(turn)
      end) end
    end)
  end)
end

--- Nothing to rewind: `why`.
---@param why string
function M.refuse(why) tell(why, 'WARN') end

--- :ClaudeNvimRewind[!] [N]
---@param o { args: string, bang: boolean }
function M.command(o)
  local arg = vim.trim(o.args or '')
  if arg ~= '' and not tonumber(arg) then return tell('usage: :ClaudeNvimRewind[!] [N]', 'WARN') end
  core.notify(REQUEST, arg ~= '' and tonumber(arg) or vim.NIL, o.bang)
end

--- Start: `opts` from the review's feature (request: the notification that asks the server).
---@param opts { request: string }
function M.setup(opts)
  REQUEST = opts.request
end

function M.stop() end

return M
