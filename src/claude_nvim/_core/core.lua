-- claude_nvim.core: what every part of claude-nvim's Neovim half shares. Installed by the
-- server (docs/architecture.md, "Lua"). Two parts:
--
-- 1. The helpers, for tools and every other module (`local core =
--    package.loaded['claude_nvim.core']`): positions, paths and text (utf16, cut, file_url,
--    absolute, existing, split_lines), the user's windows (is_editor, editor_window), buffers
--    and files (find_buffer, unloadable, read_file, load, reader), messages (notify and log to
--    the server, tell the user, guard a callback) and workspace_folders. Its rooms, installed
--    right after it: claude_nvim.reload (a buffer brought up to date with its file: refresh,
--    show, and what Neovim last saw of each file), claude_nvim.codec (a file's bytes as the
--    text Neovim reads), claude_nvim.tell (the one way to tell the user).
-- 2. The server's lifecycle (at the end of this file), never called by tools: setup, publish,
--    ready, clients, terminals, stop, unload, and live_server, the one test of a live server (the
--    server's claim, the Neovim plugin and the doctor ask it).
local api = vim.api
local uv = vim.uv or vim.loop

--- vim.g.claude_nvim_server: the server that owns this Neovim.
---@class claude_nvim.ServerRecord
---@field channel integer its RPC channel
---@field pid integer its process
---@field port integer|nil where it listens, once it does
---@field clients? integer the Claudes listening now
---@field claude? {env: table<string, string>, args: string[]} once ready: what a claude needs
---@field claudes? table[] the Claudes connected, each with its hooks' state

---@class claude_nvim.core
---@field chan integer|nil the server's channel (setup); nil once switched off
---@field port integer|nil the port published to the environment (publish)
---@field modules string[] the modules the server installed, core first (its claim sets it)
local M = { chan = nil, port = nil, modules = {} }

-- ---------------------------------------------------------------------------------------------
-- 1. The helpers: for tools and every module

--- Byte offset (0-based) in `line` -> UTF-16 code units, as LSP and the CLI count.
---@param line string
---@param byte integer a 0-based byte offset in `line`
---@return integer
function M.utf16(line, byte)
  if byte <= 0 then return 0 end
  if byte >= #line then byte = #line end
  local ok, n = pcall(vim.str_utfindex, line, 'utf-16', byte, false)
  if ok and n then return n end
  local _, n16 = vim.str_utfindex(line, byte)  -- Neovim < 0.11
  return n16
end

--- `path`'s URI as the CLI writes it: file:// and the path, not percent-encoded.
---@param path string an absolute path
---@return string
function M.file_url(path) return 'file://' .. path end

--- `s` cut to at most `n` bytes, never inside a UTF-8 sequence; and whether it was cut.
---@param s string
---@param n integer
---@return string
---@return boolean cut
function M.cut(s, n)
  if #s <= n then return s, false end
  while n > 0 and bit.band(s:byte(n + 1), 0xC0) == 0x80 do n = n - 1 end
  return s:sub(1, n), true
end

--- The CLI compares paths as strings: make ours absolute without resolving symlinks.
---@param path string
---@return string
function M.absolute(path)
  if path:sub(1, 1) == '~' and (path:len() == 1 or path:sub(2, 2) == '/') then
    path = (vim.env.HOME or '') .. path:sub(2)
  elseif path:sub(1, 1) ~= '/' and not path:match('^%a:[/\\]') then
    path = vim.fn.getcwd(-1, -1) .. '/' .. path
  end
  return vim.fs.normalize(path, { expand_env = false })
end

--- The first of `candidates` (paths as the model or the CLI gave them) that exists on disk, made
--- absolute (`test`: what "exists" means, fs_stat by default), or nil.
---@param candidates string[]
---@param test? fun(path: string): any
---@return string|nil
function M.existing(candidates, test)
  test = test or uv.fs_stat
  for _, candidate in ipairs(candidates) do
    local path = M.absolute(candidate)
    if test(path) then return path end
  end
  return nil
end

--- An "active editor": a normal file buffer in a normal window, not one of our diff proposals.
---@param win? integer a window; nil or 0: the current one
---@return boolean
function M.is_editor(win)
  win = (win == nil or win == 0) and api.nvim_get_current_win() or win
  if api.nvim_win_get_config(win).relative ~= '' then return false end
  local buf = api.nvim_win_get_buf(win)
  return vim.bo[buf].buftype == '' and api.nvim_buf_get_name(buf) ~= ''
    and not vim.b[buf].claude_nvim_proposal
end

-- The file windows the user was in, most recent first (a few: one may close).
local editors = {} ---@type integer[]

local function entered()
  local win = api.nvim_get_current_win()
  if not M.is_editor(win) then return end
  for i = #editors, 1, -1 do
    if editors[i] == win then table.remove(editors, i) end
  end
  table.insert(editors, 1, win)
  editors[9] = nil
end

--- The user's editor window, by one rule: the current window if it is an editor, else the file
--- window the user was in last (while the cursor is in Claude's terminal, say); nil when there
--- is none. openFile opens files there, a diff beside Claude shows its file there,
--- getOpenEditors and getCurrentSelection take its file as the active one, getQuickfixList
--- reads its location list, and the Neovim plugin goes back there from Claude.
---@return integer|nil
function M.editor_window()
  local win = api.nvim_get_current_win()
  if M.is_editor(win) then return win end
  for _, last in ipairs(editors) do
    if api.nvim_win_is_valid(last) and M.is_editor(last) then return last end
  end
  return nil
end

-- Whether vim.fs.normalize would leave `name` as it is (most buffer names): it costs 20 us a
-- call, 20 ms for a thousand buffers.
-- Plain finds first: a pattern's find costs up to 70 ns a byte (a path of megabytes: seconds).
local function normal(name)
  if name:sub(1, 1) ~= '/' or name:find('\\', 1, true) or name:find('~', 1, true)
      or name:find('//', 1, true) or (#name > 1 and name:sub(-1) == '/') then
    return false
  end
  return not name:find('/.', 1, true) or not (name:find('/%.%.?/') or name:find('/%.%.?$'))
end

-- No file's path is longer (Linux's PATH_MAX, Neovim's MAXPATHL): a longer one names no buffer.
local PATH_MAX = 4096

-- `name` as the buffer indexes below know it (normalized, $VARS left alone).
local function key(name)
  return normal(name) and name or vim.fs.normalize(name, { expand_env = false })
end

--- A finder of the buffer of a file, for many paths at once: each buffer's name is read once,
--- and realpath()ed once, the first time a path is not found by its name (a symbolic link,
--- "..": the same file by another name). A finder is good while no buffer is renamed: one per
--- call (300 buffers' realpaths for each of 2,000 paths took 18 s). `loaded`: of loaded buffers
--- only.
---@param loaded? boolean
---@return fun(path: string, by_name_only?: boolean): integer|nil
function M.buffer_finder(loaded)
  local by_name, by_real = {}, nil
  for _, buf in ipairs(api.nvim_list_bufs()) do
    local name = api.nvim_buf_get_name(buf)
    if name ~= '' and (not loaded or api.nvim_buf_is_loaded(buf)) then
      local k = key(name)
      by_name[k] = by_name[k] or buf
    end
  end
  return function(path, by_name_only)
    if #path > PATH_MAX then return nil end
    path = normal(path) and path or M.absolute(path)
    if by_name[path] or by_name_only then return by_name[path] end
    if by_real == nil then
      by_real = {}
      for buf_name, buf in pairs(by_name) do
        local real = uv.fs_realpath(buf_name)
        if real then by_real[real] = by_real[real] or buf end
      end
    end
    local real = uv.fs_realpath(path)
    return real and by_real[real] or nil
  end
end

--- The buffer whose file is the first of `candidates` (paths) that matches one, or nil.
---@param candidates string[]
---@return integer|nil
function M.find_buffer(candidates)
  local find = M.buffer_finder()
  for _, path in ipairs(candidates) do
    local buf = find(path, true)
    if buf then return buf end
  end
  for _, path in ipairs(candidates) do
    local buf = find(path)
    if buf then return buf end
  end
  return nil
end

-- Files a tool may make Neovim read. Neovim reads a file whole, in the thread that serves the
-- user: a FIFO blocks it in open() until a writer comes, for ever if none does (not even
-- SIGTERM ends that), /dev/zero never ends, and a big file freezes it and takes its size in
-- memory (200 MB: 1.7 s, 220 MB). The server sets the limit at start ($CLAUDE_NVIM_MAX_FILE_MB).
---@type integer
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

-- Why Neovim must not read a file whose fs_stat is `stat` (at `path`), or nil.
local function refusal(path, stat, limit)
  if stat.type ~= 'file' then
    return ('%s is not a regular file (%s)'):format(path, KINDS[stat.type] or stat.type)
  end
  if stat.size > (limit or M.max_file_bytes) then
    return ("%s is %s, over claude-nvim's limit of %s for opening files "
      .. '(CLAUDE_NVIM_MAX_FILE_MB)'):format(path, size(stat.size), size(limit or M.max_file_bytes))
  end
  return nil
end

local OPEN_FLAGS = bit.bor(uv.constants.O_RDONLY, uv.constants.O_NONBLOCK,
                           uv.constants.O_NOCTTY or 0)

--- Why Neovim must not open the file at `path` for Claude (a tool, claude's $VISUAL), or nil
--- (also when there is none: a new file). Checked as a reload checks: what stat says of the
--- path, then what fstat says of it opened without blocking (no FIFO holds Neovim in open()).
---@param path string
---@return string|nil why
function M.unloadable(path)
  local stat = uv.fs_stat(path)
  local why = stat and refusal(path, stat)
  if why or not stat then return why end
  local fd = uv.fs_open(path, OPEN_FLAGS, 0)
  if fd == nil then return nil end  -- unreadable: Neovim says so as it loads it
  stat = uv.fs_fstat(fd)
  uv.fs_close(fd)
  return stat and refusal(path, stat)
end
local function unreadable(path, err)  -- luv's "EACCES: permission denied: /path"
  return ('%s cannot be read (%s)'):format(path, tostring(err):match('^%u+: ([^:]+)') or err)
end

--- The bytes of the regular file at `path` and its fstat, read from one descriptor: opened
--- without blocking (a FIFO a racing process puts in its place cannot hold Neovim in open()),
--- checked with fstat (a regular file within `limit` bytes), never opened again by path.
--- Or nil and why not.
---@param path string
---@param limit? integer bytes; default M.max_file_bytes
---@return string|nil data
---@return uv.fs_stat.result|string stat_or_why
function M.read_file(path, limit)
  local fd, err = uv.fs_open(path, OPEN_FLAGS, 0)
  if fd == nil then return nil, unreadable(path, err) end
  local stat = uv.fs_fstat(fd)
  local why = stat == nil and path .. ' cannot be read' or refusal(path, stat, limit)
  limit = limit or M.max_file_bytes
  local chunks, total = {}, 0
  while why == nil do  -- to the end, which a file being appended to may have moved
    local chunk, read_err = uv.fs_read(fd, math.max(stat.size - total, 0) + 65536, total)
    if chunk == nil then
      why = unreadable(path, read_err)
    elseif chunk == '' then
      break
    else
      chunks[#chunks + 1], total = chunk, total + #chunk
      if total > limit then why = refusal(path, { type = 'file', size = total }, limit) end
    end
  end
  uv.fs_close(fd)
  if why then return nil, why end
  return #chunks == 1 and chunks[1] or table.concat(chunks), stat --[[@as uv.fs_stat.result]]
end

--- The buffer of file `path` loaded, as :edit loads it for the user: `buf` (the file's buffer)
--- or a new unlisted one, with no swap file if `private` (it is only the tool's). An error in
--- the file's modeline or in an autocmd is Neovim's message to the user, not the tool's failure.
--- A file M.unloadable refuses is not touched, and gets no buffer. Returns the buffer, or nil
--- and why not.
---@param path string
---@param buf? integer
---@param private? boolean
---@return integer|nil buf
---@return string? why
function M.load(path, buf, private)
  if buf and api.nvim_buf_is_loaded(buf) then return buf end
  local why = M.unloadable(buf and api.nvim_buf_get_name(buf) or path)
  if why then return nil, why end
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

--- The lines of `text`, each ended by "\n": "a\nb\n" -> { 'a', 'b' }.
---@param text string
---@return string[]
function M.split_lines(text)
  local lines = vim.split(text, '\n', { plain = true })
  lines[#lines] = nil
  return lines
end
local split = M.split_lines

-- ---------------------------------------------------------------------------------------------
-- More helpers: messages (to the server, to the user), workspace folders, lines by path

--- Notify the server. A dead channel (the server went away) switches its claude-nvim off here,
--- so no autocmd ever raises "Invalid channel" at the user.
---@param event string
---@param ... any
---@return boolean sent
function M.notify(event, ...)
  if M.chan == nil then return false end
  if pcall(vim.rpcnotify, M.chan, event, ...) then return true end
  M.unload(M.chan)
  return false
end

--- A line in the server's log. level: 'debug', 'info', 'warn', 'error' or a vim.log.levels
--- number; any other level still logs (as a warning).
---@param level 'debug'|'info'|'warn'|'error'|integer
---@param msg string
---@return boolean sent
function M.log(level, msg) return M.notify('claude_nvim_log', level, msg) end

--- Tell the user `msg` (claude_nvim.tell, the one way); when this screen has no room at all,
--- the server's log has it.
---@param msg string
---@param level? 'INFO'|'WARN'|'ERROR'
function M.tell(msg, level)
  if not require('claude_nvim.tell').tell(msg, level) then
    M.log('warn', 'not shown (no room on the screen): ' .. msg)
  end
end

--- Wrap an autocmd callback: its errors go to the server's log, not to :messages.
---@generic F: function
---@param fn F
---@return F
function M.guard(fn)
  return function(...)
    local ok, err = pcall(fn, ...)
    if not ok then M.log('error', tostring(err)) end
  end
end

--- The workspace folders: the current directory, then the language servers' folders.
---@return string[]
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

--- A reader of lines by (path, 0-based row[, buf]): from `buf` or the loaded buffer of `path`
--- when there is one, else from the file, read once. Reading stops at 4 MB of files per reader,
--- so that a long answer never holds Neovim up: lines past that are nil.
---@return fun(path: string, row: integer, buf?: integer): string|nil
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
    if files[path] == nil then  -- as readfile() reads it: a CR before each NL dropped
      local data = budget > 0 and M.read_file(path, budget)
      budget = budget - (data and #data or 0)
      files[path] = data and split((data:gsub('\r\n', '\n'):gsub('^\239\187\191', '')
        :gsub('[^\n]$', '%0\n'))) or {}
    end
    return files[path][row + 1]
  end
end

-- ---------------------------------------------------------------------------------------------
-- 2. The server's lifecycle, in its order: the claim (_nvim/lua.py's CLAIM_LUA: live_server,
-- then M.modules), setup, publish, ready, clients (as Claudes come and go), unload -> stop.
-- Tools never call these.

--- Start core for the server on channel `opts.chan`: the records of what Neovim last saw of
--- each file and of the user's editor windows, and the workspace folders' changes.
--- `opts.max_file_bytes`: the limit of M.unloadable; `opts.editor_script`: the path of
--- claude_editor.lua.
---@param opts {chan: integer, max_file_bytes?: integer, editor_script?: string}
function M.setup(opts)
  M.chan = opts.chan
  M.max_file_bytes = opts.max_file_bytes or M.max_file_bytes
  M.editor_script = opts.editor_script
  local group = api.nvim_create_augroup('claude_nvim', { clear = true })
  require('claude_nvim.reload').start(group)
  editors = {}
  local previous = vim.fn.win_getid(vim.fn.winnr('#'))
  for _, win in ipairs({ previous, api.nvim_get_current_win() }) do
    if win ~= 0 and M.is_editor(win) then table.insert(editors, 1, win) end
  end
  api.nvim_create_autocmd({ 'WinEnter', 'BufEnter' }, { group = group, callback = entered })
  local function folders_changed()
    vim.schedule(M.guard(function() M.notify('claude_nvim_folders', M.workspace_folders()) end))
  end
  api.nvim_create_autocmd({ 'DirChanged', 'LspAttach', 'LspDetach' }, {
    group = group, callback = folders_changed,
  })
end

--- The live server of this Neovim: its record (vim.g.claude_nvim_server: channel, pid, port,
--- clients, and once ready `claude`, what a claude needs to connect), or nil. A server that died
--- without cleaning up leaves its record behind: its channel is gone. The one test of "is a
--- server here": the claim (_nvim/lua.py's CLAIM_LUA), the Neovim plugin and the doctor ask it.
---@return claude_nvim.ServerRecord|nil
function M.live_server()
  local info = vim.g.claude_nvim_server
  if type(info) ~= 'table' or info.channel == nil then return nil end
  -- A closed channel has no id (Neovim 0.10 gives its info as {[true] = 6}, not {}).
  if api.nvim_get_chan_info(info.channel).id == nil then return nil end
  return info
end

--- Listening on `port`: the environment a `claude` needs to connect here (docs/protocol.md §4),
--- set in Neovim's own so that `claude` started from any :terminal connects here. `remote`: the
--- server runs on another host, where claude runs too: its no_proxy and NO_PROXY there, and
--- nothing is set here.
---@param port integer
---@param remote table<string, string>|nil
---@return {pid: integer, folders: string[], env: table<string, string>}
function M.publish(port, remote)
  if remote == vim.NIL then remote = nil end
  M.port = port
  local info = vim.g.claude_nvim_server or {}
  info.port = port
  vim.g.claude_nvim_server = info
  local env = M.claude_env(port, remote)
  if not remote then
    for var, value in pairs(env) do
      if not M.EDITOR_VARS[var] then vim.env[var] = value end
    end
  end
  return { pid = vim.fn.getpid(), folders = M.workspace_folders(), env = env }
end

--- What the claude started with this is told of its editor: not set in Neovim's environment.
M.EDITOR_VARS = { VISUAL = true, EDITOR = true, CLAUDE_NVIM_USER_EDITOR = true,
                  CLAUDE_NVIM_HOLDER = true }

--- The environment a `claude` needs to connect to a server on `port` (M.publish; the plugin
--- reads it before its server is up: socket activation). `remote`: as M.publish's.
---@param port integer
---@param remote table<string, string>|nil
---@return table<string, string>
function M.claude_env(port, remote)
  local env = { CLAUDE_CODE_SSE_PORT = tostring(port), ENABLE_IDE_INTEGRATION = 'true',
                FORCE_CODE_TERMINAL = 'true' }
  for _, var in ipairs({ 'no_proxy', 'NO_PROXY' }) do
    local value = (remote or vim.env)[var] or ''
    local have = {}
    for _, host in ipairs(vim.split(value, ',', { trimempty = true })) do
      have[vim.trim(host)] = true
    end
    for _, host in ipairs({ 'localhost', '127.0.0.1', '::1' }) do
      if not have[host] then value = value == '' and host or (value .. ',' .. host) end
    end
    env[var] = value
  end
  local editor = not remote and M.editor_command()
  if editor then  -- only for the claudes started with this: not in Neovim's environment
    env.VISUAL, env.EDITOR = editor, editor
    -- Set by a holder for its claude (claude_editor.lua reads it): not inherited from one.
    env.CLAUDE_NVIM_HOLDER = ''
    local own = vim.env.CLAUDE_NVIM_USER_EDITOR or vim.env.VISUAL or vim.env.EDITOR or ''
    env.CLAUDE_NVIM_USER_EDITOR = own ~= editor and own or ''
  end
  return env
end

--- The command claude runs as its editor (Ctrl+G, plans, memory: $VISUAL and $EDITOR): this
--- Neovim's nvim running claude_editor.lua, which opens the file here (see that file); nil when
--- vim.g.claude_nvim_opts.editor is false. claude splits the command on spaces, with no shell:
--- a path with a space is reached through a symlink in a private directory without one.
---@return string|nil
function M.editor_command()
  local opts = vim.g.claude_nvim_opts
  if not M.editor_script or (type(opts) == 'table' and opts.editor == false) then return nil end
  local dir = vim.fn.stdpath('run') .. '/claude-nvim'
  local function spaceless(path, name)
    if not path:find(' ', 1, true) then return path end
    if dir:find(' ', 1, true) then return nil end
    vim.fn.mkdir(dir, 'p', tonumber('700', 8))
    local link = dir .. '/' .. name
    uv.fs_unlink(link)
    return uv.fs_symlink(path, link) and link or nil
  end
  -- This Neovim's binary, unless it runs through something else (a loader); named nvim in the
  -- command, so that claude adds the line (+N).
  local progpath = vim.v.progpath
  if not vim.fs.basename(progpath):match('^nvim') then
    progpath = vim.env.CLAUDE_NVIM_NVIM or vim.fn.exepath('nvim')
  end
  if progpath == '' then return nil end
  local nvim = spaceless(progpath, 'nvim')
  local script = spaceless(M.editor_script, 'claude_editor.lua')
  return nvim and script and (nvim .. ' -l ' .. script) or nil
end

--- Ready (the lock file is written): `claude` = {env, args}, what a claude started by anyone
--- needs to use this server fully (its environment, and its command-line arguments: files the
--- server wrote). Kept in the record and announced: `User ClaudeNvimServerReady`, data: the
--- record. Whoever waits for a server waits for that.
---@param claude {env: table<string, string>, args: string[]}
function M.ready(claude)
  local info = vim.g.claude_nvim_server
  if type(info) ~= 'table' then return end
  info.claude = claude
  vim.g.claude_nvim_server = info
  pcall(api.nvim_exec_autocmds, 'User', { pattern = 'ClaudeNvimServerReady', data = info,
                                         modeline = false })
end

--- `count` Claudes are connected now, one more (`connected`) or one fewer: kept in
--- vim.g.claude_nvim_server.clients (statuslines read it) and told to the user's User autocmds.
---@param count integer
---@param connected boolean
function M.clients(count, connected)
  local info = vim.g.claude_nvim_server
  if type(info) ~= 'table' then return end
  info.clients = count
  vim.g.claude_nvim_server = info
  pcall(api.nvim_exec_autocmds, 'User', { modeline = false, data = { clients = count },
    pattern = connected and 'ClaudeNvimConnected' or 'ClaudeNvimDisconnected' })
end

--- The terminal buffers running a job or a held Claude: {buf, pid, name, label} (a Claude's
--- pid descends from one: the server's `_claudes` finds which); label: what the Neovim plugin
--- calls the Claude it runs there ("Claude 2"). A terminal whose job ended keeps its pid,
--- which a later process may get: it is not one of them.
---@return {buf: integer, pid: integer, name: string, label: string|nil}[]
function M.terminals()
  local found = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    local terminal = vim.bo[buf].buftype == 'terminal'
    -- A held Claude's terminal has no job: the Neovim plugin names its holder, which claude
    -- descends from, while claude runs.
    local pid = terminal and vim.b[buf].claude_nvim_pid
    if not pid and terminal and vim.bo[buf].channel > 0  -- a job's, still running (-1)
        and vim.fn.jobwait({ vim.bo[buf].channel }, 0)[1] == -1 then
      pid = vim.b[buf].terminal_job_pid
    end
    if pid then
      local n = vim.b[buf].claude_nvim_terminal
      found[#found + 1] = { buf = buf, pid = pid, name = api.nvim_buf_get_name(buf),
                            label = n and ('Claude ' .. n) or nil }
    end
  end
  return found
end

--- Core's own half of switching off: its autocmds, the server mark, the port in the
--- environment. The server calls M.unload, which checks that it owns Neovim first.
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

--- Switch claude-nvim off in this Neovim for the server on channel `chan`: each module it
--- installed stops (the last installed first: autocmds, timers, commands, diff tabs), then
--- core. Only while that server owns Neovim (CLAIM_LUA): a refused or replaced server, or a
--- dead one's leftover Lua, must leave the owner's half alone. Returns whether it did.
---@param chan integer
---@return boolean
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
