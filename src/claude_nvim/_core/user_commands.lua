-- claude_nvim.user_commands: the user commands a server offers, defined here once for both ways of
-- running claude-nvim. The server installs this module and, at setup, defines those no Neovim
-- plugin has; the Neovim plugin (plugin/claude_nvim.lua) reads this file at start-up, before
-- any server runs, and defines them with its own way to reach one (starting it, and Claude).
-- :ClaudeNvimSend (the selected lines, or this line) and :ClaudeNvimAdd ({path} [start] [end],
-- a file tree's nodes, the quickfix list, the diagnostics) take what to mention here and now;
-- claude_nvim.mentions sends it. :ClaudeNvimDiffAccept and :ClaudeNvimDiffDeny give the
-- verdict on the diff shown here, :ClaudeNvimHunkAccept and :ClaudeNvimHunkReject on its hunks
-- (claude_nvim.diffs); :ClaudeNvimReview and :ClaudeNvimRevert review Claude's turns
-- (claude_nvim.review).
-- Lifecycle (as the server's module): setup(opts) / stop().
local api = vim.api
local M = {}

local function file_buffer(buf)
  return vim.bo[buf].buftype == '' and api.nvim_buf_get_name(buf) ~= ''
    and not vim.b[buf].claude_nvim_proposal
end

-- The verdict on the diff shown here: `name` of claude_nvim.diffs, while a server runs.
local function verdict(how, name)
  local diffs = how.live('diffs')
  if not diffs then return how.tell('no pending diff here', 'WARN') end
  diffs[name]()
end

-- Accept or reject Claude's hunks on lines `o.line1`..`o.line2` of the diff shown here.
local function hunk(how, action, o)
  local diffs = how.live('diffs')
  if not diffs then return how.tell('no pending diff here', 'WARN') end
  diffs.hunk(action, o.line1, o.line2)
end

-- `fn` of claude_nvim.review with `...`, while a server runs; else `nothing` is told.
local function review(how, nothing, fn, ...)
  local mod = how.live('review')
  if not mod then return how.tell(nothing, 'WARN') end
  mod[fn](...)
end

-- :ClaudeNvimRewind (claude_nvim.rewind), while a server runs.
local function rewind(how, o)
  ---@type table?, table?
  local core, mod = package.loaded['claude_nvim.core'], package.loaded['claude_nvim.rewind']
  if not (type(core) == 'table' and core.live_server and core.live_server() and mod) then
    return how.tell('nothing to rewind: no claude-nvim server runs', 'WARN')
  end
  mod.command(o)
end

-- :ClaudeNvimFollow [on | off | all]: g:claude_nvim_follow (claude_nvim.follow reads it, over
-- opts.follow); with no argument, on and off in turn.
local function follow(how, arg)
  local now = vim.g.claude_nvim_follow
  if now == nil then
    local opts = vim.g.claude_nvim_opts
    now = type(opts) == 'table' and opts.follow or false
  end
  local new = ({ on = true, off = false, all = 'all' })[arg]
  if arg == '' then new = not now elseif new == nil then
    return how.tell('usage: :ClaudeNvimFollow [on | off | all]', 'WARN')
  end
  vim.g.claude_nvim_follow = new
  local server_side = package.loaded['claude_nvim.follow']
  if type(server_side) == 'table' and server_side.changed then server_side.changed() end
  how.tell(new == 'all' and "following the Claudes' edits, hidden ones' too"
    or new and "following the edits of the Claudes in view" or "not following Claude's edits")
end

-- What :ClaudeNvimAdd adds from where the cursor is (no path given): the nodes of a file tree
-- on lines first..last (the cursor's, or a Visual range), through each tree's own API, by
-- filetype; each a function(buf, first, last, ranged) of the paths. Its window is the current.
---@type table<string, fun(buf: integer, first: integer, last: integer, ranged: boolean): string[]>
local TREES = {}

-- netrw (built in): each line's word, in the listing's directory (a tree: the line's branch).
-- Its banner's lines act when asked for their word: they are passed over.
function TREES.netrw(_, first, last)
  local paths, view = {}, vim.fn.winsaveview()
  local tree = vim.w.netrw_liststyle == 3
  for line = math.max(first, (vim.w.netrw_bannercnt or 1)), last do
    api.nvim_win_set_cursor(0, { line, 0 })
    local word = vim.fn['netrw#Call']('NetrwGetWord')
    if word ~= '' and word ~= './' and word ~= '../' then
      if tree then
        local dir = vim.fn['netrw#Call']('NetrwTreePath', vim.w.netrw_treetop)
        paths[#paths + 1] = word:sub(-1) == '/' and dir or (dir .. word)
      else
        paths[#paths + 1] = vim.b.netrw_curdir .. '/' .. word
      end
    end
  end
  vim.fn.winrestview(view)
  return paths
end

TREES['neo-tree'] = function(_, first, last)
  ---@diagnostic disable-next-line: unresolved-require (the user's plugin, when present)
  local state = require('neo-tree.sources.manager').get_state_for_window()
  local paths = {}
  for line = first, last do
    local node = state and state.tree and state.tree:get_node(line)
    if node and (node.type == 'file' or node.type == 'directory') then
      paths[#paths + 1] = node.path
    end
  end
  return paths
end

function TREES.NvimTree(_, first, last)
  ---@diagnostic disable-next-line: unresolved-require (the user's plugin, when present)
  local tree, paths, view = require('nvim-tree.api').tree, {}, vim.fn.winsaveview()
  for line = first, last do
    api.nvim_win_set_cursor(0, { line, 0 })
    local node = tree.get_node_under_cursor()
    if node and node.absolute_path and node.name ~= '..' then
      paths[#paths + 1] = node.absolute_path
    end
  end
  vim.fn.winrestview(view)
  return paths
end

function TREES.oil(buf, first, last)
  ---@diagnostic disable-next-line: unresolved-require (the user's plugin, when present)
  local oil, paths = require('oil'), {}
  local dir = oil.get_current_dir(buf)
  for line = first, last do
    local entry = dir and oil.get_entry_on_line(buf, line)
    if entry and entry.name ~= '..' then paths[#paths + 1] = dir .. entry.name end
  end
  return paths
end

function TREES.minifiles(buf, first, last)
  local paths = {}
  for line = first, last do
    local entry = _G.MiniFiles.get_fs_entry(buf, line)
    if entry then paths[#paths + 1] = entry.path end
  end
  return paths
end

-- snacks' explorer: its list window; without a range, its selected items (else the current).
function TREES.snacks_picker_list(buf, first, last, ranged)
  local picker ---@type any snacks' picker
  for _, open in ipairs(_G.Snacks.picker.get()) do
    if open.list and open.list.win and open.list.win.buf == buf then picker = open end
  end
  if picker == nil then return {} end
  local items = {}
  if ranged then
    for row = first, last do items[#items + 1] = picker.list:get(picker.list:row2idx(row)) end
  else
    items = picker:selected({ fallback = true })
  end
  return vim.tbl_map(_G.Snacks.picker.util.path, items)
end

-- The quickfix list's and the diagnostics' locations: { path, first line, last line } each.
local LISTS = {}

local function file_of(buf)
  return buf and buf > 0 and api.nvim_buf_is_valid(buf) and api.nvim_buf_get_name(buf) or ''
end

function LISTS.quickfix()
  local items = {}
  for _, entry in ipairs(vim.fn.getqflist()) do
    local path = file_of(entry.bufnr)
    if path ~= '' then
      local first = entry.lnum > 0 and entry.lnum or nil
      items[#items + 1] = { path, first, first and math.max(entry.end_lnum or 0, first) }
    end
  end
  return items, 'the quickfix list has no file locations'
end

--- `list` sorted in place, the most severe first, then by buffer and line: the one order of
--- diagnostics, here and in the plugin's prompts (require('claude_nvim').most_severe_first).
---@param list vim.Diagnostic[]
---@return vim.Diagnostic[] list
function M.most_severe_first(list)
  table.sort(list, function(a, b)
    if a.severity ~= b.severity then return a.severity < b.severity end
    if a.bufnr ~= b.bufnr then return a.bufnr < b.bufnr end
    return a.lnum < b.lnum
  end)
  return list
end

function LISTS.diagnostics()
  local items = {}
  for _, d in ipairs(M.most_severe_first(vim.diagnostic.get())) do
    local path = file_of(d.bufnr)
    if path ~= '' then
      items[#items + 1] = { path, d.lnum + 1, math.max(d.end_lnum or d.lnum, d.lnum) + 1 }
    end
  end
  return items, 'no diagnostics in files'
end

-- What :ClaudeNvimAdd with no path adds here: a file tree's nodes (on the range's lines, else
-- the cursor's), or this file; { { path }, ... } and what they are, or nil and why not.
local function here(o)
  local buf = api.nvim_get_current_buf()
  local tree = TREES[vim.bo[buf].filetype]
  if tree then
    local first, last = o.line1, o.line2
    if o.range == 0 then first = api.nvim_win_get_cursor(0)[1]; last = first end
    local ok, paths = pcall(tree, buf, first, last, o.range > 0)
    if not ok then return nil, 'cannot read the ' .. vim.bo[buf].filetype .. ' tree: ' .. paths end
    if #paths == 0 then return nil, 'no file or directory here' end
    return vim.tbl_map(function(path) return { path } end, paths), 'files'
  end
  if file_buffer(buf) then return { { api.nvim_buf_get_name(buf) } }, 'files' end
  return nil, 'nothing to add here: give a path, or use it in a file tree (netrw, neo-tree, '
    .. 'nvim-tree, oil, mini.files, snacks), or :ClaudeNvimAdd quickfix / diagnostics'
end

local KEYWORDS = { 'quickfix', 'diagnostics' }

local function complete(lead)
  local found = vim.tbl_filter(function(word) return vim.startswith(word, lead) end, KEYWORDS)
  return vim.list_extend(found, vim.fn.getcompletion(lead, 'file'))
end

---@class claude_nvim.CommandsHow how the commands reach a server (the plugin's, or its own)
---@field tell fun(msg: string, level?: string) tells the user
---@field mention fun(deliver: fun(mentions: table)) deliver(claude_nvim.mentions), once it can send
---@field live fun(name: string): table|nil the live server's module claude_nvim.<name>, or nil
---@field replace? boolean define the commands even where they exist

-- The commands: name -> {callback, options}.
---@param how claude_nvim.CommandsHow
local function commands(how)
  return {
    ClaudeNvimSend = { function(o)
      local buf = api.nvim_get_current_buf()
      if not file_buffer(buf) then return how.tell('not a file buffer: nothing to send', 'WARN') end
      local first, last = o.line1, o.line2
      if o.range == 0 then first = api.nvim_win_get_cursor(0)[1]; last = first end
      how.mention(function(mentions) mentions.send_lines(buf, first, last) end)
    end, { range = true, desc = 'claude-nvim: send the selected lines (or this line) to Claude' } },
    ClaudeNvimAdd = { function(o)
      local path = o.fargs[1]
      if path == nil or LISTS[path] then
        local items, what
        if path then items, what = LISTS[path]() else items, what = here(o) end
        if items == nil or #items == 0 then return how.tell(what, 'WARN') end
        what = path == 'quickfix' and 'quickfix entries' or path or what
        return how.mention(function(mentions) mentions.add_all(items, what) end)
      end
      -- As Neovim's cwd is now: Claude may be started (and the cwd changed) before it is sent.
      if not path:match('^[/~]') then path = vim.fn.getcwd(-1, -1) .. '/' .. path end
      how.mention(function(mentions) mentions.add(path, o.fargs[2], o.fargs[3]) end)
    end, { nargs = '*', range = true, complete = complete,
           desc = 'claude-nvim: send a file (or lines of it), a directory, a file tree\'s nodes, '
             .. 'the quickfix list or the diagnostics to Claude' } },
    ClaudeNvimDiffAccept = { function() verdict(how, 'accept_current') end,
      { desc = "claude-nvim: accept Claude's proposed change shown here" } },
    ClaudeNvimDiffDeny = { function() verdict(how, 'deny_current') end,
      { desc = "claude-nvim: reject Claude's proposed change shown here" } },
    ClaudeNvimHunkAccept = { function(o) hunk(how, 'accept', o) end, { range = true,
      desc = "claude-nvim: keep Claude's change on this line (or in the range) of the diff" } },
    ClaudeNvimHunkReject = { function(o) hunk(how, 'reject', o) end, { range = true,
      desc = "claude-nvim: put the old text back in the proposal, on this line (or range)" } },
    ClaudeNvimReview = { function(o)
      review(how, 'nothing to review: no claude-nvim server runs', 'review_command', o.args)
    end, { nargs = '?', complete = function() return { 'list' } end,
           desc = "claude-nvim: review Claude's last turn (N: turn N; list: pick one)" } },
    ClaudeNvimRevert = { function(o)
      review(how, 'nothing to take back: no claude-nvim server runs', 'revert_command', o)
    end, { range = true, bang = true,
           desc = "claude-nvim: take back Claude's change here (!: the whole file)" } },
    ClaudeNvimFollow = { function(o) follow(how, vim.trim(o.args)) end, { nargs = '?',
      complete = function() return { 'on', 'off', 'all' } end,
      desc = "claude-nvim: show the file Claude writes as it writes it (or stop; all: hidden "
        .. "Claudes' too)" } },
    ClaudeNvimPlanApprove = { function(o)
      local plan = package.loaded['claude_nvim.tools.claude_nvim_plan']
      if type(plan) ~= 'table' then
        return how.tell("no plan of Claude's waits for approval", 'WARN')
      end
      plan.approve(vim.trim(o.args))
    end, { nargs = '?',
      complete = function() return { 'default', 'acceptEdits', 'auto', 'bypassPermissions' } end,
      desc = "claude-nvim: approve Claude's plan shown here (mode: the one it goes on in)" } },
    ClaudeNvimRewind = { function(o) rewind(how, o) end, { nargs = '?', bang = true,
      desc = "claude-nvim: take back Claude's turns N..last (default: the last), after a "
        .. 'preview (!: none)' } },
  }
end

--- Define the commands that do not exist yet, or all with `how.replace`; their names.
---@param how claude_nvim.CommandsHow
---@return string[]
function M.define(how)
  local defined = {}
  for name, spec in pairs(commands(how)) do
    if how.replace or vim.fn.exists(':' .. name) ~= 2 then
      api.nvim_create_user_command(name, spec[1], spec[2])
      defined[#defined + 1] = name
    end
  end
  return defined
end

-- The server's: the commands it defined (a stopping server leaves a plugin's alone).
local defined = {}

--- The server's: define the commands no Neovim plugin has defined.
function M.setup()
  local core = require('claude_nvim.core')
  defined = M.define({
    tell = core.tell,
    mention = function(deliver) core.guard(deliver)(require('claude_nvim.mentions')) end,
    -- A server that died without switching off leaves its commands: live_server says no.
    live = function(name) return core.live_server() and require('claude_nvim.' .. name) or nil end,
  })
end

--- Delete the commands the server defined (a plugin's stay).
function M.stop()
  -- A Neovim plugin loaded since has defined them its own way: they stay.
  if not vim.g.loaded_claude_nvim_plugin then
    for _, name in ipairs(defined) do pcall(api.nvim_del_user_command, name) end
  end
  defined = {}
end

return M
