-- claude_nvim.commands: the user commands a server offers, defined here once for both ways of
-- running claude-nvim. The server installs this module and, at setup, defines those no Neovim
-- plugin has; the Neovim plugin (plugin/claude_nvim.lua) reads this file at start-up, before
-- any server runs, and defines them with its own way to reach one (starting it, and Claude).
-- :ClaudeNvimSend (the selected lines, or this line) and :ClaudeNvimAdd {path} [start] [end]
-- take what to mention here and now; claude_nvim.mentions sends it. :ClaudeNvimDiffAccept and
-- :ClaudeNvimDiffDeny give the verdict on the diff shown here, :ClaudeNvimHunkAccept and
-- :ClaudeNvimHunkReject on its hunks (claude_nvim.diffs); :ClaudeNvimReview and
-- :ClaudeNvimRevert review Claude's turns (claude_nvim.review).
-- Lifecycle (as the server's module): setup(opts) / stop().
local api = vim.api
local M = {}

local function file_buffer(buf)
  return vim.bo[buf].buftype == '' and api.nvim_buf_get_name(buf) ~= ''
    and not vim.b[buf].claude_nvim_proposal
end

-- The verdict on the diff shown here: `name` of claude_nvim.diffs, while a server runs.
local function verdict(how, name)
  local core, diffs = package.loaded['claude_nvim.core'], package.loaded['claude_nvim.diffs']
  if not (type(core) == 'table' and core.live_server and core.live_server() and diffs) then
    return how.tell('no pending diff here', 'WARN')
  end
  diffs[name]()
end

-- Accept or reject Claude's hunks on lines `o.line1`..`o.line2` of the diff shown here.
local function hunk(how, action, o)
  local core, diffs = package.loaded['claude_nvim.core'], package.loaded['claude_nvim.diffs']
  if not (type(core) == 'table' and core.live_server and core.live_server() and diffs) then
    return how.tell('no pending diff here', 'WARN')
  end
  diffs.hunk(action, o.line1, o.line2)
end

-- `fn` of claude_nvim.review with `...`, while a server runs; else `nothing` is told.
local function review(how, nothing, fn, ...)
  local core, mod = package.loaded['claude_nvim.core'], package.loaded['claude_nvim.review']
  if not (type(core) == 'table' and core.live_server and core.live_server() and mod) then
    return how.tell(nothing, 'WARN')
  end
  mod[fn](...)
end

-- The commands: name -> {callback, options}. `how.tell(msg, level)` tells the user;
-- `how.mention(deliver)` calls deliver(claude_nvim.mentions) once a server can send.
local function commands(how)
  return {
    ClaudeNvimSend = { function(o)
      local buf = api.nvim_get_current_buf()
      if not file_buffer(buf) then return how.tell('not a file buffer: nothing to send', 'WARN') end
      local first, last = o.line1, o.line2
      if o.range == 0 then first = api.nvim_win_get_cursor(0)[1]; last = first end
      how.mention(function(mentions) mentions.send_lines(buf, first, last) end)
    end, { range = true, desc = 'claude-nvim: send the selected lines (or this line) to Claude' } },
    ClaudeNvimAdd = { function(o)
      local path = o.fargs[1]
      -- As Neovim's cwd is now: Claude may be started (and the cwd changed) before it is sent.
      if not path:match('^[/~]') then path = vim.fn.getcwd(-1, -1) .. '/' .. path end
      how.mention(function(mentions) mentions.add(path, o.fargs[2], o.fargs[3]) end)
    end, { nargs = '+', complete = 'file',
           desc = 'claude-nvim: send a file (or lines of it) or a directory to Claude' } },
    ClaudeNvimDiffAccept = { function() verdict(how, 'accept_current') end,
      { desc = "claude-nvim: accept Claude's proposed change shown here" } },
    ClaudeNvimDiffDeny = { function() verdict(how, 'deny_current') end,
      { desc = "claude-nvim: reject Claude's proposed change shown here" } },
    ClaudeNvimHunkAccept = { function(o) hunk(how, 'accept', o) end, { range = true,
      desc = "claude-nvim: keep Claude's change on this line (or in the range) of the diff" } },
    ClaudeNvimHunkReject = { function(o) hunk(how, 'reject', o) end, { range = true,
      desc = "claude-nvim: put the old text back in the proposal, on this line (or range)" } },
    ClaudeNvimReview = { function(o)
      review(how, 'nothing to review: no claude-nvim server runs', 'review_command', o.args)
    end, { nargs = '?', complete = function() return { 'list' } end,
           desc = "claude-nvim: review Claude's last turn (N: turn N; list: pick one)" } },
    ClaudeNvimRevert = { function(o)
      review(how, 'nothing to take back: no claude-nvim server runs', 'revert_command', o)
    end, { range = true, bang = true,
           desc = "claude-nvim: take back Claude's change here (!: the whole file)" } },
  }
end

--- Define the commands (see `commands` for `how`) that do not exist yet, or all with
--- `how.replace`; their names.
function M.define(how)
  local defined = {}
  for name, spec in pairs(commands(how)) do
    if how.replace or vim.fn.exists(':' .. name) ~= 2 then
      api.nvim_create_user_command(name, spec[1], spec[2])
      defined[#defined + 1] = name
    end
  end
  return defined
end

-- The server's: the commands it defined (a stopping server leaves a plugin's alone).
local defined = {}

function M.setup()
  local core = require('claude_nvim.core')
  defined = M.define({
    tell = core.tell,
    mention = function(deliver) core.guard(deliver)(package.loaded['claude_nvim.mentions']) end,
  })
end

function M.stop()
  -- A Neovim plugin loaded since has defined them its own way: they stay.
  if not vim.g.loaded_claude_nvim_plugin then
    for _, name in ipairs(defined) do pcall(api.nvim_del_user_command, name) end
  end
  defined = {}
end

return M
