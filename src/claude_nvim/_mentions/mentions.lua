-- claude_nvim.mentions: @-mentions to Claude, made by :ClaudeNvimSend and :ClaudeNvimAdd
-- (claude_nvim.user_commands); the server sends each to one Claude (the one whose terminal the user
-- was in last). Lifecycle: setup(opts) / stop(); opts (from MentionsFeature, beside it): event.
local api = vim.api
local core = require('claude_nvim.core')
local M = {}
local EVENT  -- set by M.setup, from MentionsFeature

local function warn(msg) core.tell(msg, 'WARN') end

-- Terminal buffers the user was in, most recent first: the server sends a mention to the
-- Claude running in the first of them that has one (several Claudes may share this Neovim).
local recent = {}
local MAX_RECENT = 16

local function visited(args)
  if vim.bo[args.buf].buftype ~= 'terminal' then return end
  for i = #recent, 1, -1 do
    if recent[i] == args.buf then table.remove(recent, i) end
  end
  table.insert(recent, 1, args.buf)
  recent[MAX_RECENT + 1] = nil
end

-- What the Neovim plugin calls each Claude it runs, by terminal buffer ("Claude 2 · fix the
-- parser"), for the server's "sent to ..." (string keys: msgpack would make a list of it).
local function labels()
  local found = vim.empty_dict()
  for _, buf in ipairs(api.nvim_list_bufs()) do
    local label = vim.bo[buf].buftype == 'terminal' and vim.b[buf].claude_nvim_label
    if type(label) == 'string' then found[tostring(buf)] = label end
  end
  return found
end

-- Send `mentions` (one, or a list of them) to one Claude.
local function send(mentions)
  local live = {}
  for _, buf in ipairs(recent) do
    if api.nvim_buf_is_valid(buf) then live[#live + 1] = buf end
  end
  recent = live
  if not core.notify(EVENT, mentions, recent, labels()) then
    warn('the claude-nvim server is not running')
  end
end

--- The terminal buffers running a job: {buf, pid, name, label} (a Claude's pid descends from
--- one); label: what the Neovim plugin calls the Claude it runs there ("Claude 2"). A terminal
--- whose job ended keeps its pid, which a later process may get: it is not one of them.
---@return {buf: integer, pid: integer, name: string, label: string|nil}[]
function M.terminals()
  local found = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    -- (A held Claude descends from its holder: claude_nvim_pid, set by the Neovim plugin.)
    local pid = vim.bo[buf].buftype == 'terminal'
      and (vim.b[buf].claude_nvim_pid or vim.b[buf].terminal_job_pid)
    local chan = pid and vim.bo[buf].channel or 0
    if chan > 0 and vim.fn.jobwait({ chan }, 0)[1] == -1 then  -- -1: still running
      local n = vim.b[buf].claude_nvim_terminal
      found[#found + 1] = { buf = buf, pid = pid, name = api.nvim_buf_get_name(buf),
                            label = n and ('Claude ' .. n) or nil }
    end
  end
  return found
end

--- Lines `first`..`last` (1-based) of the file of `buf`.
---@param buf integer
---@param first integer
---@param last integer
function M.send_lines(buf, first, last)
  if not api.nvim_buf_is_valid(buf) then return end
  send({ filePath = api.nvim_buf_get_name(buf), lineStart = first - 1, lineEnd = last - 1 })
end

-- The mention of the file or directory `path`, or of lines `first`..`last` of the file
-- (1-based, as typed); or nil and why not.
local function mention_of(path, first, last)
  path = core.absolute(path)
  local stat = (vim.uv or vim.loop).fs_stat(path)  -- not isdirectory(): it expands $VARS
  if stat == nil then return nil, 'no such file or directory: ' .. path end
  if stat.type == 'directory' then return { filePath = (path:gsub('/$', '')) } end
  local start, stop = tonumber(first), tonumber(last or first)
  if first and (not start or not stop or start < 1 or stop < start) then
    return nil, 'line numbers must be 1-based, start <= end: '
      .. table.concat({ tostring(first), tostring(last or '') }, ' ')
  end
  return { filePath = path, lineStart = start and start - 1, lineEnd = stop and stop - 1 }
end

--- The file or directory `path`, or lines `first`..`last` of the file (1-based, as typed).
---@param path string
---@param first? integer
---@param last? integer
function M.add(path, first, last)
  local mention, why = mention_of(path, first, last)
  if mention == nil then return warn(why) end
  send(mention)
end

-- Mentions sent at once at most (Claude's prompt gets each).
M.MAX_MENTIONS = 50

--- Several at once, in one message: `items` = { { path, first, last }, ... } (a file tree's
--- nodes, a picker's picks, the quickfix list's entries; `what` names them), each file and range
--- once, the first MAX_MENTIONS of them. The user is told what was left out, and why.
---@param items {[1]: string, [2]: integer|nil, [3]: integer|nil}[]
---@param what string
function M.add_all(items, what)
  local mentions, seen, refused = {}, {}, {}
  for _, item in ipairs(items) do
    local mention, why = mention_of(item[1], item[2], item[3])
    local key = mention and table.concat({ mention.filePath, tostring(mention.lineStart),
                                           tostring(mention.lineEnd) }, '\0')
    if mention == nil then
      refused[#refused + 1] = why
    elseif not seen[key] then
      seen[key], mentions[#mentions + 1] = true, mention
    end
  end
  local told = {}
  if #refused > 0 then
    local more = #refused > 1 and (' (and ' .. (#refused - 1) .. ' more)') or ''
    told[#told + 1] = refused[1] .. more
  end
  if #mentions > M.MAX_MENTIONS then
    told[#told + 1] = ('%d %s: the first %d sent'):format(#mentions, what or 'mentions',
                                                        M.MAX_MENTIONS)
    mentions = vim.list_slice(mentions, 1, M.MAX_MENTIONS)
  end
  if #told > 0 then warn(table.concat(told, '; ')) end
  if #mentions > 0 then send(mentions) end
end

--- Start following the terminals the user visits: `opts.event`, the notification's name.
---@param opts {event: string}
function M.setup(opts)
  EVENT = opts.event
  local group = api.nvim_create_augroup('claude_nvim_mentions', { clear = true })
  api.nvim_create_autocmd({ 'BufEnter', 'TermEnter' }, { group = group, callback = visited })
  local current = api.nvim_get_current_buf()
  if vim.bo[current].buftype == 'terminal' then visited({ buf = current }) end
end

--- Stop following them.
function M.stop()
  pcall(api.nvim_del_augroup_by_name, 'claude_nvim_mentions')
end

return M
