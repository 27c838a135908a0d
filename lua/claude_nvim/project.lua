-- The per-project directory, as src/claude_nvim/_project.py makes it (its one description is
-- there): <root>/<first 16 hex of sha256(realpath(cwd))>, both 0700 and ours alone.
local uv = vim.uv or vim.loop
local M = {}

local function root()
  local runtime = vim.env.XDG_RUNTIME_DIR
  if runtime and runtime ~= '' and vim.fn.isdirectory(runtime) == 1 then
    return runtime:gsub('/+$', '') .. '/claude-nvim'  -- as Python's Path has it
  end
  local tmp = vim.env.TMPDIR
  tmp = (tmp and tmp ~= '') and tmp:gsub('/+$', '') or '/tmp'
  return tmp .. '/claude-nvim-' .. uv.getuid()
end

-- `path` made (0700) if need be (unless `existing`); nil and why if it is not a directory of
-- ours alone.
local function own_dir(path, existing)
  if not existing then uv.fs_mkdir(path, tonumber('700', 8)) end
  local info = uv.fs_lstat(path)
  if not info or info.type ~= 'directory' then
    return nil, path .. ' is not a directory (a symlink?)'
  end
  if info.uid ~= uv.getuid() then return nil, path .. ' belongs to uid ' .. info.uid end
  if info.mode % 64 ~= 0 then  -- group or other bits
    return nil, path .. (' is open to others (mode %o)'):format(info.mode % 512)
  end
  return path
end

local function key_path(top, cwd)
  return top .. '/' .. require('claude_nvim.sha256')(uv.fs_realpath(cwd) or cwd):sub(1, 16)
end

--- The path of the project's directory at `cwd` (default: Neovim's working directory), as
--- it is or will be: neither made nor checked (whoever makes it, M.dir or a holder, checks it).
---@param cwd? string
---@return string
function M.path(cwd) return key_path(root(), cwd or vim.fn.getcwd()) end

--- The directory of the project at `cwd` (default: Neovim's working directory), made if need
--- be (unless `existing`: a Neovim that only looks makes nothing); nil and why when it or its
--- root is not this user's alone, or with `existing`, is not there.
---@param cwd? string
---@param existing? boolean
---@return string|nil dir
---@return string|nil why
function M.dir(cwd, existing)
  cwd = cwd or vim.fn.getcwd()
  local top, why = own_dir(root(), existing)
  if not top then return nil, why end
  return own_dir(key_path(top, cwd), existing)
end

return M
