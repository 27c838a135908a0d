-- Prompts to the current Claude from Neovim: :ClaudeNvimPrompt [name] opens a Markdown buffer
-- whose text goes into the Claude's prompt box on :w, its context variables ({file},
-- {selection}, {diagnostics}, ...) expanded then; send(text) sends any text.
--
-- Text reaches claude as the user's own typing would: a bracketed paste (ESC[200~ ...
-- ESC[201~, so its newlines never submit early), then a carriage return that submits it. The
-- text is data: control characters (but tab and newline) are taken out of it, so nothing in
-- it can end the paste early and type keys into claude; it is never Ex, never code.
local api = vim.api
local M = {}

local PASTE_START, PASTE_END, SUBMIT = '\27[200~', '\27[201~', '\r'
local MAX_EXPANSION = 32 * 1024   -- bytes of one variable's text (a huge selection is cut)
local MAX_TEXT = 200 * 1024       -- bytes of one prompt
local WAIT_MS = 60 * 1000         -- for a Claude that was just started to listen

--- The named prompts claude-nvim has (opts.prompts adds to them, `false` removes one).
M.DEFAULTS = {
  explain = 'Explain what this code from {file} does, and why:\n\n{selection}\n',
  fix = 'Fix the diagnostics in {file}:\n\n{diagnostics}\n',
  tests = 'Write tests for this code from {file}, beside its existing tests:\n\n{selection}\n',
  review = 'Review the changes of your last turn: say what could be wrong, risky or left '
    .. 'unfinished, with the file and line of each.\n',
}

local function tell(msg, level) require('claude_nvim').tell(msg, level) end

--- The named prompts in force: name -> text.
---@return table<string, string>
function M.prompts()
  local all = vim.deepcopy(M.DEFAULTS)
  local own = require('claude_nvim').config.prompts
  for name, text in pairs(type(own) == 'table' and own or {}) do
    if text == false then all[name] = nil elseif type(text) == 'string' then all[name] = text end
  end
  return all
end

--- The names of the prompts (:ClaudeNvimPrompt <Tab>), sorted.
---@param lead? string what they start with
---@return string[]
function M.names(lead)
  local names = vim.tbl_filter(function(name) return vim.startswith(name, lead or '') end,
    vim.tbl_keys(M.prompts()))
  table.sort(names)
  return names
end

-- Text as claude may get it: no control character but tab and newline (CR LF -> LF), bounded.
local function clean(text)
  text = text:gsub('\r\n', '\n'):gsub('[%z\1-\8\11-\31\127]', '')
  if #text > MAX_TEXT then
    text = text:sub(1, MAX_TEXT):gsub('[\192-\255][\128-\191]*$', '')
      .. '\n[cut: over ' .. MAX_TEXT .. ' bytes]'
  end
  return text
end

-- The Claude to send to, once it listens: `go(claude)` (claude_nvim.terminal's info()). None
-- runs: one starts, and gets it once its IDE connection listens (its prompt box is up then).
local function current_claude(go)
  local terminal = require('claude_nvim.terminal')
  if terminal.running() then
    local info = terminal.info()
    if info and info.job then return go(info) end
  else
    terminal.open({})
  end
  local waited, timer = 0, (vim.uv or vim.loop).new_timer()
  timer:start(100, 100, vim.schedule_wrap(function()
    waited = waited + 100
    local info = terminal.info()
    local entry = info and info.job and require('claude_nvim.claudes').server_entry(info.buf)
    if entry or waited > WAIT_MS or not terminal.running() then
      timer:stop()
      timer:close()
      if entry then return go(info) end
      tell('nothing sent: no Claude started to listen', 'WARN')
    end
  end))
end

--- Send `text` to the current Claude's prompt box and submit it (a Claude starts if none
--- runs). Shows that Claude if it is hidden; the cursor stays where it is.
---@param text string
---@param opts? { submit?: boolean } submit: false leaves it in the prompt box (default true)
function M.send(text, opts)
  if type(text) ~= 'string' or vim.trim(text) == '' then return tell('nothing to send', 'WARN') end
  text = clean(text)
  local submit = not (opts and opts.submit == false)
  current_claude(function(claude)
    local terminal = require('claude_nvim.terminal')
    local ok = terminal.input(PASTE_START .. text .. PASTE_END, claude.buf)
    if ok and submit then ok = terminal.input(SUBMIT, claude.buf) end
    if not ok then return tell('nothing sent: Claude ' .. claude.n .. ' exited', 'WARN') end
    require('claude_nvim.terminal').reveal()
  end)
end

-- Variables ---------------------------------------------------------------------------------

-- `s` within MAX_EXPANSION bytes (on a character boundary).
local function bounded(s)
  if #s <= MAX_EXPANSION then return s end
  return s:sub(1, MAX_EXPANSION):gsub('[\192-\255][\128-\191]*$', '') .. '\n[cut]'
end

--- `lines` in a Markdown code block (of language `ft`), fenced by more backticks than they hold.
---@param lines string[]
---@param ft? string
---@return string
function M.fence(lines, ft)
  local text = table.concat(lines, '\n')
  local ticks = '```'
  while text:find(ticks, 1, true) do ticks = ticks .. '`' end
  return ticks .. (ft or '') .. '\n' .. text .. '\n' .. ticks
