-- A pseudo-terminal made in Neovim's own process (LuaJIT's FFI), for a held Claude: claude
-- starts on its slave end at once, Neovim is its terminal while it starts, and its holder
-- takes the master end once claude is up (claude_nvim.held). No Python starts beside claude.
-- Only where the constants below are known: Linux on x86-64 and arm64.
local M = {}

local ok, ffi = pcall(require, 'ffi')
local KNOWN = ok and jit and jit.os == 'Linux' and (jit.arch == 'x64' or jit.arch == 'arm64')

local O_RDWR, O_NOCTTY, O_CLOEXEC = 2, 0x100, 0x80000
local TIOCSWINSZ = 0x5414

-- Under names of their own (asm): another plugin may have declared `open` or `ioctl` with
-- other parameters, and a declaration cannot be made twice.
local declared = false
local function declare()
  if declared then return end
  declared = true
  pcall(ffi.cdef, [[
    int claude_nvim_posix_openpt(int flags) __asm__("posix_openpt");
    int claude_nvim_grantpt(int fd) __asm__("grantpt");
    int claude_nvim_unlockpt(int fd) __asm__("unlockpt");
    char *claude_nvim_ptsname(int fd) __asm__("ptsname");
    int claude_nvim_open(const char *path, int flags, ...) __asm__("open");
    int claude_nvim_close(int fd) __asm__("close");
    int claude_nvim_ioctl(int fd, unsigned long request, ...) __asm__("ioctl");
    struct claude_nvim_winsize { unsigned short rows, cols, xpixel, ypixel; };
  ]])  -- (made already, if this module was loaded again)
end

--- Whether this Neovim can make a pseudo-terminal itself.
---@return boolean
function M.available() return KNOWN and true or false end

--- A new pseudo-terminal of `rows` x `cols`: its master and slave ends (close-on-exec, not
--- this process's controlling terminal), or nil and why.
---@param rows integer
---@param cols integer
---@return integer|nil master
---@return integer|nil slave
---@return string|nil why
function M.open(rows, cols)
  if not KNOWN then return nil, nil, 'no pseudo-terminals from Lua here' end
  declare()
  local C = ffi.C
  local master = C.claude_nvim_posix_openpt(O_RDWR + O_NOCTTY + O_CLOEXEC)
  if master < 0 then return nil, nil, 'posix_openpt failed: errno ' .. ffi.errno() end
  local name = nil
  if C.claude_nvim_grantpt(master) == 0 and C.claude_nvim_unlockpt(master) == 0 then
    name = C.claude_nvim_ptsname(master)
  end
  local slave = name ~= nil and C.claude_nvim_open(name, O_RDWR + O_NOCTTY + O_CLOEXEC) or -1
  if slave < 0 then
    local errno = ffi.errno()
    C.claude_nvim_close(master)
    return nil, nil, 'cannot open a pseudo-terminal\'s slave: errno ' .. errno
  end
  M.resize(slave, rows, cols)
  return master, slave
end

--- Set the window size of the pseudo-terminal that `fd` (either end) is of: claude, whose
--- terminal it is, gets SIGWINCH.
---@param fd integer
---@param rows integer
---@param cols integer
function M.resize(fd, rows, cols)
  if not KNOWN then return end
  declare()
  local size = ffi.new('struct claude_nvim_winsize', { rows, cols, 0, 0 })
  ffi.C.claude_nvim_ioctl(fd, ffi.cast('unsigned long', TIOCSWINSZ), size)
end

--- Close `fd` (an end M.open gave).
---@param fd integer
function M.close(fd)
  if KNOWN then ffi.C.claude_nvim_close(fd) end
end

return M
