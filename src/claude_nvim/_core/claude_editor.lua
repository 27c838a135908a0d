-- Neovim as Claude's editor: claude runs $VISUAL (else $EDITOR) on a file to edit (Ctrl+G: the
-- prompt; plans, memory) and waits for it to exit: 0 keeps the edit, non-zero discards it. For
-- the claudes started with what claude-nvim's server publishes, that command is
-- `<this Neovim's nvim> -l <this file>`: a headless nvim that opens the file in the Neovim
-- whose terminal claude runs in ($NVIM; for a held claude, the one attached to its holder
-- now, as its holder's file says), beside Claude, and exits once that buffer is closed:
-- 0 if it was written, 1 if not (abandoned) or if that Neovim went away. In no Neovim
-- terminal it runs the user's own editor ($CLAUDE_NVIM_USER_EDITOR, else vi, else nano).
-- What a reload refuses (not a regular file, over the size limit) is not opened: exit 1.
-- claude adds `+LINE` before the file for names like nvim's.
-- Not a module: run by `nvim -l`, with the arguments claude gives.
local uv = vim.uv or vim.loop

local line, files = nil, {}
for _, word in ipairs(arg) do
  if word:match('^%+%d+$') then line = tonumber(word:sub(2)) else files[#files + 1] = word end
end
local file = files[1]

local function say(msg) io.stderr:write('claude-nvim: ', msg, '\n') end

-- Wait, the event loop turning, until `done()` says so.
---@param done fun(): boolean
local function wait_until(done)
  while not vim.wait(60000, done, 50) do end
end

-- The user's own editor, as claude would have run it: split on spaces, `+LINE` for the names
-- that take it. Exits with its exit code.
local VI_LIKE = { vi = true, vim = true, nvim = true, nano = true, emacs = true, pico = true,
                  micro = true, helix = true, hx = true }
local function own_editor()
  local argv = vim.split(os.getenv('CLAUDE_NVIM_USER_EDITOR') or '', ' ', { trimempty = true })
  if #argv == 0 then
    for _, name in ipairs({ 'vi', 'nano' }) do
      if vim.fn.executable(name) == 1 then argv = { name }; break end
    end
  end
  if #argv == 0 then
    say('no editor: set $VISUAL or $EDITOR')
    os.exit(1)
  end
  if line and VI_LIKE[vim.fs.basename(argv[1])] then argv[#argv + 1] = '+' .. line end
  vim.list_extend(argv, files)
  local code
  local ok, why = pcall(uv.spawn, argv[1], { args = vim.list_slice(argv, 2), stdio = { 0, 1, 2 } },
    function(status, signal) code = signal ~= 0 and 128 + signal or status end)
  if not ok or why == nil then
    say('cannot run ' .. argv[1])
    os.exit(127)
  end
  wait_until(function() return code ~= nil end)
  os.exit(code)
end

-- What runs in the host Neovim: open `path` at `lnum` beside the Claude whose process is the
-- helper's parent (claude), as a float over its window if it is in this tab, else over the
-- editor; tell the helper (channel `helper`) once that buffer is gone, whether it was written.
-- The cursor goes back where it was.
local HOST = [==[
local path, lnum, helper, helper_pid = ...
local api = vim.api
-- Not what a reload refuses (a FIFO would hold Neovim in open() for ever, /dev/zero or a file
-- of gigabytes eat its memory): the server's check, else (its Lua gone) the same in short.
local core = package.loaded['claude_nvim.core']
local stat = not core and (vim.uv or vim.loop).fs_stat(path)
local why = core and core.unloadable(path) or stat and (stat.type ~= 'file'
  and (path .. ' is not a regular file') or stat.size > 50 * 1024 * 1024
  and (path .. ' is over 50 MB')) or nil
if why then return why end
local function terminal_of(pid)  -- the terminal buffer whose job is pid or an ancestor of it
  local jobs = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    local job = vim.bo[buf].buftype == 'terminal'
      and (vim.b[buf].claude_nvim_pid or vim.b[buf].terminal_job_pid)  -- a held one: its holder
    if job then jobs[job] = buf end
  end
  for _ = 1, 32 do
    if pid == nil or pid <= 1 then return nil end
    if jobs[pid] then return jobs[pid] end
    local ok, proc = pcall(api.nvim_get_proc, pid)
    pid = ok and proc and proc.ppid or nil
  end
end
local from = { win = api.nvim_get_current_win(), mode = api.nvim_get_mode().mode }
local terminal = terminal_of(helper_pid)
local over = nil
for _, win in ipairs(terminal and vim.fn.win_findbuf(terminal) or {}) do
  if api.nvim_win_get_tabpage(win) == api.nvim_get_current_tabpage() then over = win end
end
local buf = vim.fn.bufadd(path)
vim.bo[buf].swapfile = false
vim.fn.bufload(buf)
vim.bo[buf].bufhidden = 'wipe'
local width = over and api.nvim_win_get_width(over) or vim.o.columns
local height = over and api.nvim_win_get_height(over) or (vim.o.lines - vim.o.cmdheight)
local cols, rows = math.max(math.floor(width * 0.9), 20), math.max(math.floor(height * 0.8), 3)
local label = terminal and vim.b[terminal].claude_nvim_label or 'Claude'
local win = api.nvim_open_win(buf, true, {
  relative = over and 'win' or 'editor', win = over, border = 'rounded',
  width = math.min(cols, width), height = math.min(rows, height),
  row = math.max(math.floor((height - rows) / 2) - 1, 0), col = math.floor((width - cols) / 2),
  title = (' %s waits · :wq gives it back, :q! discards '):format(label), title_pos = 'center',
})
pcall(api.nvim_win_set_cursor, win, { math.max(lnum, 1), 0 })
local written = false
api.nvim_create_autocmd('BufWritePost', { buffer = buf, callback = function() written = true end })
api.nvim_create_autocmd('BufWipeout', { buffer = buf, once = true, callback = function()
  pcall(vim.rpcnotify, helper, 'nvim_exec_lua', '_G.claude_nvim_edited = ...', { written })
  vim.schedule(function()
    if not api.nvim_win_is_valid(from.win) then return end
    api.nvim_set_current_win(from.win)
    if from.mode == 't' then vim.cmd('startinsert') end
  end)
end })
]==]

-- The address of the Neovim attached to this claude's holder now ($CLAUDE_NVIM_HOLDER names
-- its JSON file, src/claude_nvim/_hold/holder.py), or nil. Read only from a regular file, and
-- only so much of it: claude's environment is not to make this hang or eat memory.
local MAX_RECORD = 64 * 1024
local function holders_neovim()
  local path = os.getenv('CLAUDE_NVIM_HOLDER') or ''
  local stat = path ~= '' and uv.fs_stat(path)
  if not stat or stat.type ~= 'file' or stat.size > MAX_RECORD then return nil end
  local handle = io.open(path, 'rb')
  if not handle then return nil end
  local text = handle:read(MAX_RECORD)
  handle:close()
  local ok, record = pcall(vim.json.decode, text or '')
  local nvim = ok and type(record) == 'table' and record.nvim
  return type(nvim) == 'string' and nvim ~= '' and nvim or nil
end

-- A held claude outlives the Neovim it started in, whose address $NVIM still is: the Neovim
-- that shows it now comes first.
local chan = 0
for _, address in ipairs(file and { holders_neovim() or '', os.getenv('NVIM') or '' } or {}) do
  if chan == 0 and address ~= '' then
    local mode = address:match('^[%w%.%-]+:%d+$') and 'tcp' or 'pipe'
    local ok, id = pcall(vim.fn.sockconnect, mode, address, { rpc = true })
    chan = ok and id or 0
  end
end
if chan == 0 then own_editor() end

local ok, answer = pcall(function()
  local helper = vim.rpcrequest(chan, 'nvim_get_api_info')[1]
  return vim.rpcrequest(chan, 'nvim_exec_lua', HOST, { vim.fn.fnamemodify(file, ':p'), line or 1,
                                                      helper, vim.fn.getpid() })
end)
if not ok then
  say('cannot open ' .. file .. ' in Neovim: ' .. tostring(answer))
  os.exit(1)
end
if type(answer) == 'string' then  -- refused: claude gets a failed editor, the file as it was
  say(answer .. '; not opened in Neovim')
  os.exit(1)
end
io.stdout:write('claude-nvim: editing ', file, ' in Neovim (:wq gives it back, :q! discards)\n')
wait_until(function()
  return _G.claude_nvim_edited ~= nil or vim.api.nvim_get_chan_info(chan).id == nil
end)
if _G.claude_nvim_edited == nil then say('Neovim went away') end
os.exit(_G.claude_nvim_edited == true and 0 or 1)
