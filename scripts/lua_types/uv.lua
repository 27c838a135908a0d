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

---@class uv.uv_tcp_t
---@field bind fun(self: uv.uv_tcp_t, host: string, port: integer, flags?: table): 0|nil, string?
---@field listen fun(self: uv.uv_tcp_t, backlog: integer, callback: fun(err: string?)): 0|nil, string?
---@field getsockname fun(self: uv.uv_tcp_t): {ip: string, family: string, port: integer}?, string?
---@field fileno fun(self: uv.uv_tcp_t): integer?, string?
---@field close fun(self: uv.uv_tcp_t, callback?: fun())
---@field is_closing fun(self: uv.uv_tcp_t): boolean

---@class uv.uv_pipe_t
---@field open fun(self: uv.uv_pipe_t, fd: integer): 0|nil, string?
---@field connect fun(self: uv.uv_pipe_t, name: string, callback?: fun(err: string?)): any, string?
---@field write fun(self: uv.uv_pipe_t, data: string|string[], callback?: fun(err: string?)): any, string?
---@field read_start fun(self: uv.uv_pipe_t, callback: fun(err: string?, data: string?)): 0|nil, string?
---@field read_stop fun(self: uv.uv_pipe_t): 0|nil, string?
---@field try_write fun(self: uv.uv_pipe_t, data: string): integer|nil, string?
---@field shutdown fun(self: uv.uv_pipe_t, callback?: fun(err: string?)): any, string?
---@field close fun(self: uv.uv_pipe_t, callback?: fun())
---@field is_closing fun(self: uv.uv_pipe_t): boolean

---@class uv.uv_process_t
---@field kill fun(self: uv.uv_process_t, signal: integer|string): 0|nil, string?
---@field close fun(self: uv.uv_process_t, callback?: fun())
---@field is_closing fun(self: uv.uv_process_t): boolean
---@field get_pid fun(self: uv.uv_process_t): integer

---@class uv.fs_stat.result
---@field type string
---@field size integer
---@field mode integer
---@field ino integer
---@field uid integer
---@field gid integer
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
---@return uv.uv_process_t? handle, integer|string pid_or_err
function uv.spawn(path, options, on_exit) end

---@return uv.uv_tcp_t
function uv.new_tcp() end

---@param ipc? boolean
---@return uv.uv_pipe_t
function uv.new_pipe(ipc) end

---@param pid integer
---@param signal integer|string
---@return 0|nil ok, string? err
function uv.kill(pid, signal) end

---@return integer
function uv.getuid() end

---@param len integer
---@return string bytes
function uv.random(len) end

---@param fd integer
---@param data string|string[]
---@param offset? integer
---@return integer? written, string? err
function uv.fs_write(fd, data, offset) end

---@param path string
---@param mode integer
---@return boolean? ok, string? err
function uv.fs_chmod(path, mode) end

---@param path string
---@param mode integer
---@return boolean? ok, string? err
function uv.fs_mkdir(path, mode) end

---@param path string
---@param new_path string
---@return boolean? ok, string? err
function uv.fs_rename(path, new_path) end

---@param path string
---@param new_path string
---@return boolean? ok, string? err
function uv.fs_link(path, new_path) end

vim.uv = uv
vim.loop = uv
