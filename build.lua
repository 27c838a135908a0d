-- Make claude-nvim's private install (a venv under stdpath('data')/claude-nvim/ holding this
-- checkout). lazy.nvim runs this file by itself, in a coroutine (coroutine.yield(msg) shows
-- progress); other plugin managers' build hooks, or you, run `nvim -l build.lua [python]` in
-- this directory. The Python: that argument, else opts.python (lazy.nvim's spec, or
-- vim.g.claude_nvim_opts.python), else $CLAUDE_NVIM_PYTHON, else python3.13 ... python3.
local root = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h')
local install = dofile(root .. '/lua/claude_nvim/install.lua')

local function spec_python()
  local ok, config = pcall(require, 'lazy.core.config')
  if not ok then return nil end
  for _, plugin in pairs(config.plugins or {}) do
    if plugin.dir and vim.fn.fnamemodify(plugin.dir, ':p:h') == root then
      local got, opts = pcall(function()
        return require('lazy.core.plugin').values(plugin, 'opts', false)
      end)
      return got and type(opts) == 'table' and opts.python or nil
    end
  end
  return nil
end

local opts = vim.g.claude_nvim_opts
local python = (_G.arg and _G.arg[1]) or spec_python() or (type(opts) == 'table' and opts.python)
  or os.getenv('CLAUDE_NVIM_PYTHON')
if python == '' or python == vim.NIL then python = nil end

local co, main = coroutine.running()  -- LuaJIT: nil on the main thread; Lua 5.2+: main, true
if co == nil or main then  -- nvim -l build.lua: no one resumes us, so wait for each step
  local ok, message = install.install(python, install.run_sync, function(msg)
    io.stdout:write('claude-nvim: ', msg, '\n')
  end)
  io.stdout:write('claude-nvim: ', message, '\n')
  if not ok then os.exit(1) end
else
  local current = 'installing claude-nvim'
  local ok, message = install.install(python, install.run_yielding(function() return current end),
    function(msg) current = msg; coroutine.yield(msg) end)
  if not ok then error(message) end
  coroutine.yield(message)
end
