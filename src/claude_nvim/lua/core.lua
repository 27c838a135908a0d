-- claude_nvim.core: what every part of claude-nvim's Neovim half shares. The helpers tools use
-- (UTF-16 columns, the "active editor" test, finding and loading a buffer by path, reading
-- lines), the guarded notification channel back to the server, and the per-server state in
-- Neovim: the environment for `claude`, workspace folders, and switching it all off.
-- Installed by the server (docs/architecture.md, "Lua"); lifecycle: setup(opts) / stop().
local api = vim.api
local uv = vim.uv or vim.loop
local M = { chan = nil, port = nil, modules = {} }

-- Byte offset (0-based) in `line` -> UTF-16 code units, as LSP and the CLI count.
function M.utf16(line, byte)
  if byte <= 0 then return 0 end
  if byte >= #line then byte = #line end
  local ok, n = pcall(vim.str_utfindex, line, 'utf-16', byte, false)
  if ok and n then return n end
  local _, n16 = vim.str_utfindex(line, byte)  -- Neovim < 0.11
  return n16
end

function M.file_url(path) return 'file://' .. path end

-- `s` cut to at most `n` bytes, never inside a UTF-8 sequence; and whether it was cut.
function M.cut(s, n)
  if #s <= n then return s, false end
  while n > 0 and bit.band(s:byte(n + 1), 0xC0) == 0x80 do n = n - 1 end
  return s:sub(1, n), true
end

-- The CLI compares paths as strings: make ours absolute without resolving symlinks.
function M.absolute(path)
  if path:sub(1, 1) == '~' and (path:len() == 1 or path:sub(2, 2) == '/') then
    path = (vim.env.HOME or '') .. path:sub(2)
  elseif path:sub(1, 1) ~= '/' and not path:match('^%a:[/\\]') then
    path = vim.fn.getcwd(-1, -1) .. '/' .. path
  end
  return vim.fs.normalize(path, { expand_env = false })
end

-- The first of `candidates` (paths as the model or the CLI gave them) that exists on disk, made
-- absolute (`test`: what "exists" means, fs_stat by default), or nil.
function M.existing(candidates, test)
  test = test or uv.fs_stat
  for _, candidate in ipairs(candidates) do
    local path = M.absolute(candidate)
    if test(path) then return path end
  end
  return nil
end

-- An "active editor": a normal file buffer in a normal window, not one of our diff proposals.
function M.is_editor(win)
  win = (win == nil or win == 0) and api.nvim_get_current_win() or win
  if api.nvim_win_get_config(win).relative ~= '' then return false end
  local buf = api.nvim_win_get_buf(win)
  return vim.bo[buf].buftype == '' and api.nvim_buf_get_name(buf) ~= ''
    and not vim.b[buf].claude_nvim_proposal
end