end

local function relative(path) return vim.fn.fnamemodify(path, ':.') end

---@type table<integer, string>
local SEVERITY = { 'ERROR', 'WARN', 'INFO', 'HINT' }

--- Diagnostics as lines "- path:line:col: SEVERITY message (source)", the most severe first.
---@param list vim.Diagnostic[]
---@return string
function M.diagnostic_lines(list)
  local out = {}
  for _, d in ipairs(require('claude_nvim').most_severe_first(list)) do
    local name = api.nvim_buf_is_valid(d.bufnr) and api.nvim_buf_get_name(d.bufnr) or ''
    out[#out + 1] = ('- %s:%d:%d: %s %s%s'):format(name ~= '' and relative(name) or '[No Name]',
      d.lnum + 1, d.col + 1, SEVERITY[d.severity --[[@as integer]]] or '',
      (d.message or ''):gsub('\n', ' '),
      d.source and (' (' .. d.source .. ')') or '')
  end
  return #out > 0 and table.concat(out, '\n') or '(no diagnostics)'
end

-- Tree-sitter node kinds, by what their type names hold.
local KINDS = {
  ['function'] = { include = { 'function', 'method', 'lambda', 'closure', 'constructor' },
                   exclude = { 'call', 'name', 'parameter', 'argument', 'type', 'body',
                               'identifier', 'signature', 'modifier', 'keyword' } },
  class = { include = { 'class', 'struct', 'impl_item', 'trait_item', 'interface', 'enum_item',
                        'module', 'object_declaration' },
            exclude = { 'name', 'body', 'heritage', 'identifier', 'keyword', 'field',
                        'expression', 'call' } },
}

local function is_kind(node_type, kind)
  local k = KINDS[kind]
  local function any(words)
    for _, word in ipairs(words) do
      if node_type:find(word, 1, true) then return true end
    end
    return false
  end
  return any(k.include) and not any(k.exclude)
end

-- The function (or class) around the cursor of `ctx`, by tree-sitter: its lines, fenced, and
-- where; or a note saying why it is left out.
local function enclosing(ctx, kind)
  local buf = ctx.buf
  local lang = vim.treesitter.language.get_lang(vim.bo[buf].filetype) or vim.bo[buf].filetype
  local ok, parser = pcall(vim.treesitter.get_parser, buf, lang)
  if not ok or parser == nil then
    return ('({%s} left out: no tree-sitter parser for %s)'):format(kind,
      lang ~= '' and lang or 'this buffer')
  end
  parser:parse()
  local row, col = ctx.cursor[1] - 1, ctx.cursor[2]
  local node = vim.treesitter.get_node({ bufnr = buf, pos = { row, col },
                                         ignore_injections = true })
  while node and not is_kind(node:type(), kind) do node = node:parent() end
  if node == nil then
    return ('({%s} left out: no %s around line %d)'):format(kind, kind, ctx.cursor[1])
  end
  local first, _, last, last_col = node:range()
  if last_col == 0 and last > first then last = last - 1 end
  return ('%s:%d-%d:\n%s'):format(relative(ctx.name), first + 1, last + 1,
    M.fence(api.nvim_buf_get_lines(buf, first, last + 1, false), vim.bo[buf].filetype))
end

---@type table<string, fun(ctx: table): string>
local VARIABLES = {}

function VARIABLES.file(ctx) return ctx.name ~= '' and relative(ctx.name) or '[No Name]' end

function VARIABLES.line(ctx)
  local line = api.nvim_buf_get_lines(ctx.buf, ctx.cursor[1] - 1, ctx.cursor[1], false)[1] or ''
  return ('%s:%d: %s'):format(VARIABLES.file(ctx), ctx.cursor[1], line)
end

