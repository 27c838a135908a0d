-- :checkhealth claude_nvim: `claude-nvim doctor --json` (the one place the checks are made),
-- run by the claude-nvim this plugin runs, against this Neovim.
local M = {}

function M.check()
  local health = vim.health
  health.start('claude-nvim')
  local cmd, where = require('claude_nvim').command()
  if cmd == nil then
    return health.error('no claude-nvim to run', { where })
  end
  health.ok(table.concat(cmd, ' ') .. ' (' .. where .. ')')
  -- This Neovim cannot answer the doctor while it waits for it: it gives its state (as the
  -- doctor's RUNNING_LUA would find it) on the command line.
  local v, info = vim.version(), require('claude_nvim').server()
  local state = { v.major, v.minor, v.patch, info and info.port or vim.NIL,
                  info and info.clients or 0 }
  local doctor = vim.list_extend(vim.deepcopy(cmd), { 'doctor', '--json', '--nvim',
    vim.v.servername ~= '' and vim.v.servername or 'this Neovim',
    '--nvim-state', vim.json.encode(state) })
  local ok, result = pcall(function() return vim.system(doctor, { text = true }):wait(30000) end)
  local found = ok and result.code ~= nil and pcall(vim.json.decode, result.stdout or '')
  if not found then
    local why = ok and vim.trim(result.stderr or '') or tostring(result)
    return health.error('`' .. table.concat(doctor, ' ') .. '` failed: ' .. why,
      { 'reinstall it: :ClaudeNvimInstall' })
  end
  for _, check in ipairs(vim.json.decode(result.stdout).checks or {}) do
    if check.ok then
      health.ok(check.what)
    else
      health.error(check.what, check.fix ~= '' and { check.fix } or nil)
    end
  end
end

return M
