-- A held Claude's terminal, attached to its holder by Neovim itself: a terminal buffer with no
-- job (nvim_open_term) relayed over the holder's socket, in the holder's frames
-- (src/claude_nvim/_hold/protocol.py). What claude writes is shown, keys go to claude as typed,
-- the window's size goes along; no process stands between a keystroke and the holder. A Claude
-- this Neovim starts has no holder at first (claude_nvim.held): its terminal is then claude's
-- pseudo-terminal itself, until it hands it over to the holder.
local api = vim.api
local uv = vim.uv or vim.loop
local M = {}

local MAX_PAYLOAD = 1048576  -- protocol.MAX_PAYLOAD
local KINDS = { A = true, I = true, W = true, N = true, K = true, O = true, X = true, R = true }
-- At most this much of claude's output goes through the terminal per turn of the loop: a 1 MiB
-- replay (a Claude attached again) takes many, none long (64 KiB held Neovim up to 30 ms, 16
-- KiB 12 ms: benchmarks/held_terminal.py). Keys go in frames of it.
local SLICE = 16384
-- Past this much output not shown yet, its holder (or claude's pseudo-terminal, before the
-- holder runs) is not read: claude then waits.
local BACKLOG = 1048576

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

-- The size of `buf`'s terminal, as Neovim gives it (rows, columns): that of its largest
-- window (rows and columns apart), less the columns of signs and numbers; where no window
-- shows it, the current window's (a terminal opened hidden has that size).
local function size_of(buf)
  local rows, cols = 0, 0
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    local info = vim.fn.getwininfo(win)[1]
    if info.height > 0 then
      rows, cols = math.max(rows, info.height), math.max(cols, info.width - info.textoff)
    end
  end
  if rows == 0 then
    local info = vim.fn.getwininfo(api.nvim_get_current_win())[1]
    rows, cols = info.height, info.width - info.textoff
  end
  return math.max(1, math.min(rows, 65535)), math.max(1, math.min(cols, 65535))
end

---@class claude_nvim.Attached
---@field chan integer the terminal's channel (nvim_chan_send shows text; it types nothing)
---@field connect fun() attach to the holder, which listens now
---@field input fun(data: string): boolean send claude keys, as typed (they wait while the
---  client connects); false once it ended
---@field fail fun(why: string) end it before it attached, saying why (its holder did not start)

