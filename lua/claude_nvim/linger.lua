-- A server that outlived its Neovim (docs/architecture.md, "What outlives Neovim"): before
-- starting one, the plugin asks this project's lingering server, if any, to attach to this
-- Neovim. Its Claudes stay connected; the server sets this Neovim up as at its start and
-- announces itself (User ClaudeNvimServerReady) as a new one would. The server's half:
-- _linger.py.
local uv = vim.uv or vim.loop

local M = {}

local ASK_MS = 30000  -- the server loads its Lua here before it answers: a busy machine's seconds

--- This project's lingering server ({pid, socket}), at once (a read and a stat), or nil when
--- there is none: then a new one starts without waiting.
---@return {pid: integer, socket: string}?
function M.find()
  if vim.fn.has('win32') == 1 then return nil end  -- servers never linger there
  local dir = require('claude_nvim.project').dir(vim.fn.getcwd(-1, -1), true)
  if not dir then return nil end
  local file = io.open(dir .. '/server.json', 'r')
  if not file then return nil end
  local ok, info = pcall(vim.json.decode, file:read('*a'))
  file:close()
  if not ok or type(info) ~= 'table' or type(info.pid) ~= 'number'
      or info.socket ~= dir .. '/server.sock' or uv.kill(info.pid, 0) ~= 0 then
    return nil
  end
  return info
end

--- Ask `lingering` (M.find's) to attach to this Neovim (at `address`); `done(true)` once it has
--- (its ready announcement comes first), `done(false, why)` when it refused or did not answer:
--- then start one. `done` runs on the main loop.
---@param lingering {pid: integer, socket: string}
---@param address string
---@param done fun(attached: boolean, why?: string)
function M.ask(lingering, address, done)
  local finished = false
  local function finish(attached, why)
    if finished then return end
    finished = true
    vim.schedule(function() done(attached, why) end)
  end
  local info = lingering
  local pipe, timer = uv.new_pipe(false), uv.new_timer()
  local answer = ''
  local function close(attached, why)
    if not timer:is_closing() then timer:close() end
    if not pipe:is_closing() then pipe:close() end
    finish(attached, why)
  end
  timer:start(ASK_MS, 0, function() close(false, 'the lingering server did not answer') end)
  pipe:connect(info.socket, function(err)
    if err then return close(false, err) end
    pipe:write(vim.json.encode({ nvim = address }) .. '\n')
    pipe:read_start(function(read_err, data)
      if data then answer = answer .. data end
      if read_err or not data or answer:find('\n') then
        local decoded, reply = pcall(vim.json.decode, answer:match('^[^\n]*'))
        if decoded and type(reply) == 'table' and reply.ok == true then return close(true) end
        close(false, decoded and type(reply) == 'table' and reply.error or read_err)
      end
    end)
  end)
end

return M
