-- Past conversations of this project, as claude keeps them: one JSON line per event in
-- ${CLAUDE_CONFIG_DIR:-~/.claude}/projects/<the project's path, each character that is not a
-- letter or digit as '-'>/<session id>.jsonl (claude 2.1.332's format). A file is read at its
-- two ends only (its first prompt and start, its last event), so a long conversation costs no
-- more than a short one; a line or file that cannot be read is skipped, never an error.
local uv = vim.uv or vim.loop
local M = {}

local END_BYTES = 64 * 1024  -- read at each end of a file
local MOST = 100             -- the newest conversations listed
local TITLE_CHARS = 200      -- of a first prompt, shown

---@class claude_nvim.Session
---@field id string the session id (`claude --resume <id>`)
---@field title string its name, summary or first prompt, on one line
---@field started integer|nil when it began (seconds since the epoch)
---@field ended integer its last event, else when its file was written last (epoch seconds)

--- The directory where claude keeps `project`'s conversations.
---@param project string an absolute path
---@return string
function M.directory(project)
  local config = vim.env.CLAUDE_CONFIG_DIR
  if config == nil or config == '' then config = vim.fn.expand('~/.claude') end
  return config .. '/projects/' .. project:gsub('[^%w]', '-')
end

-- `length` bytes of the file `fd` from `offset`, or '' when it cannot be read.
local function read(fd, offset, length)
  local data = length > 0 and uv.fs_read(fd, length, offset) or ''
  return type(data) == 'string' and data or ''
end

-- The seconds since the epoch of an ISO 8601 UTC time ("2026-11-27T08:37:30.823Z"), or nil
-- (the days counted as a proleptic Gregorian calendar does: os.time would read local time).
local function epoch(stamp)
  local y, m, d, h, mi, s = tostring(stamp):match('^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)')
  if not y then return nil end
  y, m = tonumber(y) - (tonumber(m) <= 2 and 1 or 0), tonumber(m)
  local era = math.floor(y / 400)
  local year = y - era * 400
  local day = math.floor((153 * (m + (m > 2 and -3 or 9)) + 2) / 5) + tonumber(d) - 1
  local days = era * 146097 + year * 365 + math.floor(year / 4) - math.floor(year / 100) + day
    - 719468
  return days * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(s)
end

-- The whole JSON objects among `text`'s lines (a line cut at a read's end is skipped).
local function events(text, first, last)
  local found = {}
  local lines = vim.split(text, '\n', { plain = true })
  for i = first and 1 or 2, last and #lines or #lines - 1 do
    local ok, event = pcall(vim.json.decode, lines[i])
    if ok and type(event) == 'table' then found[#found + 1] = event end
  end
  return found
end

-- What a user event typed, when it is a prompt (not a tool's result or claude's own note).
local function typed(event)
  if event.type ~= 'user' or event.isMeta or type(event.message) ~= 'table' then return nil end
  local content = event.message.content
  if type(content) == 'table' then
    content = type(content[1]) == 'table' and content[1].type == 'text' and content[1].text
  end
  if type(content) ~= 'string' or content:match('^%s*<') then return nil end
  return content
end

local function one_line(text)
  text = vim.trim(text:gsub('%s+', ' '))
  return vim.fn.strcharpart(text, 0, TITLE_CHARS)
end

--- The conversation in the file `path` (modified last at `mtime`), or nil when none is found.
---@param path string
---@param mtime integer
---@param project string|nil when given, a conversation of another directory is skipped
---@return claude_nvim.Session|nil
function M.read(path, mtime, project)
  local fd = uv.fs_open(path, 'r', 0)
  if not fd then return nil end
  local stat = uv.fs_fstat(fd)
  if not stat or stat.type ~= 'file' then uv.fs_close(fd); return nil end
  local size = stat.size
  local head = read(fd, 0, math.min(size, END_BYTES))
  local tail = size > END_BYTES and read(fd, math.max(size - END_BYTES, END_BYTES),
    size - math.max(size - END_BYTES, END_BYTES)) or ''
  uv.fs_close(fd)
  local whole = size <= END_BYTES
  local first_events = events(head, true, whole)
  local last_events = whole and first_events or events(tail, false, true)
  local title, named, started, ended, cwd
  for _, event in ipairs(first_events) do
    cwd = cwd or (type(event.cwd) == 'string' and event.cwd or nil)
    started = started or epoch(event.timestamp)
    title = title or typed(event)
  end
  for _, event in ipairs(last_events) do
    ended = epoch(event.timestamp) or ended
    if event.type == 'summary' and type(event.summary) == 'string' then named = event.summary end
    if event.type == 'custom-title' and type(event.customTitle) == 'string' then
      named = event.customTitle
    end
    if event.type == 'last-prompt' and type(event.lastPrompt) == 'string' then
      title = title or event.lastPrompt
    end
  end
  if project and cwd and cwd ~= project then return nil end
  title = named or title
  if title == nil then return nil end  -- nothing said in it: nothing to go back to
  return { id = vim.fn.fnamemodify(path, ':t:r'), title = one_line(title), started = started,
           ended = ended or mtime }
end

--- `project`'s conversations, the newest first (at most the newest 100).
---@param project? string an absolute path; default: the current directory
---@return claude_nvim.Session[]
function M.list(project)
  project = project or vim.fn.getcwd()
  local dir = M.directory(project)
  local files = {}
  local handle = uv.fs_scandir(dir)
  while handle do
    local name, kind = uv.fs_scandir_next(handle)
    if name == nil then break end
    if kind == 'file' and name:match('%.jsonl$') then
      local stat = uv.fs_stat(dir .. '/' .. name)
      if stat then files[#files + 1] = { path = dir .. '/' .. name, mtime = stat.mtime.sec } end
    end
  end
  table.sort(files, function(a, b) return a.mtime > b.mtime end)
  local found = {}
  for i = 1, math.min(#files, MOST) do
    local ok, session = pcall(M.read, files[i].path, files[i].mtime, project)
    if ok and session then found[#found + 1] = session end
  end
  return found
end

-- "3 min", "2 h 5 min", "42 s".
local function duration(seconds)
  if seconds < 60 then return seconds .. ' s' end
  if seconds < 3600 then return math.floor(seconds / 60) .. ' min' end
  return ('%d h %d min'):format(math.floor(seconds / 3600), math.floor(seconds % 3600 / 60))
end

--- One line for the picker: when, how long, what.
---@param session claude_nvim.Session
---@return string
function M.describe(session)
  local when = os.date('%Y-%m-%d %H:%M', session.ended)
  local long = session.started and session.ended >= session.started
    and ' · ' .. duration(session.ended - session.started) or ''
  return when .. long .. ' · ' .. session.title
end

--- :ClaudeNvimResume: pick one of this project's past conversations (vim.ui.select) and go on
--- with it in a new Claude (`claude --resume <id>`), connected like any other.
---@param id? string a session id: that one, without asking
function M.resume(id)
  local terminal = require('claude_nvim.terminal')
  if id and id ~= '' then return terminal.new({ '--resume', id }) end
  local sessions = M.list()
  if #sessions == 0 then
    return require('claude_nvim').tell('no past conversation of ' .. vim.fn.getcwd()
      .. ' (claude keeps them in ' .. M.directory(vim.fn.getcwd()) .. ')', 'WARN')
  end
  vim.ui.select(sessions, { prompt = 'Resume a conversation', format_item = M.describe },
    function(session)
      if session then terminal.new({ '--resume', session.id }) end
    end)
end

return M
