-- claude_nvim.mentions: the user's commands that send a selection or a file to Claude as an
-- @-mention: :ClaudeNvimSend (the selected lines, or this line) and :ClaudeNvimAdd {path}
-- [start] [end]. Lifecycle: setup(opts) / stop(); opts (from mentions.py): event.
local api = vim.api
local core = require('claude_nvim.core')
local M = {}
local EVENT  -- set by M.setup, from mentions.py

local function warn(msg) vim.notify('claude-nvim: ' .. msg, vim.log.levels.WARN) end

local function send(mention)
  if not core.notify(EVENT, mention) then warn('the claude-nvim server is not running') end
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
end

return M
