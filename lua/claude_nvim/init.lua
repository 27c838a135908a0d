-- claude-nvim as a Neovim plugin: the options, the server it runs, the private install.
--
-- The server (the Python `claude-nvim`) installs its own modules over RPC as claude_nvim.core,
-- claude_nvim.mentions, claude_nvim.diffs, ...: this plugin owns `claude_nvim` and the files
-- under lua/claude_nvim/, and only calls into the server's modules while a server runs.
local api = vim.api
local uv = vim.uv or vim.loop

--- Where the Claude window opens (:help claude-nvim-opts.terminal).
---@class claude_nvim.TerminalOpts
---@field position? 'right'|'left'|'bottom'|'top'|'float'|'tab' default 'right'
---@field size? number below 1: a share of the editor (default 0.4); else cells

--- How Claude's proposed edits are shown (the server reads them too).
---@class claude_nvim.DiffOpts
---@field open_in? 'tab'|'current' default 'tab': a new tab; 'current': in this tab
---@field keep_focus? boolean true: the cursor stays in the Claude terminal; default false

--- claude's permission modes (claude 2.1.332's names; 'manual' is its default mode).
---@alias claude_nvim.PermissionMode
---| 'manual' each edit a diff to answer
---| 'auto'|'acceptEdits'|'dontAsk'|'bypassPermissions' edits written without a diff
---| 'plan'

--- How the plugin starts claude (:help claude-nvim-opts.claude).
---@class claude_nvim.ClaudeOpts
---@field permission_mode? claude_nvim.PermissionMode nil: claude's own
---@field args? string[] more arguments for every claude the plugin starts
---@field outlive? boolean Claudes and the server run on when Neovim quits (default true)

--- Where Claude runs when not here (:help claude-nvim-remote).
---@class claude_nvim.RemoteOpts
---@field target? string 'ssh://[user@]host[:port]/path', 'docker://box/path', ...; nil: here
---@field args? string[] `claude-nvim remote` options before the target (--ssh, --path-map ...)

--- The options of setup() (:help claude-nvim-opts); all optional.
---@class claude_nvim.Config
---@field cmd? string|string[] the claude-nvim to run; nil: the private install, else PATH
---@field python? string the Python for the private install; nil: python3.14 ... python3
---@field packages? string[] tool packages for the private install too, as pip names them
---@field start_server? 'startup'|'first_use' when the server starts; default 'first_use'
---@field terminal? claude_nvim.TerminalOpts
---@field diff? claude_nvim.DiffOpts
---@field remote? claude_nvim.RemoteOpts
---@field claude? claude_nvim.ClaudeOpts
---@field prompts? table<string, string|false> named prompts for :ClaudeNvimPrompt
---@field code_actions? boolean "Fix with Claude" in code actions on diagnostics (default true)
---@field follow? boolean|'all' follow Claude's edits in the editor window (default false)
---@field editor? boolean claude's $VISUAL/$EDITOR is this Neovim (default true)
---@field notify? boolean say when a Claude out of sight waits or is done (default true)
---@field bell? boolean ring the terminal's bell then too (default false)

local M = {}

