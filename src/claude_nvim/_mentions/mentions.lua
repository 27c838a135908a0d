-- claude_nvim.mentions: the user's commands that send a selection or a file to Claude as an
-- @-mention: :ClaudeNvimSend (the selected lines, or this line) and :ClaudeNvimAdd {path}
-- [start] [end]. Lifecycle: setup(opts) / stop(); opts (from MentionsFeature, beside it): event.
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

local function send(mention)
  local live = {}
  for _, buf in ipairs(recent) do
    if api.nvim_buf_is_valid(buf) then live[#live + 1] = buf end
  end
  recent = live
  if not core.notify(EVENT, mention, recent) then warn('the claude-nvim server is not running') end
end

-- The terminal buffers running a job: {buf, pid, name} (a Claude's pid descends from one).
function M.terminals()
  local found = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    local pid = vim.bo[buf].buftype == 'terminal' and vim.b[buf].terminal_job_pid
    if pid then found[#found + 1] = { buf = buf, pid = pid, name = api.nvim_buf_get_name(buf) } end
  end
  return found
end

function M.send(opts)
  if not core.is_editor(0) then return warn('not a file buffer: nothing to send') end
  local first, last = opts.line1, opts.line2
  if opts.range == 0 then first = api.nvim_win_get_cursor(0)[1]; last = first end
  send({ filePath = api.nvim_buf_get_name(0), lineStart = first - 1, lineEnd = last - 1 })
end

function M.add(opts)
  local args = opts.fargs
  local path = core.absolute(args[1])
  local stat = (vim.uv or vim.loop).fs_stat(path)  -- not isdirectory(): it expands $VARS
  if stat == nil then return warn('no such file or directory: ' .. path) end
  if stat.type == 'directory' then return send({ filePath = (path:gsub('/$', '')) }) end
  local start, stop = tonumber(args[2]), tonumber(args[3] or args[2])
  if args[2] and (not start or not stop or start < 1 or stop < start) then
    return warn('line numbers must be 1-based, start <= end: ' .. table.concat(args, ' ', 2))
  end
  send({ filePath = path, lineStart = start and start - 1, lineEnd = stop and stop - 1 })
end

-- The commands this server created: the Neovim plugin defines its own at start-up (they call
-- M.send and M.add), and a stopping server leaves those alone.
local created = {}

function M.setup(opts)
  EVENT = opts.event
  local group = api.nvim_create_augroup('claude_nvim_mentions', { clear = true })
  api.nvim_create_autocmd({ 'BufEnter', 'TermEnter' }, { group = group, callback = visited })
  local current = api.nvim_get_current_buf()
  if vim.bo[current].buftype == 'terminal' then visited({ buf = current }) end
  created = core.create_commands({
    ClaudeNvimSend = { function(o) core.guard(M.send)(o) end, { range = true,
      desc = 'claude-nvim: send the selected lines (or this line) to Claude' } },
    ClaudeNvimAdd = { function(o) core.guard(M.add)(o) end, { nargs = '+', complete = 'file',
      desc = 'claude-nvim: send a file or directory to Claude' } },
  })
end

function M.stop()
  for _, name in ipairs(created) do pcall(api.nvim_del_user_command, name) end
  created = {}
  pcall(api.nvim_del_augroup_by_name, 'claude_nvim_mentions')
end

return M
