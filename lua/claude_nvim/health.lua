-- :checkhealth claude_nvim: this Neovim reports its own state (its version, its server), and
-- `claude-nvim doctor --json --no-nvim`, run by the claude-nvim this plugin runs, checks the
-- rest (Python, claude, the lock directory, the tools). The doctor cannot ask this Neovim: it
-- waits for the doctor.
local M = {}

-- What each of claude's permission modes means for the diffs (claude 2.1.332's names).
M.DIFFS = {
  manual = 'each edit opens as a diff for you to accept or reject',
  default = 'each edit opens as a diff for you to accept or reject',
  plan = 'Claude plans first; once you approve, its edits open as diffs (in manual mode)',
  auto = 'edits are written without a diff; :ClaudeNvimReview shows each turn\'s changes',
  acceptEdits = 'edits are written without a diff; :ClaudeNvimReview shows each turn\'s changes',
  dontAsk = 'edits are written without a diff; :ClaudeNvimReview shows each turn\'s changes',
  bypassPermissions = 'nothing is asked; :ClaudeNvimReview shows each turn\'s changes',
}

-- claude's settings.json at `path`, or nil.
local function settings(path)
  local ok, lines = pcall(vim.fn.readfile, path, '', 10000)
  if not ok then return nil end
  local decoded, value = pcall(vim.json.decode, table.concat(lines, '\n'))
  return decoded and type(value) == 'table' and value or nil
end

--- The permission mode a Claude the plugin starts runs in, and where that comes from:
--- opts.claude.permission_mode, else claude's settings (the project's, then the user's), else
--- claude's own default (auto, in claude 2.1.332).
---@return string mode
---@return string from
function M.permission_mode()
  local opts = require('claude_nvim').config.claude or {}
  if opts.permission_mode then return opts.permission_mode, 'opts.claude.permission_mode' end
  local config = vim.env.CLAUDE_CONFIG_DIR
  if config == nil or config == '' then config = vim.fn.expand('~/.claude') end
  for _, path in ipairs({ '.claude/settings.local.json', '.claude/settings.json',
                          config .. '/settings.json' }) do
    local found = settings(path)
    local mode = found and type(found.permissions) == 'table' and found.permissions.defaultMode
    if type(mode) == 'string' then return mode, path end
  end
  return 'auto', "claude's default"
end

--- :checkhealth claude_nvim.
function M.check()
  local health = vim.health
  local plugin = require('claude_nvim')
  health.start('claude-nvim')
  local version = plugin.version()
  health.info('claude-nvim ' .. (version or '(version unknown)') .. ', this plugin')
  ---@diagnostic disable-next-line: call-non-callable (vim.version: a table with __call)
  local v = vim.version()
  local neovim = ('Neovim %d.%d.%d, this one'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.10') == 1 then
    health.ok(neovim)
  else
    health.error(neovim, { 'claude-nvim needs Neovim 0.10 or newer' })
  end
  local info = plugin.server()
  local port = info and tonumber(info.port)  -- none yet while a server sets this Neovim up
  if not info then
    health.ok('no claude-nvim server runs for it yet (:ClaudeNvim starts one)')
  elseif not port then
    health.ok('a claude-nvim server is starting for it')
  else
    health.ok(('a claude-nvim server runs for it on port %d, %d Claude(s) connected')
      :format(port, tonumber(info.clients) or 0))
  end
  local mode, from = M.permission_mode()
  health.info(('Claude starts in %s mode (%s): %s'):format(mode, from, M.DIFFS[mode]
    or 'see `claude --help`'))
  local cmd, where = plugin.command()
  if cmd == nil then
    return health.error('no claude-nvim to run', { where })
  end
  health.ok(table.concat(cmd, ' ') .. ' (' .. where .. ')')
  local doctor = vim.list_extend(vim.deepcopy(cmd), { 'doctor', '--json', '--no-nvim' })
  local ok, result = pcall(function() return vim.system(doctor, { text = true }):wait(30000) end)
  local found = ok and result.code ~= nil and pcall(vim.json.decode, result.stdout or '')
  if not found then
    local why = ok and vim.trim(result.stderr or '') or tostring(result)
    return health.error('`' .. table.concat(doctor, ' ') .. '` failed: ' .. why,
      { 'reinstall it: :ClaudeNvimInstall' })
  end
  for _, check in ipairs(vim.json.decode(result.stdout).checks or {}) do
    local runs = type(check.what) == 'string' and check.what:match('^claude%-nvim (%S+),')
    if runs and version and runs ~= version then
      health.warn(check.what, { 'this plugin is claude-nvim ' .. version .. ': run '
        .. ':ClaudeNvimInstall (or update the claude-nvim of opts.cmd or PATH) to match it' })
    elseif check.ok then
      health.ok(check.what)
    else
      health.error(check.what, check.fix ~= '' and { check.fix } or nil)
    end
  end
end

return M
