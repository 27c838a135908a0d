-- claude_nvim.lsp: what the lsp* tools share, asking the user's language servers without
-- blocking Neovim. A tool's own module (in its tools/*.py) requires this one and defines
-- M.run(id, req) with L.run; each call is answered later, once, through core.notify
-- ('claude_nvim_reply', see replies.py), and M.cancel = L.cancel stops one. One copy for
-- every tool: one `pending` table. Lifecycle: setup(opts) / stop().
local api = vim.api
local uv = vim.uv or vim.loop
local core = require('claude_nvim.core')
local NEW_API = vim.fn.has('nvim-0.11') == 1
local L = {}
---@type table<integer, { phase: string, cancel: function?, cleanup: function? }>
local pending = {}  -- reply id -> what we wait for, how to cancel it and clean up after it

-- Answering. Each reply id is answered once; a cancelled one never.
local function reply(id, ok, value)
  local p = pending[id]
  if p == nil then return end
  pending[id] = nil
  if p.cleanup then pcall(p.cleanup) end
  core.notify('claude_nvim_reply', id, ok, value)
end
--- Answer reply `id` with an error (once; not after a cancel).
---@param id integer a reply id
---@param message string
function L.fail(id, message) reply(id, false, message) end
--- Answer reply `id` with `value` (once; not after a cancel).
---@param id integer a reply id
---@param value any
function L.succeed(id, value) reply(id, true, value) end

--- `fn` wrapped so that an error in it answers the request instead of reaching the user.
---@param id integer a reply id
---@param fn function
---@return function
function L.guard(id, fn)
  return function(...)
    local ok, err = pcall(fn, ...)
    if not ok then L.fail(id, 'Internal error in Neovim: ' .. tostring(err)) end
  end
end

