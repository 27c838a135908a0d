-- luacheck's settings for every .lua file here: tox's lint environment runs scripts/luacheck.py.
std = 'luajit'  -- Neovim's Lua: Lua 5.1 with LuaJIT's `bit` and `jit`
max_line_length = 100
-- scripts/lua_types: declarations for the type check (---@meta), never run.
exclude_files = { '.venv', '.tox', 'build', 'dist', 'scripts/lua_types' }

-- What Neovim gives its Lua: `vim`, read-only but for the tables that are Neovim's variables
-- and options (vim.g.x = 1, vim.bo[buf].modified = false, vim.env.X = 'y').
local writable = { read_only = false, other_fields = true }
read_globals = {
  vim = {
    other_fields = true,
    fields = {
      g = writable, b = writable, w = writable, t = writable, v = writable, env = writable,
      o = writable, go = writable, bo = writable, wo = writable, opt = writable,
      opt_local = writable, opt_global = writable,
    },
  },
}
