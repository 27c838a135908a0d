-- claude-nvim's commands, defined at start-up; the work is in lua/claude_nvim/ (loaded on use).
if vim.g.loaded_claude_nvim_plugin then return end
vim.g.loaded_claude_nvim_plugin = true

local function command(name, fn, opts)
  vim.api.nvim_create_user_command(name, fn, opts)
end
local function plugin() return require('claude_nvim') end
local function terminal() return require('claude_nvim.terminal') end

command('ClaudeNvim', function(o) terminal().toggle(o.fargs) end,
  { nargs = '*', desc = 'claude-nvim: show or hide the current Claude (args go to claude)' })
command('ClaudeNvimNew', function(o) terminal().new(o.fargs) end,
  { nargs = '*', desc = 'claude-nvim: start another Claude, in the Claude window (args go to '
    .. 'claude)' })
command('ClaudeNvimSwitch', function(o) terminal().switch(o.fargs[1]) end,
  { nargs = '?', bar = true, complete = function() return terminal().numbers() end,
    desc = 'claude-nvim: to Claude N (claude-nvim://N), else the next, in the Claude window' })
command('ClaudeNvimFocus', function() terminal().focus() end,
  { desc = 'claude-nvim: to the current Claude, or from it back' })
command('ClaudeNvimSend', function(o) plugin().send(o) end,
  { range = true, desc = 'claude-nvim: send the selected lines (or this line) to Claude' })
command('ClaudeNvimAdd', function(o) plugin().add(o) end,
  { nargs = '+', complete = 'file', desc = 'claude-nvim: send a file or directory to Claude' })
command('ClaudeNvimDiffAccept', function() plugin().diff('accept') end,
  { desc = "claude-nvim: accept Claude's proposed change shown here" })
command('ClaudeNvimDiffDeny', function() plugin().diff('deny') end,
  { desc = "claude-nvim: reject Claude's proposed change shown here" })
command('ClaudeNvimInstall', function() plugin().install() end,
  { desc = 'claude-nvim: (re)install its Python part privately, under stdpath("data")' })