--- Make `buf` (empty) the terminal of the held Claude at `sock`. It attaches at connect();
--- before, given `early` (a Claude this Neovim started: claude_nvim.held), it is claude's
--- pseudo-terminal itself, until `early.due()`: then it lets go of it (`early.release()`) and
--- waits for connect(). `ended(code, why)` comes once, in the loop, after the last of claude's
--- output: claude's exit code; or nil and why it ended without claude's (its holder is gone,
--- never came, or refused: then `refused`, the Claude is open in another Neovim), which the
--- terminal shows. Wiping `buf` detaches it; the holder goes on.
---@param buf integer
---@param sock string
---@param ended fun(code: integer|nil, why: string|nil, refused: boolean|nil)
---@param early claude_nvim.Early|nil
---@return claude_nvim.Attached
function M.open(buf, sock, ended, early)
  local pipe = uv.new_pipe(false)  -- to the holder
  local tty = nil ---@type uv.uv_pipe_t?  -- claude's pseudo-terminal, until the holder has it
  local state = 'new'  -- then 'connecting', 'attached', 'over'; 'direct' first, given `early`
  local typed = {}     -- keys typed before it attached
  local unwritten = {}  -- keys claude's pseudo-terminal did not take yet (it was full)
  -- claude's output to show: shown[first .. last], shown[first] from `offset` on; `queued`
  -- bytes in all (past BACKLOG, what it comes from is not read: then claude waits).
  local shown = {} ---@type string[]
  local first, last, offset, queued = 1, 0, 1, 0
  local flushing = false
  local source, on_read, paused = nil, nil, false  -- what output is read from, and how
  local result = nil ---@type {code: integer?, why: string?, refused: boolean?}?
  local sent_size = ''
  local chan ---@type integer
  local group = api.nvim_create_augroup('claude_nvim_attach_' .. buf, { clear = true })

  -- The holder takes claude's pseudo-terminal; the keys it did not take yet go to the holder.
  local function hand_over()
    if state ~= 'direct' or not tty then return end
    state, source, paused = 'new', nil, false
    tty:read_stop()
    tty:close()
    typed, unwritten = vim.list_extend(unwritten, typed), {}
    if early then early.release() end
  end

  local function close()
    hand_over()  -- a Claude not held yet is, from now on
    state = 'over'
    pcall(api.nvim_del_augroup_by_id, group)
    if not pipe:is_closing() then pipe:close() end
  end

  local function finish()
    close()
    local why = result and result.why
    if why and api.nvim_buf_is_valid(buf) then
      pcall(api.nvim_chan_send, chan, '\r\nclaude-nvim: ' .. why .. '\r\n')
    end
    pcall(vim.fn.chanclose, chan)
    ended(result and result.code, why, result and result.refused)
  end

  -- Show at most SLICE bytes, then let Neovim redraw and read keys before the next slice.
  local flush ---@type fun()
  flush = function()
    if not api.nvim_buf_is_valid(buf) then shown, first, last, offset, queued = {}, 1, 0, 1, 0 end
    local budget, pieces = SLICE, {}
    while first <= last and budget > 0 do
      local data = shown[first]
      local piece = data:sub(offset, offset + budget - 1)
      offset = offset + #piece
      if offset > #data then
        shown[first], first, offset = nil, first + 1, 1
      end
      budget, queued = budget - #piece, queued - #piece
      pieces[#pieces + 1] = piece
    end
    -- One send a slice: the terminal's cost is per send (an echo can come a byte a frame).
    if #pieces > 0 then pcall(api.nvim_chan_send, chan, table.concat(pieces)) end
    if paused and queued < BACKLOG and source and not source:is_closing() then
      paused = false
      source:read_start(on_read)
    end
    if first <= last then
      vim.defer_fn(flush, 0)  -- a timer: the loop turns (a redraw, keys) before it runs
      return
    end
    flushing = false
    if result and state ~= 'over' then finish() end
  end

  local function wake()  -- from luv's callbacks too
    if not flushing then
      flushing = true
      vim.schedule(flush)
    end
  end

  local function show(text)  -- claude's output, one read of it
    last, queued = last + 1, queued + #text
    shown[last] = text
    wake()
    if queued >= BACKLOG and not paused and source then  -- Neovim is behind: claude waits
      paused = true
      source:read_stop()
    end
  end

  local function over(code, why, refused)  -- from luv's callbacks, or the loop
    if result or state == 'over' then return end
    result = { code = code, why = why, refused = refused }
    if not pipe:is_closing() then pipe:close() end
    wake()
  end

  local read = M.reader()
  local function reading(err, data)  -- the holder's frames
    if not data then return over(nil, 'the holder of this Claude is gone') end
    local ok, frames = pcall(read, data)
    if err or not ok then return over(nil, 'the holder of this Claude is gone') end
    local output = {}  -- this read's output, one entry of the queue (not one a frame)
    for _, frame in ipairs(frames) do
      if frame[1] == 'O' then
        output[#output + 1] = frame[2]
      elseif frame[1] == 'X' or frame[1] == 'R' then
        if #output > 0 then show(table.concat(output)) end
        if frame[1] == 'R' then return over(nil, frame[2], true) end
        return over(tonumber(frame[2]) or 1)
      end
    end
    if #output > 0 then show(table.concat(output)) end
  end

  local function send(kind, data)  -- in frames the holder takes (at most MAX_PAYLOAD)
    for at = 1, #data, SLICE do pipe:write(M.frame(kind, data:sub(at, at + SLICE - 1))) end
  end

  -- Keys to claude's pseudo-terminal, as much as it takes now (a write never waits: what is
  -- left when the holder takes over is known, and goes to it); the rest a little later.
  local write_keys ---@type fun()
  write_keys = function()
    while state == 'direct' and tty and #unwritten > 0 do
      local n = tty:try_write(unwritten[1])
      if not n then break end  -- full (EAGAIN), or claude is gone (its output ends: hand_over)
      if n < #unwritten[1] then
        unwritten[1] = unwritten[1]:sub(n + 1)
        break
      end
      table.remove(unwritten, 1)
    end
    if state == 'direct' and #unwritten > 0 then vim.defer_fn(write_keys, 5) end
  end

  local function resized()
    if not api.nvim_buf_is_valid(buf) then return end
    local rows, cols = size_of(buf)
    local now = window(rows, cols)
    if now == sent_size then return end
    if state == 'direct' and early then
      require('claude_nvim.pty').resize(early.master, rows, cols)
    elseif state == 'attached' then
      send('W', now)
    else
      return
    end
    sent_size = now
  end

  local function input(data)
    if result then return false end
    if state == 'direct' then
      unwritten[#unwritten + 1] = data
      if #unwritten == 1 then write_keys() end
    elseif state == 'attached' then
      send('I', data)
    elseif state == 'new' or state == 'connecting' then
      typed[#typed + 1] = data
    end
    return state ~= 'over'
  end

  local function fail(why)
    if state == 'new' or state == 'direct' then over(nil, why) end
  end

  local function connect()
    hand_over()  -- (the holder runs: it has claude's pseudo-terminal)
    if state ~= 'new' then return end
    state = 'connecting'
    sent_size = window(size_of(buf))
    local attach = M.frame('A', sent_size .. vim.v.servername)
    pipe:connect(sock, function(err)
      if err then return over(nil, 'no Claude holds ' .. sock .. ' any more (' .. err .. ')') end
      if result or state ~= 'connecting' then return end
      state = 'attached'
      pipe:write(attach)
      send('I', table.concat(typed))
      typed = {}
      source, on_read = pipe, reading
      pipe:read_start(reading)
      vim.schedule(resized)  -- its windows may have changed meanwhile
    end)
  end

  chan = api.nvim_open_term(buf, { on_input = function(_, _, _, data) input(data) end })
  if early then
    -- claude's own terminal: what it writes is shown as it comes; once it is closed (claude
    -- exited), the holder takes over at once, and tells its exit code.
    tty = uv.new_pipe(false)
    tty:open(early.master)
    state, source = 'direct', tty
    on_read = function(err, data)
      if not data or err then return hand_over() end
      show(data)
      early.shown(data)
    end
    tty:read_start(on_read)
    early.due = hand_over
    vim.schedule(resized)
  end
  api.nvim_create_autocmd({ 'WinResized', 'VimResized', 'BufWinEnter', 'WinClosed', 'TabEnter' },
    { group = group, callback = function() vim.schedule(resized) end })
  api.nvim_create_autocmd('OptionSet', { group = group,
    pattern = { 'number', 'relativenumber', 'signcolumn', 'foldcolumn', 'statuscolumn' },
    callback = function() vim.schedule(resized) end })
  -- claude asks its terminal's colours as it starts (OSC 10 and 11), and waits for them:
  -- Neovim answers a job's terminal (its TermRequest handler), not one with no job.
  api.nvim_create_autocmd('TermRequest', { group = group, buffer = buf, callback = function(args)
    local asked = type(args.data) == 'table' and args.data.sequence or args.data  -- (0.10)
    local which = asked == '\027]10;?' and 10 or asked == '\027]11;?' and 11 or nil
    if not which then return end
    local light = (which == 10) == (vim.o.background == 'dark')  -- as Neovim answers a job
    local value = light and 'ffff/ffff/ffff' or '0000/0000/0000'
    input(('\027]%d;rgb:%s\007'):format(which, value))
  end })
  -- Wiped: only this client ends (quitting Neovim, or :bwipeout!, which also stops a held
  -- Claude: claude_nvim.terminal).
  api.nvim_create_autocmd('BufWipeout', { group = group, buffer = buf, once = true,
    callback = close })
  return { chan = chan, input = input, fail = fail, connect = connect }
end

return M
