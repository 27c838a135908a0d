-- The private install: install.py, run by a Python 3.11+ found here, makes a venv under
-- stdpath('data')/claude-nvim/ holding this checkout and opts.packages. Run by build.lua
-- (lazy.nvim's coroutine, or `nvim -l build.lua`) and :ClaudeNvimInstall, never blocking Neovim.
-- It needs nothing else of the plugin: build.lua loads it by its path.
local M = {}

local ROOT = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h:h')
local PYTHONS = { 'python3.14', 'python3.13', 'python3.12', 'python3.11', 'python3' }
local VERSION = 'import sys; print("%d.%d.%d" % sys.version_info[:3]); '
  .. 'sys.exit(sys.version_info < (3, 11))'

--- The venv of the private install.
---@return string
function M.venv() return vim.fn.stdpath('data') .. '/claude-nvim/venv' end

-- Calls `done(path)` with the first Python of 3.11 or newer (`python` if given, and it must
-- be), or `done(nil, advice)`.
---@param python string|nil
---@param done fun(path: string|nil, advice: string|nil)
local function find_python(python, done)
  local candidates, seen = {}, {} ---@type { [1]: string, [2]: string }[], string[]
  for _, name in ipairs(python and { python } or PYTHONS) do
    if vim.fn.executable(name) == 1 then
      candidates[#candidates + 1] = { name, vim.fn.exepath(name) }
    elseif python then
      seen[#seen + 1] = name .. ' (not found)'
    end
  end
  ---@param i integer
  local function try(i)
    local candidate = candidates[i]
    if candidate == nil then
      return done(nil, 'claude-nvim needs Python 3.11 or newer (found: '
        .. (#seen > 0 and table.concat(seen, ', ') or 'no python3') .. '). Install one (your '
        .. 'package manager, https://www.python.org/downloads/ or `uv python install 3.12`)'
        .. (python and '' or ', or name it in opts.python'))
    end
    vim.system({ candidate[2], '-c', VERSION }, { text = true }, vim.schedule_wrap(function(r)
      if r.code == 0 then return done(candidate[2]) end
      local version = vim.trim(r.stdout or '')
      seen[#seen + 1] = candidate[1] .. ' ' .. (version ~= '' and version or '?')
      try(i + 1)
    end))
  end
  try(1)
end

-- A package as pip should get it: local paths absolute (pip reads them from its own cwd).
local function package_spec(spec)
  if spec:match('^[~./]') then
    return (vim.fn.fnamemodify(vim.fn.expand(spec), ':p'):gsub('(.)/$', '%1'))
  end
  return spec
end

--- Make or update the private install with this checkout and `opts.packages`, with
--- `opts.python` (else the first of python3.14 ... python3.11, python3). `on_step(line)` gets
--- each step's line as it starts, the last one saying what was installed; `on_done(ok, why)`
--- the outcome (why: what went wrong). Both run on Neovim's main loop. Returns a function that
--- stops the install.
---@param opts claude_nvim.Config
---@param on_step fun(line: string)
---@param on_done fun(ok: boolean, why?: string)
---@return fun() stop
function M.install(opts, on_step, on_done)
  local process, stopped
  find_python(opts.python, function(python, advice)
    if python == nil then return on_done(false, advice) end
    if stopped then return on_done(false, 'stopped') end
    local cmd = { python, ROOT .. '/install.py', '--venv', M.venv() }
    for _, spec in ipairs(opts.packages or {}) do
      vim.list_extend(cmd, { '--package', package_spec(spec) })
    end
    local pending = ''
    process = vim.system(cmd, {
      text = true,
      stdout = function(_, data)  -- whole lines only: a step is one line
        pending = pending .. (data or '')
        while true do
          local line, rest = pending:match('^(.-)\n(.*)$')
          if line == nil then break end
          pending = rest
          vim.schedule(function() on_step(line) end)
        end
      end,
    }, vim.schedule_wrap(function(result)
      if result.code == 0 then return on_done(true) end
      local lines = vim.split(vim.trim(result.stderr or ''), '\n')
      local tail = table.concat(lines, '\n', math.max(1, #lines - 19))  -- pip's say, then ours
      on_done(false, tail ~= '' and tail or ('install.py exited with ' .. result.code))
    end))
  end)
  return function()
    stopped = true
    if process then process:kill('sigterm') end
  end
end

--- The same, in a coroutine that someone resumes now and then (lazy.nvim's build runner): it
--- yields each step's line once and nothing while a step runs. `aborted` is what a resume
--- passes to stop it (lazy.nvim's "abort"). Returns true, or false and why.
---@param opts claude_nvim.Config
---@param aborted any
---@return boolean ok
---@return string? why
---@async
function M.install_yielding(opts, aborted)
  local steps, outcome = {}, nil
  local stop = M.install(opts, function(line) steps[#steps + 1] = line end,
    function(ok, message) outcome = { ok, message } end)
  while true do
    if #steps > 0 then
      local resumed = coroutine.yield(table.remove(steps, 1))
      if resumed == aborted and aborted ~= nil then stop(); error('aborted') end
    elseif outcome then
      return outcome[1], outcome[2]
    elseif coroutine.yield() == aborted and aborted ~= nil then
      stop(); error('aborted')
    end
  end
  ---@diagnostic disable-next-line: missing-return (the loop above returns or raises)
end

local running = false

--- :ClaudeNvimInstall: install in the background; each step and the outcome as notifications.
---@param opts claude_nvim.Config
function M.start(opts)
  if running then return vim.notify('claude-nvim: the install runs already') end
  running = true
  M.install(opts, function(line) vim.notify('claude-nvim: ' .. line) end, function(ok, why)
    running = false
    if not ok then vim.notify('claude-nvim: the install failed: ' .. why, vim.log.levels.ERROR) end
  end)
end

return M