--- Start answering reply `id`: `phase` says what it waits for (in a timeout's message).
---@param id integer a reply id
---@param phase string
function L.begin(id, phase) pending[id] = { phase = phase } end

--- Stop answering reply `id` (a timeout, or the caller went away): what it waited for, or nil.
---@param id integer a reply id
---@return string|vim.NIL phase
function L.cancel(id)
  local p = pending[id]
  if p == nil then return vim.NIL end
  pending[id] = nil
  if p.cleanup then pcall(p.cleanup) end
  if p.cancel then pcall(p.cancel) end
  return p.phase or vim.NIL
end

-- Nothing to set: each request brings its limits (tools/_lsp_tools.py), which tests change per
-- call.
function L.setup() end

function L.stop()
  for id in pairs(pending) do L.cancel(id) end
end

-- Text helpers.

---@diagnostic disable-next-line: duplicate-set-field (emmylua 0.23 sees core.cut's own)
L.cut = core.cut

--- Position encodings: `index` in `enc` units -> byte in `line`, and back.
---@param line string
---@param enc 'utf-8'|'utf-16'|'utf-32'
---@param index integer
---@return integer
function L.byte_of(line, enc, index)
  if enc == 'utf-8' then return math.min(index, #line) end
  local ok, b = pcall(vim.str_byteindex, line, enc, index, false)
  if ok and type(b) == 'number' then return b end
  ok, b = pcall(vim.str_byteindex, line, index, enc == 'utf-16')  -- Neovim 0.10
  if ok and type(b) == 'number' then return b end
  return #line
end

---@param line string
---@param enc 'utf-8'|'utf-16'|'utf-32'
---@param byte integer
---@return integer
function L.index_of(line, enc, byte)
  if byte > #line then byte = #line end
  if enc == 'utf-8' then return byte end
  if enc == 'utf-16' then return core.utf16(line, byte) end
  local ok, n = pcall(vim.str_utfindex, line, 'utf-32', byte, false)
  if ok and type(n) == 'number' then return n end
  return (vim.str_utfindex(line, byte))  -- Neovim 0.10
end

--- LSP URIs -> {uri in our convention, path or nil}.
---@param uri string
---@return string uri
---@return string|nil path
function L.uri(uri)
  if type(uri) == 'string' and uri:match('^file:') then
    local path = vim.uri_to_fname(uri)
    return core.file_url(path), path
  end
  return uri, nil
end

--- An LSP range of a client with encoding `enc` in `path` -> our range (UTF-16 characters).
---@param range lsp.Range
---@param enc 'utf-8'|'utf-16'|'utf-32'
---@param path string|nil
---@param read fun(path: string, row: integer): string|nil a core.reader()
---@return {start: {line: integer, character: integer}, end: {line: integer, character: integer}}
function L.range(range, enc, path, read)
  local function pos(p)
    local character = p.character
    if enc ~= 'utf-16' and path then
      local text = read(path, p.line)
      if text then character = core.utf16(text, L.byte_of(text, enc, character)) end
    end
    return { line = p.line, character = character }
  end
  return { start = pos(range.start), ['end'] = pos(range['end'] or range.start) }
end

---@param kind integer
---@return string
function L.kind(kind)
  return vim.lsp.protocol.SymbolKind[kind] or tostring(kind)
end

-- Clients.

local function clients_of(buf, uninitialized)
  local get = vim.lsp.get_clients or vim.lsp.get_active_clients
  return get({ bufnr = buf, _uninitialized = uninitialized or nil })
end

local function supports(client, method, buf)
  if NEW_API then return client:supports_method(method, buf) end
  return client.supports_method(method, { bufnr = buf })
end

local function request(client, method, params, handler, buf)
  if NEW_API then return client:request(method, params, handler, buf) end
  return client.request(method, params, handler, buf)
end

local function cancel_request(client, request_id)
  if NEW_API then return client:cancel_request(request_id) end
  return client.cancel_request(request_id)
end

local function names(clients)
  local out = {}
  for _, c in ipairs(clients) do out[#out + 1] = c.name end
  return table.concat(out, ', ')
end

--- Initialized clients of `buf` (every buffer when nil) that support `method`.
---@param buf integer|nil
---@param method string
---@return vim.lsp.Client[]
function L.ready(buf, method)
  local out = {}
  for _, c in ipairs(clients_of(buf)) do
    if c.initialized and supports(c, method, buf) then out[#out + 1] = c end
  end
  return out
end

local function starting(buf)
  for _, c in ipairs(clients_of(buf, true)) do
    if not c.initialized then return c end
  end
  return nil
end

--- Why no client can answer `method` for `buf` (nil: in all of Neovim).
---@param buf integer|nil
---@param method string
---@return string
function L.no_client(buf, method)
  local where = buf and (' attached to ' .. api.nvim_buf_get_name(buf)) or ' running in Neovim'
  local present = clients_of(buf)
  if #present == 0 then return 'No language server is' .. where end
  return ('No language server%s supports %s (%s: %s)'):format(
    where, method, buf and 'attached' or 'running', names(present))
end

--- The buffer of the first candidate path: a loaded buffer, or the file loaded into a hidden
--- (unlisted) buffer. Returns buf, fresh (loaded just now); or nil, message.
---@param candidates string[]
---@return integer|nil buf
---@return boolean|string|nil fresh_or_why
function L.open(candidates)
  local buf = core.find_buffer(candidates)
  if buf and api.nvim_buf_is_loaded(buf) then return buf, false end
  local path = buf and api.nvim_buf_get_name(buf) or core.existing(candidates)
  if path == nil then return nil, 'No such file: ' .. core.absolute(candidates[1]) end
  local refusal  -- a new buffer is loaded only to ask a server: no swap file for others
  buf, refusal = core.load(path, buf, true)
  if buf == nil then return nil, refusal end
  if vim.bo[buf].filetype == '' then
    api.nvim_buf_call(buf, function() vim.cmd('silent! filetype detect') end)
  end
  return buf, true
end

--- Call go(clients) once some clients of `buf` can answer `method`: now, or after a language
--- server still starting has attached (up to req.attach_ms), or, for a file just loaded, after
--- one attaches (up to req.fresh_ms). Else answer why not.
---@param id integer
---@param buf integer
---@param fresh boolean
---@param method string
---@param req table the call's arguments and limits (tools/_lsp_tools.py)
---@param go fun(clients: vim.lsp.Client[])
function L.when_ready(id, buf, fresh, method, req, go)
  local clients = L.ready(buf, method)
  if #clients > 0 then return go(clients) end
  local waiting = starting(buf)
  if not waiting and not fresh then return L.fail(id, L.no_client(buf, method)) end
  local p = pending[id]
  local path = api.nvim_buf_get_name(buf)
  p.phase = waiting and ('waiting for the language server ' .. waiting.name .. ' to start')
    or ('waiting for a language server to attach to ' .. path)
  local timer = uv.new_timer()
  local autocmd
  local function cleanup()
    if autocmd then pcall(api.nvim_del_autocmd, autocmd); autocmd = nil end
    if timer then timer:stop(); timer:close(); timer = nil end
  end
  p.cleanup = cleanup
  local patient = waiting ~= nil  -- waiting up to attach_ms, not just fresh_ms
  local function decide(final)
    if pending[id] ~= p then return end
    local ready = L.ready(buf, method)
    local still = starting(buf)
    if #ready == 0 and still and not final then return end  -- keep waiting
    if #ready == 0 and still and not patient then
      -- A server attached to the fresh file meanwhile and is starting: give it its time.
      patient = true
      p.phase = 'waiting for the language server ' .. still.name .. ' to start'
      timer:start(req.attach_ms, 0, vim.schedule_wrap(L.guard(id, function() decide(true) end)))
      return
    end
    cleanup(); p.cleanup = nil
    if #ready > 0 then return go(ready) end
    if still then
      return L.fail(id, ('The language server %s attached to %s did not finish starting '
        .. 'within %g s'):format(still.name, path, req.attach_ms / 1000))
    end
    L.fail(id, L.no_client(buf, method))
  end
  autocmd = api.nvim_create_autocmd('LspAttach', {
    buffer = buf,
    callback = function() vim.schedule(L.guard(id, function() decide(false) end)) end,
  })
  timer:start(waiting and req.attach_ms or req.fresh_ms, 0,
    vim.schedule_wrap(L.guard(id, function() decide(true) end)))
end

--- Send `method` to every client in `clients`; when all have answered, answer the call with
--- convert(answers, read), answers = { {client = c, result = r}, ... } (those without error).
--- Every client failing is an error.
---@param id integer
---@param buf integer|nil
---@param clients vim.lsp.Client[]
---@param method string
---@param params table|fun(client: vim.lsp.Client): table
---@param convert fun(answers: {client: vim.lsp.Client, result: any}[], read: function): any
function L.send(id, buf, clients, method, params, convert)
  local p = pending[id]
  if p == nil then return end
  local outstanding, answers, errors, sent = #clients, {}, {}, {}
  local function finish()
    if #answers == 0 and #errors > 0 then return L.fail(id, table.concat(errors, '; ')) end
    L.succeed(id, convert(answers, core.reader()))
  end
  for _, client in ipairs(clients) do
    local client_params = type(params) == 'function' and params(client) or params
    local handler = L.guard(id, function(err, result)
      if sent[client.id] == false then return end
      sent[client.id] = false
      if err then
        errors[#errors + 1] = ('%s answered %s with an error: %s'):format(
          client.name, method, type(err) == 'table' and tostring(err.message) or tostring(err))
      else
        answers[#answers + 1] = { client = client, result = result }
      end
      outstanding = outstanding - 1
      if outstanding == 0 then finish() end
    end)
    local ok, request_id = request(client, method, client_params, handler, buf)
    if ok and request_id and sent[client.id] == nil then
      sent[client.id] = request_id
    elseif not ok then
      errors[#errors + 1] = client.name .. ' is shutting down'
      outstanding = outstanding - 1
    end
  end
  if pending[id] ~= p then return end  -- answered already (in-process servers answer at once)
  if outstanding == 0 then return finish() end
  p.phase = ('waiting for %s to answer %s'):format(names(clients), method)
  p.cancel = function()
    for _, client in ipairs(clients) do
      local request_id = sent[client.id]
      if request_id then pcall(cancel_request, client, request_id) end
    end
  end
end

--- The whole course of a file request: open, check the position, wait for a server, send.
--- `params(client, buf)` builds each client's parameters.
---@param id integer
---@param req table
---@param method string
---@param params fun(client: vim.lsp.Client, buf: integer): table
---@param convert fun(answers: {client: vim.lsp.Client, result: any}[], read: function,
---  buf: integer): any
function L.run(id, req, method, params, convert)
  L.begin(id, 'opening ' .. tostring(req.candidates[1]))
  L.guard(id, function()
    local buf, fresh = L.open(req.candidates)
    if buf == nil then return L.fail(id, fresh) end
    if req.line ~= nil then
      local count = api.nvim_buf_line_count(buf)
      if req.line >= count then
        return L.fail(id, ("Invalid arguments: 'line' %d is past the end of %s (%d lines)")
          :format(req.line, api.nvim_buf_get_name(buf), count))
      end
    end
    L.when_ready(id, buf, fresh, method, req, function(clients)
      L.send(id, buf, clients, method, function(client) return params(client, buf) end,
        function(answers, read) return convert(answers, read, buf) end)
    end)
  end)()
end

--- TextDocumentPositionParams for req.line/req.character (UTF-16) in the client's encoding.
---@param req {line: integer, character: integer}
---@param client vim.lsp.Client
---@param buf integer
---@return table
function L.position_params(req, client, buf)
  local text = api.nvim_buf_get_lines(buf, req.line, req.line + 1, false)[1] or ''
  local byte = L.byte_of(text, 'utf-16', req.character)
  return {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = {
      line = req.line,
      character = L.index_of(text, client.offset_encoding or 'utf-16', byte),
    },
  }
end

--- Location | Location[] | LocationLink[] answers -> { locations = {{uri, range, text}} },
--- sorted, without duplicates, capped at req.max_locations.
---@param answers {client: vim.lsp.Client, result: any}[]
---@param read function
---@param max integer
---@return table
function L.locations(answers, read, max)
  local all, seen = {}, {} ---@type { uri: string, range: table, path: string? }[], table
  for _, a in ipairs(answers) do
    local result = a.result
    if type(result) == 'table' then
      if result.uri or result.targetUri then result = { result } end
      for _, loc in ipairs(result) do
        local uri, path = L.uri(loc.targetUri or loc.uri)
        local lsp_range = loc.targetSelectionRange or loc.targetRange or loc.range
        if uri and lsp_range then
          local range = L.range(lsp_range, a.client.offset_encoding or 'utf-16', path, read)
          local key = table.concat({ uri, range.start.line, range.start.character,
            range['end'].line, range['end'].character }, '\0')
          if not seen[key] then
            seen[key] = true
            all[#all + 1] = { uri = uri, range = range, path = path }
          end
        end
      end
    end
  end
  table.sort(all, function(x, y)
    if x.uri ~= y.uri then return x.uri < y.uri end
    local a, b = x.range.start, y.range.start
    if a.line ~= b.line then return a.line < b.line end
    return a.character < b.character
  end)
  local out = {}
  for i = 1, math.min(#all, max) do
    local loc = all[i]
    local entry = { uri = loc.uri, range = loc.range }
    local text = loc.path and read(loc.path, loc.range.start.line)
    if text then entry.text = (L.cut(vim.trim(text), 200)) end
    out[i] = entry
  end
  local answer = { locations = out }
  if #all > max then answer.truncated = true; answer.total = #all end
  return answer
end

--- DocumentSymbol[] (a tree) or SymbolInformation[] -> a flat list, capped at `max`.
--- `path`: the document's (nil for workspace symbols, which name their own files).
---@param answers {client: vim.lsp.Client, result: any}[]
---@param read function
---@param max integer
---@param path string|nil
---@return table
function L.symbols(answers, read, max, path)
  local out, total = {}, 0
  local function add(entry)
    total = total + 1
    if #out < max then out[#out + 1] = entry end
  end
  local function walk(symbols, container, enc)
    for _, s in ipairs(symbols) do
      local entry = { name = s.name, kind = L.kind(s.kind) }
      local parent = container or s.containerName
      if parent and parent ~= '' and parent ~= vim.NIL then entry.containerName = parent end
      if type(s.detail) == 'string' and s.detail ~= '' then
        entry.detail = (L.cut(s.detail, 200))
      end
      if s.location then  -- SymbolInformation / WorkspaceSymbol
        local uri, file = L.uri(s.location.uri)
        if not path then entry.uri = uri end
        if s.location.range then entry.range = L.range(s.location.range, enc, file, read) end
      elseif s.range then  -- DocumentSymbol
        entry.range = L.range(s.range, enc, path, read)
      end
      add(entry)
      if type(s.children) == 'table' then walk(s.children, s.name, enc) end
    end
  end
  for _, a in ipairs(answers) do
    if type(a.result) == 'table' then walk(a.result, nil, a.client.offset_encoding or 'utf-16') end
  end
  local answer = { symbols = out }
  if total > max then answer.truncated = true; answer.total = total end
  return answer
end

return L
