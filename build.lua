-- Make claude-nvim's private install (a venv under stdpath('data')/claude-nvim/ holding this
-- checkout and opts.packages; install.py does it) and the help tags. lazy.nvim runs this file
-- by itself, in a coroutine: each step is yielded once (one line in lazy's log). Other plugin
-- managers' build hooks, or you, run `nvim -l build.lua [python]` in this directory. The
-- options: python is that argument, else opts.python; both it and opts.packages come from
-- lazy.nvim's spec, else vim.g.claude_nvim_opts (setup() sets it), else $CLAUDE_NVIM_PYTHON.
local root = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h')
local install = dofile(root .. '/lua/claude_nvim/install.lua')

-- This plugin's opts in lazy.nvim's spec, when lazy.nvim runs us.
local function spec_opts()
  local ok, config = pcall(require, 'lazy.core.config')
  if not ok then return nil end
  for _, plugin in pairs(config.plugins or {}) do
    if plugin.dir and vim.fn.fnamemodify(plugin.dir, ':p:h') == root then
      local got, opts = pcall(function()
        ---@diagnostic disable-next-line: unresolved-require (the user's plugin, when present)
        return require('lazy.core.plugin').values(plugin, 'opts', false)
      end)
      return got and type(opts) == 'table' and opts or nil
    end
  end
  return nil
end

local opts = spec_opts() or vim.g.claude_nvim_opts
opts = type(opts) == 'table' and opts or {}
local python = (_G.arg and _G.arg[1]) or opts.python or os.getenv('CLAUDE_NVIM_PYTHON')
if python == '' or python == vim.NIL then python = nil end
opts = { python = python, packages = opts.packages }

pcall(vim.cmd.helptags, vim.fn.fnameescape(root .. '/doc'))  -- :help claude-nvim

local co, main = coroutine.running()  -- LuaJIT: nil on the main thread; Lua 5.2+: main, true
if co == nil or main then  -- nvim -l build.lua: no one resumes us; wait for the install
  local outcome
  install.install(opts, function(line) io.stdout:write('claude-nvim: ', line, '\n') end,
    function(ok, why) outcome = { ok, why } end)
  vim.wait(30 * 60 * 1000, function() return outcome ~= nil end, 50)
  if not (outcome and outcome[1]) then
    io.stderr:write('claude-nvim: ', outcome and outcome[2] or 'the install timed out', '\n')
    os.exit(1)
  end
else
  local ok, why = install.install_yielding(opts, 'abort')
  if not ok then error(why) end
end
