-- A held Claude's terminal, attached to its holder by Neovim itself: a terminal buffer with no
-- job (nvim_open_term) relayed over the holder's socket, in the holder's frames
-- (src/claude_nvim/_hold/protocol.py). What claude writes is shown, keys go to claude as typed,
-- the window's size goes along; no process stands between a keystroke and the holder.
local api = vim.api
local uv = vim.uv or vim.loop
local M = {}

local MAX_PAYLOAD = 1048576  -- protocol.MAX_PAYLOAD
local KINDS = { A = true, I = true, W = true, N = true, K = true, O = true, X = true, R = true }
-- At most this much of claude's output goes through the terminal per tick: a 1 MB replay
-- (a Claude attached again) takes a few ticks, none of them long.
local SLICE = 65536
M.REFUSED = 75  -- the code of a Claude attached in another Neovim (client.py's too)

local function be32(n)
  return string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
    math.floor(n / 256) % 256, n % 256)
end

--- A frame of the holder's wire: its kind (one byte), its length (four, big-endian), its
--- payload.
---@param kind string
---@param payload string
---@return string
function M.frame(kind, payload) return kind .. be32(#payload) .. payload end

-- A window size's payload: rows and columns, 16 bits each.
local function window(rows, cols)
  rows, cols = math.max(1, math.min(rows, 65535)), math.max(1, math.min(cols, 65535))
  return string.char(math.floor(rows / 256), rows % 256, math.floor(cols / 256), cols % 256)
end

--- A reader of frames: feed it bytes as they come, it returns the frames they complete as
--- { kind, payload } pairs; it errors on bytes that are not frames.
---@return fun(data: string): string[][]
function M.reader()
  local chunks, size, need = {}, 0, 5  -- need: the bytes that complete the next frame
  return function(data)
    chunks[#chunks + 1], size = data, size + #data
    local found = {}
    if size < need then return found end  -- (a big frame: no copy per chunk)
    local all, at = table.concat(chunks), 1
    while true do
      local left = #all - at + 1
      if left < 5 then
        need = 5
        break
      end
      local kind, b1, b2, b3, b4 = all:sub(at, at), all:byte(at + 1, at + 4)
      local length = ((b1 * 256 + b2) * 256 + b3) * 256 + b4
      if not KINDS[kind] or length > MAX_PAYLOAD then
        error(('not a frame: kind %q, %d bytes'):format(kind, length), 0)
      end
      if left < 5 + length then
        need = 5 + length
        break
      end
      found[#found + 1] = { kind, all:sub(at + 5, at + 4 + length) }
      at = at + 5 + length
    end
    local rest = all:sub(at)
    chunks, size = { rest }, #rest
    return found
  end
end

-- The size of `buf`'s terminal, as Neovim gives it: its smallest window's, less the columns
-- of signs and numbers; nil when no window shows it.
local function size_of(buf)
  local rows, cols
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    local info = vim.fn.getwininfo(win)[1]
    rows = math.min(rows or info.height, info.height)
    cols = math.min(cols or (info.width - info.textoff), info.width - info.textoff)
  end
  return rows, cols and math.max(cols, 1)
end

---@class claude_nvim.Attached
---@field chan integer the terminal's channel (nvim_chan_send shows text; it types nothing)
---@field connect fun() attach to the holder, which listens now
---@field input fun(data: string): boolean send claude keys, as typed (they wait while the
---  client connects); false once it ended
---@field fail fun(why: string) end it before it attached, saying why (its holder did not start)

--- Make `buf` (empty) the terminal of the held Claude at `sock`. It attaches at connect();
--- `ended(code)` comes once, in the loop, after the last of claude's output: claude's exit
--- code, M.REFUSED (open in another Neovim), or 1 (its holder is gone, or never came), the
--- reason then shown in the terminal. Wiping `buf` detaches it; the holder goes on.
---@param buf integer
---@param sock string
---@param ended fun(code: integer)
---@return claude_nvim.Attached
function M.open(buf, sock, ended)
  local pipe = uv.new_pipe(false)
  local state = 'new'  -- then 'connecting', 'attached', 'over'
  local typed = {}     -- keys typed before it attached
  local shown, first, scheduled = {}, 1, false ---@type string[], integer, boolean
  -- (shown: claude's output to show, from shown[first] on)
  local result = nil ---@type [integer, string?]? once it ended: shown after the output before it
  local sent_size = ''
  local group = api.nvim_create_augroup('claude_nvim_attach_' .. buf, { clear = true })
  local chan ---@type integer

  local function finish()
    state = 'over'
    pcall(api.nvim_del_augroup_by_id, group)
    if not pipe:is_closing() then pipe:close() end
    local code, why = result[1], result[2]
    if why and api.nvim_buf_is_valid(buf) then
      pcall(api.nvim_chan_send, chan, '\r\nclaude-nvim: ' .. why .. '\r\n')
    end
    pcall(vim.fn.chanclose, chan)
    ended(code)
  end

  local function flush()
    scheduled = false
    if not api.nvim_buf_is_valid(buf) then shown, first = {}, 1 end
    local budget = SLICE
    while shown[first] and budget > 0 do
      local data = shown[first]
      if #data > budget then
        shown[first] = data:sub(budget + 1)
        data = data:sub(1, budget)
      else
        shown[first], first = nil, first + 1
      end
      budget = budget - #data
      pcall(api.nvim_chan_send, chan, data)
    end
    if shown[first] then
      scheduled = true
      vim.schedule(flush)
    elseif result and state ~= 'over' then
      finish()
    end
  end

  local function show(data)  -- from luv's callbacks: shown at the loop's next turn
    shown[#shown + 1] = data
    if not scheduled then
      scheduled = true
      vim.schedule(flush)
    end
  end

  local function over(code, why)  -- from luv's callbacks, or the loop
    if result or state == 'over' then return end
    result = { code, why }
    if not pipe:is_closing() then pipe:close() end
    if not scheduled then
      scheduled = true
      vim.schedule(flush)
    end
  end

  local function resized()
    if state ~= 'attached' or not api.nvim_buf_is_valid(buf) then return end
    local rows, cols = size_of(buf)
    local now = rows and window(rows, cols)
    if now and now ~= sent_size then
      sent_size = now
      pipe:write(M.frame('W', now))
    end
  end

  local function input(data)
    if state == 'attached' then
      pipe:write(M.frame('I', data))
    elseif state == 'new' or state == 'connecting' then
      typed[#typed + 1] = data
    end
    return state ~= 'over' and not result
  end

  local function fail(why)
    if state == 'new' then over(1, why) end
  end

  local function connect()
    if state ~= 'new' then return end
    state = 'connecting'
    local rows, cols = size_of(buf)
    sent_size = window(rows or vim.o.lines, cols or vim.o.columns)
    local attach = M.frame('A', sent_size .. vim.v.servername)
    local read = M.reader()
    pipe:connect(sock, function(err)
      if err then return over(1, 'no Claude holds ' .. sock .. ' any more (' .. err .. ')') end
      if result then return end
      state = 'attached'
      pipe:write(attach)
      if #typed > 0 then pipe:write(M.frame('I', table.concat(typed))) end
      typed = {}
      pipe:read_start(function(read_err, data)
        if not data then return over(1, 'the holder of this Claude is gone') end
        local ok, frames = pcall(read, data)
        if read_err or not ok then return over(1, 'the holder of this Claude is gone') end
        for _, frame in ipairs(frames) do
          if frame[1] == 'O' then
            show(frame[2])
          elseif frame[1] == 'X' then
            return over(tonumber(frame[2]) or 1)
          elseif frame[1] == 'R' then
            return over(M.REFUSED, frame[2])
          end
        end
      end)
      vim.schedule(resized)  -- its windows may have changed meanwhile
    end)
  end

  chan = api.nvim_open_term(buf, { on_input = function(_, _, _, data) input(data) end })
  api.nvim_create_autocmd({ 'WinResized', 'VimResized', 'BufWinEnter', 'WinClosed', 'TabEnter' },
    { group = group, callback = function() vim.schedule(resized) end })
  -- Wiped: only this client ends (quitting Neovim, or :bwipeout!, which also stops a held
  -- Claude: claude_nvim.terminal).
  api.nvim_create_autocmd('BufWipeout', { group = group, buffer = buf, once = true,
    callback = function()
      state = 'over'
      pcall(api.nvim_del_augroup_by_id, group)
      if not pipe:is_closing() then pipe:close() end
    end })
  return { chan = chan, input = input, fail = fail, connect = connect }
end

return M