---@type claude_nvim.Config
local defaults = {
  cmd = nil,                 -- the claude-nvim to run ('path' or { 'cmd', 'arg' }); nil: the
                             -- private install, else claude-nvim on PATH
  python = nil,              -- the Python for the private install; nil: python3.14 ... python3
  packages = {},             -- tool packages for it too: paths, 'git+https://...', PyPI names
  start_server = 'first_use', -- 'first_use': at the first command; 'startup': once a UI is up
  terminal = {               -- the Claude window
    position = 'right',      -- 'right' 'left' 'bottom' 'top' 'float' 'tab'
    size = 0.4,              -- below 1: a share of the editor; else cells
    bar = true,              -- its window bar lists the Claudes and their states
  },
  diff = {                   -- Claude's proposed edits
    open_in = 'tab',         -- 'tab': a new tab; 'current': this tab, beside Claude
    keep_focus = false,      -- true: the cursor stays in Claude's terminal
    layout = 'vertical',     -- 'vertical', 'horizontal' or 'inline'
  },
  editor = true,             -- claude's $VISUAL/$EDITOR (Ctrl+G, plans, memory) is this Neovim
  notify = true,             -- say when a Claude out of sight waits for you or is done
  bell = false,              -- and ring the terminal's bell
  remote = {                 -- Claude on another host or in a container
    target = nil,            -- 'ssh://[user@]host[:port]/path', 'docker://box/path', nil: here
    args = {},               -- options of `claude-nvim remote`, e.g. { '--path-map', 'A=B' }
  },
  claude = {                 -- how the plugin starts claude
    permission_mode = nil,   -- 'manual' (each edit a diff), 'auto', 'acceptEdits', 'plan' ...;
                             -- nil: claude's own (its settings, else auto: no diffs, review)
    args = {},               -- more arguments for every claude, e.g. { '--model', 'opus' }
    outlive = true,          -- Claudes outlive Neovim (held; :ClaudeNvimStop ends them)
  },
  prompts = {},              -- :ClaudeNvimPrompt's named prompts, over its own (false: removed)
  code_actions = true,       -- "Fix with Claude" and "Explain with Claude" on diagnostics
  follow = false,            -- true: show the file Claude writes; 'all': hidden Claudes' too
}

--- The options in force: the defaults with setup()'s `opts` over them.
---@type claude_nvim.Config
M.config = vim.deepcopy(defaults)

-- Publish the options the server's Lua reads (it runs without this plugin too).
local function publish()
  vim.g.claude_nvim_opts = { diff = M.config.diff, python = M.config.python,
                             packages = M.config.packages, editor = M.config.editor,
                             follow = M.config.follow }
end

--- Configure the plugin (lazy.nvim calls it with the spec's `opts`).
---@param opts? claude_nvim.Config
function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(defaults), opts or {})
  publish()
end

-- The server's half of this checkout: the plugin reads its files before any server runs.
local SERVER_LUA = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h:h')
  .. '/src/claude_nvim/'

---@class claude_nvim.Telling claude_nvim.tell's module
---@field tell fun(msg: string, level?: 'INFO'|'WARN'|'ERROR'): boolean
---@field fit fun(s: string, width: integer): string

