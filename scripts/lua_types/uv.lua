---@meta
-- The few luv (vim.uv) functions claude-nvim calls, for the Lua type check (scripts/lua_typecheck.py)
-- on a Neovim runtime without luv's own annotations (0.11 and older; 0.12 has lua/uv/_meta.lua).
-- Loose on purpose: it names what exists, the runtime's docs say the rest.

---@class uv.uv_timer_t
---@field start fun(self: uv.uv_timer_t, timeout: integer, rep: integer, callback: fun()): 0|nil, string?
---@field stop fun(self: uv.uv_timer_t): 0|nil, string?
---@field again fun(self: uv.uv_timer_t): 0|nil, string?
---@field close fun(self: uv.uv_timer_t, callback?: fun())
---@field is_closing fun(self: uv.uv_timer_t): boolean
---@field is_active fun(self: uv.uv_timer_t): boolean

---@class uv.uv_fs_event_t
---@field start fun(self: uv.uv_fs_event_t, path: string, flags: table, callback: fun(err: string?, filename: string, events: table)): 0|nil, string?
---@field stop fun(self: uv.uv_fs_event_t): 0|nil, string?
---@field close fun(self: uv.uv_fs_event_t, callback?: fun())
---@field is_closing fun(self: uv.uv_fs_event_t): boolean

---@class uv.fs_stat.result
---@field type string
---@field size integer
---@field mode integer
---@field ino integer
---@field dev integer
---@field mtime {sec: integer, nsec: integer}
---@field ctime {sec: integer, nsec: integer}

---@class uv
---@field constants table<string, integer>
local uv = {}

---@return uv.uv_timer_t
function uv.new_timer() end

---@return uv.uv_fs_event_t
function uv.new_fs_event() end

---@return number nanoseconds
function uv.hrtime() end

---@return integer milliseconds
function uv.now() end

---@param path string
---@return uv.fs_stat.result? stat, string? err
function uv.fs_stat(path) end

---@param path string
---@return uv.fs_stat.result? stat, string? err
function uv.fs_lstat(path) end

---@param fd integer
---@return uv.fs_stat.result? stat, string? err
function uv.fs_fstat(fd) end

---@param path string
---@param flags string|integer
---@param mode integer
---@return integer? fd, string? err
function uv.fs_open(path, flags, mode) end

---@param fd integer
---@param size integer
---@param offset? integer
---@return string? data, string? err
function uv.fs_read(fd, size, offset) end

---@param fd integer
---@return boolean? ok, string? err
function uv.fs_close(fd) end

---@param path string
---@return string? path, string? err
function uv.fs_realpath(path) end

---@param path string
---@param mode integer|string
---@return boolean? ok, string? err
function uv.fs_access(path, mode) end

---@param path string
---@return boolean? ok, string? err
function uv.fs_unlink(path) end

---@param path string
---@param new_path string
---@param flags? table
---@return boolean? ok, string? err
function uv.fs_symlink(path, new_path, flags) end

---@param path string
---@return any? handle, string? err
function uv.fs_scandir(path) end

---@param handle any
---@return string? name, string? type
function uv.fs_scandir_next(handle) end

---@param path string
---@param options table
---@param on_exit fun(code: integer, signal: integer)
---@return any? handle, integer|string pid
function uv.spawn(path, options, on_exit) end

vim.uv = uv
vim.loop = uv