function VARIABLES.selection(ctx)
  local from, to = api.nvim_buf_get_mark(ctx.buf, '<'), api.nvim_buf_get_mark(ctx.buf, '>')
  if from[1] == 0 or to[1] == 0 then return '(no selection)' end
  local lines = api.nvim_buf_get_lines(ctx.buf, from[1] - 1, to[1], false)
  if ctx.visual_mode == 'v' and #lines > 0 then  -- characterwise: from and to columns
    lines[#lines] = lines[#lines]:sub(1, to[2] + 1)
    lines[1] = lines[1]:sub(from[2] + 1)
  end
  local where = from[1] == to[1] and tostring(from[1]) or (from[1] .. '-' .. to[1])
  return ('%s:%s:\n%s'):format(VARIABLES.file(ctx), where, M.fence(lines, vim.bo[ctx.buf].filetype))
end

function VARIABLES.diagnostics(ctx)
  return M.diagnostic_lines(vim.diagnostic.get(ctx.buf))
end

function VARIABLES.diagnostics_all() return M.diagnostic_lines(vim.diagnostic.get()) end

function VARIABLES.quickfix()
  local out = {}
  for _, item in ipairs(vim.fn.getqflist()) do
    local name = item.bufnr > 0 and api.nvim_buf_get_name(item.bufnr) or ''
    out[#out + 1] = ('- %s:%d:%d: %s'):format(name ~= '' and relative(name) or '?', item.lnum,
      item.col, vim.trim(item.text or ''))
  end
  return #out > 0 and table.concat(out, '\n') or '(the quickfix list is empty)'
end

VARIABLES['function'] = function(ctx) return enclosing(ctx, 'function') end
function VARIABLES.class(ctx) return enclosing(ctx, 'class') end

function VARIABLES.this(ctx)
  local line = api.nvim_buf_get_lines(ctx.buf, ctx.cursor[1] - 1, ctx.cursor[1], false)[1] or ''
  local col = ctx.cursor[2] + 1
  local s, e = col, col  -- the keyword under the cursor, as <cword> finds it on this line
  while s > 1 and line:sub(s - 1, s - 1):match('[%w_]') do s = s - 1 end
  while e <= #line and line:sub(e, e):match('[%w_]') do e = e + 1 end
  local word = line:sub(s, e - 1)
  local where = ('%s:%d:%d'):format(VARIABLES.file(ctx), ctx.cursor[1], col)
  return word ~= '' and ('`' .. word .. '` (' .. where .. ')') or where
end

--- The variables a prompt may hold, sorted.
M.VARIABLE_NAMES = vim.tbl_keys(VARIABLES)
table.sort(M.VARIABLE_NAMES)

--- Where a prompt's variables are read: buffer `buf` (a file's), the cursor there.
---@param win? integer the window (nil: the current one)
---@return table
function M.context(win)
  win = win or api.nvim_get_current_win()
  local buf = api.nvim_win_get_buf(win)
  return { buf = buf, name = api.nvim_buf_get_name(buf), cursor = api.nvim_win_get_cursor(win),
           visual_mode = vim.fn.visualmode() }
end

--- `text` with its variables ({file}, ...) replaced by what they are in `ctx` (M.context());
--- one pass: what a variable gives is never expanded again. Unknown ones stay as they are.
---@param text string
---@param ctx table
---@return string
function M.expand(text, ctx)
  if not api.nvim_buf_is_valid(ctx.buf) then return text end
  return (text:gsub('{([%w_]+)}', function(name)
    local fn = VARIABLES[name]
    if fn == nil then return nil end
    local ok, value = pcall(fn, ctx)
    return bounded(ok and value or ('({' .. name .. '} left out: ' .. tostring(value) .. ')'))
  end))
end

-- The prompt buffer -------------------------------------------------------------------------

local opened = 0

--- :ClaudeNvimPrompt [name]: a Markdown buffer below this window for a prompt to the current
--- Claude, holding prompt `name`'s text if given; :w sends it (its variables expanded, read
--- where the cursor was), :q throws it away.
---@param name? string
function M.open(name)
  local text = ''
  if name and name ~= '' then
    text = M.prompts()[name]
    if text == nil then
      return tell(('no prompt %s (:ClaudeNvimPrompt <Tab> lists them)'):format(name), 'WARN')
    end
  end
  local ctx = M.context()
  opened = opened + 1
  local buf = api.nvim_create_buf(false, true)
  vim.bo[buf].buftype = 'acwrite'
  vim.bo[buf].bufhidden = 'hide'  -- so that :q leaves it, modified; it is wiped then
  vim.bo[buf].swapfile = false
  api.nvim_buf_set_name(buf, ('claude-nvim://prompt/%d%s'):format(opened,
    name and name ~= '' and ('/' .. name) or ''))
  api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(vim.trim(text) ~= '' and text:gsub('\n$', '')
    or '', '\n', { plain = true }))
  vim.bo[buf].modified = false
  vim.bo[buf].filetype = 'markdown'
  vim.b[buf].claude_nvim_prompt = true
  vim.cmd('belowright 12split')
  local win = api.nvim_get_current_win()
  api.nvim_win_set_buf(win, buf)
  vim.wo[win].winbar = 'Prompt to Claude · :w sends it · :q throws it away · '
    .. '{file} {selection} {line} {this} {function} ... (:help :ClaudeNvimPrompt) %<'
  local function send()
    local lines = api.nvim_buf_get_lines(buf, 0, -1, false)
    local prompt = table.concat(lines, '\n')
    if vim.trim(prompt) == '' then return tell('the prompt is empty: nothing sent', 'WARN') end
    vim.bo[buf].modified = false
    M.send(M.expand(prompt, ctx))
    vim.schedule(function()
      if api.nvim_buf_is_valid(buf) then pcall(api.nvim_buf_delete, buf, { force = true }) end
    end)
  end
  api.nvim_create_autocmd('BufWriteCmd', { buffer = buf, callback = send })
  api.nvim_create_autocmd('BufHidden', { buffer = buf, callback = function()
    vim.schedule(function()
      if api.nvim_buf_is_valid(buf) and #vim.fn.win_findbuf(buf) == 0 then
        pcall(api.nvim_buf_delete, buf, { force = true })
      end
    end)
  end })
  if text == '' then vim.cmd('startinsert') end
  return buf
end

return M
