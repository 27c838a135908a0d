-- claude_nvim.tools.claude_nvim_plan: a Claude's plan, as it asks to leave plan mode, in a
-- Markdown buffer of its own tab, for the user to read with their own tools and answer:
-- :ClaudeNvimPlanApprove [mode] approves; lines written into the buffer are comments, sent
-- back with :w (each after the plan lines it concerns, which are quoted), and Claude keeps
-- planning; :q leaves it to claude's own dialog. The answer goes to the server as a reply
-- (claude_nvim._lsp.replies); the buffer closes once the question is answered, either way.
local api = vim.api
local core = require('claude_nvim.core')
local M = {}

local REPLY = 'claude_nvim_reply'
---@class claude_nvim.Plan
---@field buf integer its buffer
---@field lines string[] the plan's
---@field label string the Claude's
---@field modes string[] those :ClaudeNvimPlanApprove takes

---@type table<integer, claude_nvim.Plan>
local plans = {}  -- reply id -> the plan
---@type integer?
local latest = nil

local function tell(msg, level) core.tell(msg, level or 'INFO') end

-- The question `id` is answered (`verdict`, nil: answered elsewhere): its buffer goes.
local function settle(id, verdict)
  local plan = plans[id]
  if plan == nil then return end
  plans[id] = nil
  if latest == id then latest = nil end
  if verdict ~= nil then core.notify(REPLY, id, true, verdict) end
  if api.nvim_buf_is_valid(plan.buf) then
    vim.b[plan.buf].claude_nvim_plan = nil
    vim.bo[plan.buf].modified = false
    vim.schedule(function()
      if api.nvim_buf_is_valid(plan.buf) then
        pcall(api.nvim_buf_delete, plan.buf, { force = true })
      end
    end)
  end
end

local function quote(lines)
  return table.concat(vim.tbl_map(function(line) return '> ' .. line end, lines), '\n')
end

-- The user's comments in the plan buffer: each run of lines they added or changed, after the
-- plan lines it concerns (quoted); nil when there is none.
local function feedback(plan)
  local now = api.nvim_buf_get_lines(plan.buf, 0, -1, false)
  local hunks = vim.diff(table.concat(plan.lines, '\n') .. '\n', table.concat(now, '\n') .. '\n',
                         { result_type = 'indices' })
  local parts = {}
  for _, h in ipairs(hunks) do
    local old_start, old_count, new_start, new_count = h[1], h[2], h[3], h[4]
    local about = old_count > 0 and vim.list_slice(plan.lines, old_start, old_start + old_count - 1)
      or (old_start > 0 and { plan.lines[old_start] } or {})
    local said = vim.list_slice(now, new_start, new_start + new_count - 1)
    if #said > 0 and vim.trim(table.concat(said, '\n')) ~= '' then
      parts[#parts + 1] = (#about > 0 and (quote(about) .. '\n\n') or '')
        .. table.concat(said, '\n')
    elseif old_count > 0 then
      parts[#parts + 1] = quote(about) .. '\n\n(the user struck these lines out)'
    end
  end
  if #parts == 0 then return nil end
  return 'The user reviewed your plan in their editor and sent it back with comments, each '
    .. 'after the lines of the plan it concerns. Keep planning with this feedback, then present '
    .. 'the revised plan.\n\n' .. table.concat(parts, '\n\n---\n\n')
end

--- Show `plan` (the text of Claude `label`'s plan) for review; the verdict is the reply
--- `id`: { verdict = 'approve', mode = ... } | { verdict = 'comment', message = ... } |
--- { verdict = 'dialog' }. `modes`: those :ClaudeNvimPlanApprove takes.
---@param id integer
---@param plan string
---@param label string
---@param modes string[]
function M.review(id, plan, label, modes)
  local lines = vim.split(plan:gsub('\n$', ''), '\n', { plain = true })
  local buf = api.nvim_create_buf(false, true)
  vim.bo[buf].buftype = 'acwrite'
  vim.bo[buf].bufhidden = 'hide'  -- :q leaves it (modified or not); it is answered then
  vim.bo[buf].swapfile = false
  pcall(api.nvim_buf_set_name, buf, ('claude-nvim://plan/%d (%s)'):format(id, label))
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modified = false
  vim.bo[buf].filetype = 'markdown'
  vim.b[buf].claude_nvim_plan = id
  plans[id], latest = { buf = buf, lines = lines, label = label, modes = modes }, id
  vim.cmd('tab split')
  local win = api.nvim_get_current_win()
  if vim.fn.exists('+winfixbuf') == 1 then vim.wo[win].winfixbuf = false end
  api.nvim_win_set_buf(win, buf)
  vim.wo[win].winbar = ('%s\'s plan · :ClaudeNvimPlanApprove [mode] approves · your comments '
    .. 'in it + :w send it back · :q: claude\'s own dialog %%<'):format(label:gsub('%%', '%%%%'))
  api.nvim_create_autocmd('BufWriteCmd', { buffer = buf, callback = core.guard(function()
    local message = plans[id] and feedback(plans[id])
    if message == nil then
      return tell('no comments in the plan: write them beside its lines, or '
        .. ':ClaudeNvimPlanApprove', 'WARN')
    end
    settle(id, { verdict = 'comment', message = message })
    tell(('sent %s\'s plan back with your comments'):format(label))
  end) })
  api.nvim_create_autocmd('BufHidden', { buffer = buf, callback = function()
    vim.schedule(function()
      if plans[id] and #vim.fn.win_findbuf(buf) == 0 then
        settle(id, { verdict = 'dialog' })
        tell(('%s\'s plan: answer in its own dialog'):format(label))
      end
    end)
  end })
end

--- :ClaudeNvimPlanApprove [mode]: approve the plan shown here (else the latest one).
---@param mode string '' for claude's default
function M.approve(mode)
  local id = vim.b.claude_nvim_plan or latest
  local plan = id and plans[id]
  if plan == nil then return tell('no plan of Claude\'s waits for approval', 'WARN') end
  mode = mode ~= '' and mode or nil
  if mode and not vim.tbl_contains(plan.modes, mode) then
    return tell(('no mode %s: %s'):format(mode, table.concat(plan.modes, ', ')), 'WARN')
  end
  settle(id, { verdict = 'approve', mode = mode })
  tell(('approved %s\'s plan%s'):format(plan.label, mode and (', in ' .. mode .. ' mode') or ''))
end

--- The question went away (answered in claude's dialog, or timed out): the buffer closes.
---@param id integer
function M.cancel(id)
  if plans[id] == nil then return nil end
  settle(id, nil)
  return 'the review of the plan'
end

return M