-- Whether vim.fs.normalize would leave `name` as it is (most buffer names): it costs 20 us a
-- call, 20 ms for a thousand buffers.
local function normal(name)
  return name:sub(1, 1) == '/' and not (name:find('[\\~]') or name:find('//', 1, true)
    or name:find('/%.%.?/') or name:find('/%.%.?$') or (#name > 1 and name:sub(-1) == '/'))
end

-- `name` as the buffer indexes below know it (normalized, $VARS left alone).
local function key(name)
  return normal(name) and name or vim.fs.normalize(name, { expand_env = false })
end

-- The buffer whose file is the first of `candidates` (paths) that matches one, or nil.
function M.find_buffer(candidates)
  local by_name, by_real = {}, {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    local name = api.nvim_buf_get_name(buf)
    if name ~= '' then
      local k = key(name)
      by_name[k] = by_name[k] or buf
    end
  end
  for _, path in ipairs(candidates) do
    local buf = by_name[M.absolute(path)]
    if buf then return buf end
  end
  for buf_name, buf in pairs(by_name) do
    local real = uv.fs_realpath(buf_name)
    if real then by_real[real] = by_real[real] or buf end
  end
  for _, path in ipairs(candidates) do
    local real = uv.fs_realpath(M.absolute(path))
    if real and by_real[real] then return by_real[real] end
  end
  return nil
end

-- Files a tool may make Neovim read. Neovim reads a file whole, in the thread that serves the
-- user: a FIFO blocks it in open() until a writer comes, for ever if none does (not even
-- SIGTERM ends that), /dev/zero never ends, and a big file freezes it and takes its size in
-- memory (200 MB: 1.7 s, 220 MB). The server sets the limit at start ($CLAUDE_NVIM_MAX_FILE_MB).
M.max_file_bytes = 50 * 1024 * 1024

local KINDS = { directory = 'a directory', fifo = 'a FIFO', socket = 'a socket',
                char = 'a character device', block = 'a block device' }

local function size(bytes)
  for _, unit in ipairs({ { 2 ^ 30, 'GB' }, { 2 ^ 20, 'MB' }, { 2 ^ 10, 'KB' } }) do
    if bytes >= unit[1] then
      return (('%.1f %s'):format(bytes / unit[1], unit[2]):gsub('%.0 ', ' '))
    end
  end
  return bytes .. ' bytes'
end

-- Why a tool must not make Neovim read the file at `path`, or nil (also when there is none).
function M.unloadable(path)
  local stat = uv.fs_stat(path)
  if stat == nil then return nil end
  if stat.type ~= 'file' then
    return ('%s is not a regular file (%s)'):format(path, KINDS[stat.type] or stat.type)
  end
  if stat.size > M.max_file_bytes then
    return ("%s is %s, over claude-nvim's limit of %s for opening files "
      .. '(CLAUDE_NVIM_MAX_FILE_MB)'):format(path, size(stat.size), size(M.max_file_bytes))
  end
  return nil
end

-- The buffer of file `path` loaded, as :edit loads it for the user: `buf` (the file's buffer)
-- or a new unlisted one, with no swap file if `private` (it is only the tool's). An error in
-- the file's modeline or in an autocmd is Neovim's message to the user, not the tool's failure.
-- A file M.unloadable refuses is not touched, and gets no buffer. Returns the buffer, or nil
-- and why not.
function M.load(path, buf, private)
  if buf and api.nvim_buf_is_loaded(buf) then return buf end
  local refusal = M.unloadable(buf and api.nvim_buf_get_name(buf) or path)
  if refusal then return nil, refusal end
  if buf == nil then
    buf = vim.fn.bufadd(path)
    if private then vim.bo[buf].swapfile = false end
  end
  local ok, err = pcall(vim.fn.bufload, buf)  -- never a swap-file dialog, unlike :edit
  local message = (tostring(err):gsub('^Vim:', ''))
  if not api.nvim_buf_is_loaded(buf) then
    return nil, ok and 'Could not load ' .. path or message
  end
  if not ok then vim.notify(message, vim.log.levels.ERROR) end
  return buf
end

-- Reload an unmodified buffer whose file changed on disk (the CLI writes files behind
-- Neovim's back), never with a prompt: a modified buffer is left alone.
function M.refresh(buf)
  if not api.nvim_buf_is_valid(buf) or not api.nvim_buf_is_loaded(buf)
      or vim.bo[buf].modified or vim.bo[buf].buftype ~= '' then return end
  -- A missing file would cost a one-second wait inside checktime: nothing to reload anyway.
  -- Nor is one M.unloadable refuses: it stays as Neovim has it.
  local name = api.nvim_buf_get_name(buf)
  if not uv.fs_stat(name) or M.unloadable(name) then return end
  local autoread = vim.go.autoread
  vim.go.autoread = true
  pcall(vim.cmd, 'silent! checktime ' .. buf)
  vim.go.autoread = autoread
end

-- Notify the server. A dead channel (the server went away) switches its claude-nvim off here,
-- so no autocmd ever raises "Invalid channel" at the user.
function M.notify(event, ...)
  if M.chan == nil then return false end
  if pcall(vim.rpcnotify, M.chan, event, ...) then return true end
  M.unload(M.chan)
  return false
end

-- A line in the server's log. level: 'debug', 'info', 'warn', 'error' or a vim.log.levels
-- number; any other level still logs (as a warning).
function M.log(level, msg) return M.notify('claude_nvim_log', level, msg) end

-- `s` cut to at most `width` screen cells, '…' included; one cut, found by halving.
local function fit(s, width)
  if vim.fn.strdisplaywidth(s) <= width then return s end
  local low, high = 0, math.min(vim.fn.strchars(s), width)  -- chars that fit with the '…'
  while low < high do
    local mid = math.ceil((low + high) / 2)
    if vim.fn.strdisplaywidth(vim.fn.strcharpart(s, 0, mid)) <= width - 1 then
      low = mid
    else
      high = mid - 1
    end
  end
  return vim.fn.strcharpart(s, 0, low) .. '…'
end

local HIGHLIGHT = { WARN = 'WarningMsg', ERROR = 'ErrorMsg' }

-- Something the user must know (never anything else goes to their screen), as data: one line
-- (control characters, a newline in a file name, shown as ^J), never a hit-enter prompt,
-- whatever the screen. What fits the command line is shown and kept in :messages as it is.
-- A longer message: with 'shortmess' T, :echomsg shows it cut to fit and keeps it whole in
-- :messages (it reads the text from M.telling: no Ex source is made of it); else, or with
-- 'cmdheight' 0, it is cut here to what fits.
function M.tell(msg, level)
  msg = vim.fn.strtrans((('claude-nvim: ' .. msg):gsub('\n', '^J')))
  local hl = HIGHLIGHT[level] or 'Normal'
  local room = vim.v.echospace
  if vim.fn.strdisplaywidth(msg) <= room then
    return api.nvim_echo({ { msg, hl } }, true, {})
  end
  if vim.o.cmdheight > 0 and room > 1 and vim.o.shortmess:find('T', 1, true) then
    M.telling = msg
    vim.cmd('echohl ' .. hl .. " | echomsg luaeval(\"require'claude_nvim.core'.telling\")"
      .. ' | echohl None')
    M.telling = nil
    return
  end
  if room >= 2 then
    api.nvim_echo({ { fit(msg, room - 1), hl } }, true, {})
  else  -- no room at all on this screen: the server's log has it
    M.log('warn', 'not shown (no room on the screen): ' .. msg)
  end
end

-- Wrap an autocmd callback: its errors go to the server's log, not to :messages.
function M.guard(fn)
  return function(...)
    local ok, err = pcall(fn, ...)
    if not ok then M.log('error', tostring(err)) end
  end
end

function M.workspace_folders()
  local seen, out = {}, {}
  local function add(path)
    if not path or path == '' then return end
    path = M.absolute(path)
    if not seen[path] then seen[path] = true; out[#out + 1] = path end
  end
  add(vim.fn.getcwd(-1, -1))
  local get_clients = vim.lsp.get_clients or vim.lsp.get_active_clients
  for _, client in ipairs(get_clients()) do
    for _, folder in ipairs(client.workspace_folders or {}) do add(vim.uri_to_fname(folder.uri)) end
  end
  return out
end

-- The file's modification time as a string, or nil when there is no such file.
function M.mtime(path)
  local stat = uv.fs_stat(path)
  return stat and (stat.mtime.sec .. '.' .. stat.mtime.nsec) or nil
end

-- Whether `buf`'s file changed on disk since Neovim read or wrote it (as far as we saw).
function M.changed_on_disk(buf)
  local seen = vim.b[buf].claude_nvim_mtime
  return seen ~= nil and M.mtime(api.nvim_buf_get_name(buf)) ~= seen
end

local function remember_mtime(buf)
  if api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == '' then
    vim.b[buf].claude_nvim_mtime = M.mtime(api.nvim_buf_get_name(buf))
  end
end

-- A reader of lines by (path, 0-based row[, buf]): from `buf` or the loaded buffer of `path`
-- when there is one, else from the file, read once. Reading stops at 4 MB of files per reader,
-- so that a long answer never holds Neovim up: lines past that are nil.
function M.reader()
  local buffers, files, budget = nil, {}, 4 * 1024 * 1024
  return function(path, row, buf)
    if buf == nil then
      if buffers == nil then
        buffers = {}
        for _, b in ipairs(api.nvim_list_bufs()) do
          local name = api.nvim_buf_get_name(b)
          if name ~= '' and api.nvim_buf_is_loaded(b) then buffers[key(name)] = b end
        end
      end
      buf = buffers[key(path)]
    end
    if buf and api.nvim_buf_is_loaded(buf) then
      return api.nvim_buf_get_lines(buf, row, row + 1, false)[1]
    end
    if files[path] == nil then
      local stat = uv.fs_stat(path)
      local ok, lines = false, nil
      if stat and stat.type == 'file' and stat.size <= budget then
        budget = budget - stat.size
        ok, lines = pcall(vim.fn.readfile, path)
      end
      files[path] = ok and lines or {}
    end
    return files[path][row + 1]
  end
end

-- opts: chan (the server's channel), max_file_bytes. M.modules, the modules the server
-- installed, is set when they are installed (lua_util.INSTALL_LUA).
function M.setup(opts)
  M.chan = opts.chan
  M.max_file_bytes = opts.max_file_bytes or M.max_file_bytes
  local group = api.nvim_create_augroup('claude_nvim', { clear = true })
  -- Neovim keeps a buffer's file time to itself; we keep our own, so that a write never
  -- meets its "file changed since reading" prompt (saveDocument checks first).
  for _, buf in ipairs(api.nvim_list_bufs()) do remember_mtime(buf) end
  api.nvim_create_autocmd({ 'BufReadPost', 'BufWritePost', 'FileChangedShellPost' }, {
    group = group, callback = function(ev) remember_mtime(ev.buf) end,
  })
  local function folders_changed()
    vim.schedule(M.guard(function() M.notify('claude_nvim_folders', M.workspace_folders()) end))
  end
  api.nvim_create_autocmd({ 'DirChanged', 'LspAttach', 'LspDetach' }, {
    group = group, callback = folders_changed,
  })
end

-- Listening on `port`: publish it to Neovim's environment so that `claude` started from any
-- :terminal connects here (docs/protocol.md §4).
function M.publish(port)
  M.port = port
  local info = vim.g.claude_nvim_server or {}
  info.port = port
  vim.g.claude_nvim_server = info
  vim.env.CLAUDE_CODE_SSE_PORT = tostring(port)
  vim.env.ENABLE_IDE_INTEGRATION = 'true'
  vim.env.FORCE_CODE_TERMINAL = 'true'
  for _, var in ipairs({ 'no_proxy', 'NO_PROXY' }) do
    local value = vim.env[var] or ''
    local have = {}
    for _, host in ipairs(vim.split(value, ',', { trimempty = true })) do
      have[vim.trim(host)] = true
    end
    for _, host in ipairs({ 'localhost', '127.0.0.1', '::1' }) do
      if not have[host] then value = value == '' and host or (value .. ',' .. host) end
    end
    vim.env[var] = value
  end
  local env = {}
  for _, var in ipairs({ 'CLAUDE_CODE_SSE_PORT', 'ENABLE_IDE_INTEGRATION', 'FORCE_CODE_TERMINAL',
                         'no_proxy', 'NO_PROXY' }) do env[var] = vim.env[var] end
  return { pid = vim.fn.getpid(), folders = M.workspace_folders(), env = env }
end

-- Create the user commands {name = {fn, opts}} that do not exist yet (a Neovim plugin may
-- have defined them at start-up); the names of those created, for stop() to delete.
function M.create_commands(commands)
  local created = {}
  for name, spec in pairs(commands) do
    if vim.fn.exists(':' .. name) ~= 2 then
      api.nvim_create_user_command(name, spec[1], spec[2])
      created[#created + 1] = name
    end
  end
  return created
end

-- `count` Claudes are connected now, one more (`connected`) or one fewer: kept in
-- vim.g.claude_nvim_server.clients (statuslines read it) and told to the user's User autocmds.
function M.clients(count, connected)
  local info = vim.g.claude_nvim_server
  if type(info) ~= 'table' then return end
  info.clients = count
  vim.g.claude_nvim_server = info
  pcall(api.nvim_exec_autocmds, 'User', { modeline = false, data = { clients = count },
    pattern = connected and 'ClaudeNvimConnected' or 'ClaudeNvimDisconnected' })
end

-- Core's own half of switching off: its autocmds, the server mark, the port in the
-- environment. The server calls M.unload, which checks that it owns Neovim first.
function M.stop()
  pcall(api.nvim_del_augroup_by_name, 'claude_nvim')
  local info = vim.g.claude_nvim_server
  if type(info) == 'table' and (tonumber(info.clients) or 0) > 0 then M.clients(0, false) end
  if M.port and vim.env.CLAUDE_CODE_SSE_PORT == tostring(M.port) then
    vim.env.CLAUDE_CODE_SSE_PORT = nil
  end
  vim.g.claude_nvim_server = nil
  M.chan, M.port = nil, nil
end

-- Switch claude-nvim off in this Neovim for the server on channel `chan`: each module it
-- installed stops (the last installed first: autocmds, timers, commands, diff tabs), then
-- core. Only while that server owns Neovim (CLAIM_LUA): a refused or replaced server, or a
-- dead one's leftover Lua, must leave the owner's half alone. Returns whether it did.
function M.unload(chan)
  local info = vim.g.claude_nvim_server
  if chan == nil or type(info) ~= 'table' or info.channel ~= chan then return false end
  local modules = M.modules or {}
  for i = #modules, 1, -1 do  -- ours only: a Neovim plugin may share the prefix
    local mod = package.loaded[modules[i]]
    if mod ~= M and type(mod) == 'table' and mod.stop then pcall(mod.stop) end
  end
  M.stop()
  return true
end

return M
