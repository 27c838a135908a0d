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
  { nargs = '?', bar = true,
    complete = function() return vim.list_extend(terminal().numbers(), { 'next' }) end,
    desc = 'claude-nvim: to Claude N (or the next), else the one picked, in the Claude window' })
command('ClaudeNvimRename', function(o) terminal().rename(o.args) end,
  { nargs = '?', desc = 'claude-nvim: name the current Claude (no name: by its title again)' })
command('ClaudeNvimStop', function(o) terminal().stop(o.bang) end,
  { bang = true, bar = true,
    desc = "claude-nvim: end the current Claude (!: all of this project's)" })
command('ClaudeNvimFocus', function() terminal().focus() end,
  { desc = 'claude-nvim: to the current Claude, or from it back' })
command('ClaudeNvimResume', function(o) require('claude_nvim.sessions').resume(o.args) end,
  { nargs = '?', desc = "claude-nvim: go on with one of this project's past conversations" })
command('ClaudeNvimPrompt', function(o) require('claude_nvim.prompt').open(o.args) end,
  { nargs = '?', range = true,
    complete = function(lead) return require('claude_nvim.prompt').names(lead) end,
    desc = 'claude-nvim: write a prompt to the current Claude in a buffer (:w sends it)' })
command('ClaudeNvimInstall', function() plugin().install() end,
  { desc = 'claude-nvim: (re)install its Python part privately, under stdpath("data")' })

-- The commands a server offers (:ClaudeNvimSend, :ClaudeNvimAdd, :ClaudeNvimDiffAccept,
-- :ClaudeNvimDiffDeny, :ClaudeNvimHunkAccept, :ClaudeNvimHunkReject, :ClaudeNvimReview,
-- :ClaudeNvimRevert) are defined once, in the server's Lua in this checkout; here with the
-- plugin's way to reach a server: start one (and Claude) when none runs.
local root = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h')
dofile(root .. '/src/claude_nvim/_core/user_commands.lua').define({
  replace = true,  -- a server's, if one ran before this plugin was loaded
  tell = function(msg, level) plugin().tell(msg, level) end,
  mention = function(deliver) plugin().mention(deliver) end,
  live = function(name) return plugin().live(name) end,
})

-- What the Claudes are doing (the server's hooks): the bars show it, and the user is told
-- when one they cannot see waits or is done, or when one that waits goes out of sight
-- (claude_nvim.claudes); whether Neovim has the focus, from the start.
local group = vim.api.nvim_create_augroup('claude_nvim_claudes', { clear = true })
vim.api.nvim_create_autocmd('User', { group = group,
  pattern = { 'ClaudeNvimWorking', 'ClaudeNvimWaiting', 'ClaudeNvimDone' },
  callback = function(ev) require('claude_nvim.claudes').changed(ev.data) end })
vim.api.nvim_create_autocmd({ 'FocusGained', 'FocusLost' }, { group = group,
  callback = function(ev) require('claude_nvim.claudes').focus(ev.event == 'FocusGained') end })
-- A Claude the user saw start waiting is told of once it is out of sight (these events may
-- hide it; the check runs once they are over: a closing window is still in its tab before).
vim.api.nvim_create_autocmd({ 'WinClosed', 'BufWinLeave', 'TabLeave' }, { group = group,
  callback = function()
    if package.loaded['claude_nvim.claudes'] then
      vim.schedule(function() require('claude_nvim.claudes').out_of_sight() end)
    end
  end })

-- "Fix with Claude" in the code actions of a file with diagnostics (opts.code_actions): its
-- in-process language server attaches at the buffer's first diagnostics, not before.
vim.api.nvim_create_autocmd('DiagnosticChanged', { group = group, callback = function(ev)
  if vim.b[ev.buf].claude_nvim_code_actions or plugin().config.code_actions == false
    or #(ev.data and ev.data.diagnostics or {}) == 0 then return end
  require('claude_nvim.code_action').attach(ev.buf)
end })

-- The states' highlight groups, for statuslines (status_highlight() names the one in force);
-- default: a colorscheme's or the user's own win. Again after :colorscheme, which clears them.
local function highlights()
  for name, link in pairs({ ClaudeNvimWorking = 'DiagnosticInfo',
                            ClaudeNvimWaiting = 'DiagnosticWarn', ClaudeNvimDone = 'DiagnosticOk',
                            ClaudeNvimToReview = 'DiagnosticHint' }) do
    vim.api.nvim_set_hl(0, name, { link = link, default = true })
  end
end
highlights()
vim.api.nvim_create_autocmd('ColorScheme', { group = group, callback = highlights })

-- <Plug>(claude-nvim-NAME) for the commands a user maps; in Visual mode those that take a
-- range get the selected lines (':' puts '<,'> before the command).
for name, cmd in pairs({ toggle = 'ClaudeNvim', focus = 'ClaudeNvimFocus', new = 'ClaudeNvimNew',
                         switch = 'ClaudeNvimSwitch', send = 'ClaudeNvimSend',
                         add = 'ClaudeNvimAdd', ['diff-accept'] = 'ClaudeNvimDiffAccept',
                         ['diff-deny'] = 'ClaudeNvimDiffDeny',
                         ['hunk-accept'] = 'ClaudeNvimHunkAccept',
                         ['hunk-reject'] = 'ClaudeNvimHunkReject', review = 'ClaudeNvimReview',
                         revert = 'ClaudeNvimRevert', ['revert-file'] = 'ClaudeNvimRevert!' }) do
  local lhs, desc = '<Plug>(claude-nvim-' .. name .. ')', 'claude-nvim: :' .. cmd
  vim.keymap.set('n', lhs, '<Cmd>' .. cmd .. '<CR>', { desc = desc })
  if name == 'send' or name == 'add' or name == 'revert' then
    vim.keymap.set('x', lhs, ':' .. cmd .. '<CR>', { silent = true, desc = desc })
  end
end

-- With opts.start_server = 'startup' the server starts once a UI is up (claude outside Neovim
-- finds it); by default at first use. The Claudes this project's last Neovim left running
-- (opts.claude.outlive) are found at once, and the server with them, so they connect here.
local function ahead()
  plugin().start_ahead()
  if terminal().adopt() then plugin().serve() end
end
if vim.v.vim_did_enter == 1 and #vim.api.nvim_list_uis() > 0 then
  vim.schedule(ahead)
else
  vim.api.nvim_create_autocmd('UIEnter', { once = true, callback = function()
    vim.schedule(ahead)
  end })
end