---@type claude_nvim.Telling
local telling = dofile(SERVER_LUA .. '_core/tell.lua')
--- Tell the user `msg`: claude_nvim.tell, the one way (the server's Lua tells the same way).
M.tell = telling.tell
--- `s` cut to at most `width` screen cells, '…' included (claude_nvim.tell's one cut).
M.fit = telling.fit
local tell = M.tell

local user_commands = nil  -- this checkout's claude_nvim.user_commands, read on first use
--- `list` sorted in place, the most severe first (claude_nvim.user_commands' one order).
---@param list vim.Diagnostic[]
---@return vim.Diagnostic[] list
function M.most_severe_first(list)
  user_commands = user_commands or dofile(SERVER_LUA .. '_core/user_commands.lua')
  return user_commands.most_severe_first(list)
end

--- This checkout's version, claude_nvim.__version__ as its Python part has it (its one home),
--- or nil when that file cannot be read.
---@return string|nil
function M.version()
  local root = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h:h')
  local file = io.open(root .. '/src/claude_nvim/__init__.py', 'r')
  if not file then return nil end
  local text = file:read('*a')
  file:close()
  return text:match('\n__version__ = "([^"]+)"')
end

--- The directory of the private install (a venv): stdpath('data')/claude-nvim/venv.
---@return string
function M.venv() return require('claude_nvim.install').venv() end

--- The claude-nvim command to run, as a list, and where it came from ('opts.cmd', 'private
--- install', 'PATH'); nil and advice when there is none.
---@return string[]|nil command
---@return string source_or_advice
function M.command()
  local cmd = M.config.cmd
  if type(cmd) == 'string' then return { cmd }, 'opts.cmd' end
  if type(cmd) == 'table' and #cmd > 0 then return vim.deepcopy(cmd), 'opts.cmd' end
  local private = M.venv() .. '/bin/claude-nvim'
  if vim.fn.executable(private) == 1 then return { private }, 'private install' end
  if vim.fn.executable('claude-nvim') == 1 then return { vim.fn.exepath('claude-nvim') }, 'PATH' end
  return nil, 'no claude-nvim: run :ClaudeNvimInstall (lazy.nvim runs it at install), or set '
    .. 'opts.cmd, or put claude-nvim on PATH (pipx install / uv tool install)'
end

--- The live server of this Neovim, as its claude_nvim.core keeps it (port, clients, and once
--- ready `claude`: what a claude needs), or nil when none runs.
---@return claude_nvim.ServerRecord|nil
function M.server()
  local core = package.loaded['claude_nvim.core']
  return type(core) == 'table' and core.live_server and core.live_server() or nil
end

--- The live server's Lua module claude_nvim.<name> ('core', 'diffs', 'review', 'mentions',
--- ...), or nil while no server of this Neovim is live: the one way the plugin reaches the
--- server's half (whose modules outlive a server that died without switching them off).
---@param name string
---@return table|nil
function M.live(name)
  if not M.server() then return nil end
  local mod = package.loaded['claude_nvim.' .. name]
  return type(mod) == 'table' and mod or nil
end
local server = M.server

local function ready_server()
  local info = server()
  return info and type(info.claude) == 'table' and info or nil
end

-- What the Claudes of this Neovim's server show: how many are connected, their entries (the
-- hooks' states), the diffs waiting for a verdict, the files of the last turn left to review.
local function shown()
  local info = server()
  local count = info and tonumber(info.clients) or 0
  local diffs, review = M.live('diffs'), M.live('review')
  return count, info and info.claudes,
    diffs and diffs.pending and diffs.pending() or 0,
    review and review.to_review and review.to_review() or 0
end

--- For statuslines: "" when no Claude is connected, else e.g. "Claude", "Claude · waiting",
--- "Claude ×2 · Claude 2 waiting", "Claude ×2 · 1 diff" or "Claude · 3 files to review" (its
--- last turn's changes, until :ClaudeNvimReview).
---@return string
function M.status()
  local count, claudes, pending, files = shown()
  if count == 0 then return '' end
  local text = count > 1 and ('Claude ×' .. count) or 'Claude'
  local states = require('claude_nvim.claudes').states(claudes, count)
  if states then text = text .. ' · ' .. states end
  if pending > 0 then text = text .. ' · ' .. pending .. (pending > 1 and ' diffs' or ' diff') end
  if files > 0 then text = text .. ' · ' .. files .. (files > 1 and ' files' or ' file')
    .. ' to review' end
  return text
end

--- The highlight group for status() now: the state that most needs the user first,
--- 'ClaudeNvimWaiting' (a Claude asks, or a diff waits for a verdict), 'ClaudeNvimToReview',
--- 'ClaudeNvimWorking', 'ClaudeNvimDone'; nil when no Claude is connected or none is known.
---@return string|nil
function M.status_highlight()
  local count, claudes, pending, files = shown()
  if count == 0 then return nil end
  local states = {}
  for _, entry in ipairs(type(claudes) == 'table' and claudes or {}) do
    if type(entry) == 'table' and type(entry.state) == 'string' then states[entry.state] = true end
  end
  if states.waiting or pending > 0 then return 'ClaudeNvimWaiting' end
  if files > 0 then return 'ClaudeNvimToReview' end
  if states.working then return 'ClaudeNvimWorking' end
  if states.done then return 'ClaudeNvimDone' end
  return nil
end

-- The server runs in a job of its own (`claude-nvim serve`), as long as Neovim: one Python
-- process for any number of Claudes, which the plugin starts itself with what the server
-- publishes. Whoever needs it waits for its announcement (User ClaudeNvimServerReady).
local serving = nil  -- the server's job (id, or { stop }), while the one this plugin started runs
local waiting = {}   -- {ready = fn(info), failed = fn(why)}: for a ready server
local stopped = {}   -- what to call once the server's job has exited (M.stop_server)
local served = {}    -- job id -> true: that job's server was ready once
local serve         -- starts a server, or has this project's lingering one attach here

local function settle(ok, value)
  local now = waiting
  waiting = {}
  for _, waiter in ipairs(now) do
    local done, err = pcall(ok and waiter.ready or waiter.failed, value)
    if not done then tell(tostring(err), 'ERROR') end
  end
end

api.nvim_create_autocmd('User', { pattern = 'ClaudeNvimServerReady',
  group = api.nvim_create_augroup('claude_nvim_plugin', { clear = true }),
  callback = function()  -- after the server's call that announced it
    if serving then served[serving] = true end
    vim.schedule(function()
      local info = ready_server()
      if info then settle(true, info) end
    end)
  end })

local activated = nil  -- the socket activation of the running server (claude_nvim.activate)
local asking = false   -- while this project's lingering server is asked to attach here

-- The server's job has exited, with `code`.
local function exited(job, code, said)
  if serving == job then serving = nil end
  if activated and activated.job == job then
    require('claude_nvim.activate').clean_up(activated)
    activated = nil
  end
  -- Refused as another server is starting here: that one will announce itself. One that
  -- served and ended (a remote one whose connection dropped) is followed by a new one for who
  -- waits meanwhile.
  if #waiting > 0 and not server() then
    if served[job] and serving == nil then
      serve()
    else
      settle(false, said or ('the claude-nvim server exited with code ' .. code))
    end
  end
  served[job] = nil
  local now = stopped  -- last: they may start the next server
  stopped = {}
  for _, done in ipairs(now) do done() end
end

-- The last line of error in `lines` ("claude-nvim: why"), or `said`.
local function error_line(lines, said)
  for _, line in ipairs(lines) do
    if line:match('^claude%-nvim: ') then said = line:sub(14) end
  end
  return said
end

-- How long after a claude it is started for the activated server starts. Its start (~140 ms
-- of CPU until it waits for claude) beside claude's first ~300 ms slowed claude's own, which
-- takes both cores of a 2-core machine; claude connects no sooner than ~900 ms after it
-- starts, and its connection waits in the socket's backlog meanwhile.
local SERVER_AFTER_CLAUDE_MS = 300

-- The server on a socket bound here (claude_nvim.activate): spawned with the listening socket
-- as its fd 3, which jobstart cannot hand over. Its job is a table { stop = fn }. `detach`: it
-- may outlive Neovim (then it ends by itself). Spawned on the next turn of the loop (the
-- claude waiting for it starts first, and forking Neovim for the server, up to ~10 ms, is not
-- on the way to its start), or SERVER_AFTER_CLAUDE_MS later when `for_claude` (and Neovim's
-- loop does not watch the socket meanwhile: activation.unwatched).
local function serve_activated(cmd, args, activation, detach, for_claude)
  local activate = require('claude_nvim.activate')
  local job, process, cancelled = {}, nil, false ---@type table, uv.uv_process_t?, boolean
  local spawn ---@type fun()
  job.stop = function()
    cancelled = true
    if process and not process:is_closing() then process:kill('sigterm') end
    spawn()  -- if it has not started, its job ends now
  end
  activation.job = job
  serving, activated = job, activation
  args = vim.list_extend(vim.list_slice(cmd, 2), vim.list_extend(args, { '--listen-fd', '3' }))
  -- It answers a claude's connection before it loads (src/claude_nvim/_wire/early.py): with
  -- no claude starting, it loads at once.
  local env = for_claude and activation.env
    or vim.list_extend(vim.deepcopy(activation.env), { 'CLAUDE_NVIM_EARLY_SECONDS=0' })
  local cwd, spawned = vim.fn.getcwd(), false
  function spawn()
    if spawned then return end
    spawned = true
    if cancelled then  -- stopped before it started
      activate.handed_over(activation)
      return exited(job, 0, nil)
    end
    local said, rest, stderr = nil, '', uv.new_pipe(false)  -- rest: stderr's unfinished line
    local pid
    process, pid = uv.spawn(cmd[1], { args = args, env = env, detached = detach,
      stdio = { nil, nil, stderr, activation.fd }, cwd = cwd },
      function(code) vim.schedule(function()
        if process then process:close() end
        stderr:close()
        exited(job, code, error_line({ rest }, said))
      end) end)
    activate.handed_over(activation)
    if not process then
      stderr:close()
      return exited(job, 127, 'cannot run ' .. cmd[1] .. ': ' .. tostring(pid))
    end
    stderr:read_start(function(_, data)
      if not data then return end
      local lines = vim.split(rest .. data, '\n')
      rest = table.remove(lines)
      said = error_line(lines, said)
    end)
  end
  if not (for_claude and activation.unwatched) then return vim.schedule(spawn) end
  -- Neovim quitting first: it starts then, as it would have before (its claude may be reading
  -- the --mcp-config file, which it removes as it ends).
  local leaving = api.nvim_create_autocmd('VimLeavePre', { once = true, callback = spawn })
  vim.defer_fn(function()
    pcall(api.nvim_del_autocmd, leaving)
    spawn()
  end, SERVER_AFTER_CLAUDE_MS)
end

-- The server in a job of Neovim's, binding its own socket.
local function start_server(cmd, args, detach)
  local said = nil  -- its last line of error, if it fails
  local job = vim.fn.jobstart(vim.list_extend(cmd, args), {
    detach = detach,  -- one that outlives Neovim while Claudes need it ends by itself
    on_stderr = function(_, lines) said = error_line(lines, said) end,
    on_exit = function(job, code) vim.schedule(function() exited(job, code, said) end) end,
  })
  if job <= 0 then return settle(false, 'cannot run ' .. cmd[1]) end
  serving = job
end

-- Socket activation, unless the server is not this host's (opts.remote), the user disabled
-- tools (then the claude the server serves gets other arguments) or on Windows (no socket is
-- inherited as an fd there).
local function activation_wanted(cmd)
  return require('claude_nvim.remote').target() == nil and vim.fn.has('win32') == 0
    and (vim.env.CLAUDE_NVIM_DISABLE or '') == '' and not vim.tbl_contains(cmd, '--disable')
end

--- Start a server for this Neovim (unless one of this plugin's runs): this project's server
--- that outlived the last Neovim if it will attach here; else one on a socket bound here
--- (claude_nvim.activate), so that a claude can start at once; else one that binds its own.
--- `for_claude`: a claude starts now (the activated server waits for it before it loads).
---@param for_claude? boolean
function M.serve(for_claude)
  if serving or asking then return end
  local cmd, why = M.command()
  if cmd == nil then return settle(false, why) end
  if vim.v.servername == '' then
    return settle(false, 'this Neovim has no RPC address (v:servername)')
  end
  local args, refused = require('claude_nvim.remote').serve_args(vim.v.servername)
  if refused then return settle(false, refused) end
  if args then return start_server(cmd, args, false) end  -- remote servers do not linger
  local outlive = M.config.claude.outlive ~= false
  args = { 'serve', '--nvim', vim.v.servername }
  if not outlive then table.insert(args, '--no-linger') end
  local function start()
    if activation_wanted(cmd) then
      local activation = require('claude_nvim.activate').prepare(SERVER_LUA)
      if activation then return serve_activated(cmd, args, activation, outlive, for_claude) end
    end
    start_server(cmd, args, outlive)
  end
  local linger = require('claude_nvim.linger')
  local lingering = outlive and linger.find()
  if not lingering then return start() end
  asking = true
  linger.ask(lingering, vim.v.servername, function(attached)
    asking = false
    if not attached and not server() then start() end
  end)
end
serve = M.serve

--- Call `ready(info)` at once with what a claude needs when the server's socket is bound
--- (socket activation: claude's connection waits for the server), else as M.when_ready.
---@param ready fun(info: {claude: {env: table<string, string>, args: string[]}})
---@param failed fun(why: string)
function M.when_listening(ready, failed)
  local info = ready_server()
  if info then return ready(info) end
  if not server() then serve(true) end
  if activated then return ready(activated) end
  M.when_ready(ready, failed)
end

--- Call `ready(info)` once a server is ready here (at once if one is), starting one if need
--- be; `failed(why)` if it cannot start.
---@param ready fun(info: claude_nvim.ServerRecord)
---@param failed fun(why: string)
function M.when_ready(ready, failed)
  local info = ready_server()
  if info then return ready(info) end
  waiting[#waiting + 1] = { ready = ready, failed = failed }
  if not server() then serve() end  -- a live one that is not ready yet will announce itself
end

--- Stop the server this plugin started, then `done()` (at once when none runs); false, and
--- nothing done, when the live server is not the plugin's.
---@param done fun()
---@return boolean
function M.stop_server(done)
  if serving == nil then
    if server() then return false end
    done()
    return true
  end
  stopped[#stopped + 1] = done
  if type(serving) == 'table' then serving.stop() else vim.fn.jobstop(serving) end
  return true
end

--- Start the server now, unless opts.start_server is 'first_use' (or one runs).
function M.start_ahead()
  if M.config.start_server ~= 'first_use' and not server() then serve() end
end

--- Get a mention to the server: `deliver(mentions)` once it is ready. With no Claude
--- connected or running, one starts too (the server keeps the mention for it).
---@param deliver fun(mentions: table) gets the server's claude_nvim.mentions module
function M.mention(deliver)
  local terminal = require('claude_nvim.terminal')
  local info = server()
  if (info == nil or (tonumber(info.clients) or 0) == 0) and not terminal.running() then
    terminal.open({})
  end
  M.when_ready(function() deliver(M.live('mentions')) end,
    function(why) tell('nothing sent: ' .. why, 'WARN') end)
end

--- Send files to Claude, as :ClaudeNvimAdd does (pickers' actions use it: claude_nvim.pickers):
--- `items` = paths, or { path = ..., line = n, end_line = m } (lines 1-based, optional).
---@param items (string|{path: string, line?: integer, end_line?: integer})[]
function M.add(items)
  local list = {}
  for _, item in ipairs(items) do
    if type(item) == 'string' then item = { path = item } end
    if type(item) == 'table' and type(item.path) == 'string' and item.path ~= '' then
      local line = tonumber(item.line)
      line = line and line > 0 and line or nil
      list[#list + 1] = { item.path, line, line and (tonumber(item.end_line) or line) }
    end
  end
  if #list == 0 then return tell('nothing to send', 'WARN') end
  M.mention(function(mentions) mentions.add_all(list, 'files') end)
end

--- Send `text` to the current Claude as if typed into its prompt box, and submit it (a Claude
--- starts if none runs). Its newlines stay in the prompt (a bracketed paste).
---@param text string
---@param opts? { submit?: boolean } submit: false leaves it in the prompt box (default true)
function M.send(text, opts) require('claude_nvim.prompt').send(text, opts) end

--- :ClaudeNvimInstall: (re)make the private install, without blocking Neovim.
function M.install()
  require('claude_nvim.install').start(M.config)
end

publish()
return M
