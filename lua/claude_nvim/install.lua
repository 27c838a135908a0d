-- The private install: a venv under stdpath('data')/claude-nvim/ with this checkout installed.
-- Run by build.lua (lazy.nvim's coroutine, or `nvim -l build.lua`) and :ClaudeNvimInstall.
-- It needs nothing else of the plugin: build.lua loads it by its path.
local M = {}

local ROOT = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h:h')
local PYTHONS = { 'python3.14', 'python3.13', 'python3.12', 'python3.11', 'python3' }
local VERSION = 'import sys; print("%d.%d.%d" % sys.version_info[:3]); '
  .. 'sys.exit(sys.version_info < (3, 11))'

--- The venv of the private install.
function M.venv() return vim.fn.stdpath('data') .. '/claude-nvim/venv' end

-- The last line of a command's output worth showing.
local function last_line(result)
  local text = vim.trim((result.stderr or '') ~= '' and result.stderr or (result.stdout or ''))
  local lines = vim.split(text, '\n')
  return lines[#lines] or ''
end

-- A Python of 3.11 or newer: `python` if given (and it must be), else the first candidate.
local function find_python(python, run)
  local seen = {}
  for _, name in ipairs(python and { python } or PYTHONS) do
    if vim.fn.executable(name) == 1 then
      local result = run({ vim.fn.exepath(name), '-c', VERSION })
      local version = vim.trim(result.stdout or '')
      if result.code == 0 then return vim.fn.exepath(name), version end
      seen[#seen + 1] = name .. ' ' .. (version ~= '' and version or '?')
    elseif python then
      seen[#seen + 1] = name .. ' (not found)'
    end
  end
  return nil, 'claude-nvim needs Python 3.11 or newer (found: '
    .. (#seen > 0 and table.concat(seen, ', ') or 'no python3') .. '). Install one (your '
    .. 'package manager, https://www.python.org/downloads/ or `uv python install 3.12`)'
    .. (python and '' or ', or name it in opts.python')
end

--- Make the private install. `run(cmd)` runs a command to its end and returns vim.system's
--- result; `say(msg)` reports progress. Returns true and the installed version, or false and
--- what went wrong (one message saying what to do).
function M.install(python, run, say)
  local found, version = find_python(python, run)
  if found == nil then return false, version end
  local venv = M.venv()
  local venv_python = venv .. '/bin/python'
  if vim.fn.executable(venv_python) == 0 then
    say('creating a venv in ' .. venv .. ' (Python ' .. version .. ')')
    vim.fn.mkdir(vim.fn.fnamemodify(venv, ':h'), 'p')
    local made = run({ found, '-m', 'venv', venv })
    if made.code ~= 0 then
      return false, found .. ' -m venv failed: ' .. last_line(made)
        .. ' (on Debian/Ubuntu: apt install python3-venv)'
    end
  end
  say('installing claude-nvim from ' .. ROOT .. ' (pip)')
  -- A local directory is always rebuilt and reinstalled: an update re-installs.
  local installed = run({ venv_python, '-m', 'pip', 'install', '--disable-pip-version-check',
                          '--quiet', '--upgrade', ROOT })
  if installed.code ~= 0 then return false, 'pip install failed: ' .. last_line(installed) end
  local check = run({ venv .. '/bin/claude-nvim', '--version' })
  if check.code ~= 0 then return false, 'claude-nvim --version failed: ' .. last_line(check) end
  return true, vim.trim(check.stdout) .. ' installed in ' .. venv
end

--- Run a command synchronously (`nvim -l build.lua`).
function M.run_sync(cmd) return vim.system(cmd, { text = true }):wait() end

--- Run a command inside a coroutine that someone resumes now and then (lazy.nvim's build
--- runner, or start()'s timer): it yields `msg` until the command is done, never blocking.
function M.run_yielding(msg)
  return function(cmd)
    local done
    vim.system(cmd, { text = true }, function(result) done = result end)
    while not done do coroutine.yield(msg()) end
    return done
  end
end

local running = false

--- :ClaudeNvimInstall: install in the background; progress and the outcome as notifications.
function M.start(python)
  if running then return vim.notify('claude-nvim: the install runs already') end
  running = true
  local shown
  local current = 'installing claude-nvim'
  local task = coroutine.create(function()
    return M.install(python, M.run_yielding(function() return current end),
      function(msg) current = msg; coroutine.yield(msg) end)
  end)
  local timer = assert((vim.uv or vim.loop).new_timer())
  timer:start(0, 100, vim.schedule_wrap(function()
    if coroutine.status(task) == 'dead' then return end
    local resumed, a, b = coroutine.resume(task)
    if coroutine.status(task) ~= 'dead' then
      if resumed and a and a ~= shown then
        shown = a
        vim.notify('claude-nvim: ' .. a)
      end
      return
    end
    timer:stop()
    timer:close()
    running = false
    if not resumed then
      vim.notify('claude-nvim: the install failed: ' .. tostring(a), vim.log.levels.ERROR)
    elseif a then
      vim.notify('claude-nvim: ' .. b)
    else
      vim.notify('claude-nvim: ' .. b, vim.log.levels.ERROR)
    end
  end))
end

return M
