"""The Neovim half's Lua modules, and the two chunks that put them in place.

The shared modules are real files, ``claude_nvim/lua/<name>.lua`` (package data), installed in
Neovim as ``claude_nvim.<name>`` and loaded with the chunkname ``@<file>``, so that a Lua error
or traceback names the file and line (docs/architecture.md, "Lua"). A Neovim plugin owns the
bare ``claude_nvim`` module: the server installs, and stops, only the modules it names here.
"""

from __future__ import annotations

import functools
import logging
import math
import os
from dataclasses import dataclass
from importlib import resources

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LuaModule:
    """A Lua module for Neovim: ``package.loaded[name]`` becomes what ``source`` returns."""

    name: str
    source: str
    chunkname: str
    """What Lua calls the chunk in errors: ``@<path>`` for a file, ``=<name>`` for a string."""

    @classmethod
    def from_string(cls, name: str, source: str) -> LuaModule:
        """A module whose source lives in a Python string (a tool's own Lua)."""
        return cls(name, source, f"={name}")


@functools.cache
def shared_module(name: str) -> LuaModule:
    """``claude_nvim/_<name>/<name>.lua``, read once, as the module ``claude_nvim.<name>``."""
    file = resources.files("claude_nvim").joinpath(f"_{name}", f"{name}.lua")
    return LuaModule(f"claude_nvim.{name}", file.read_text(encoding="utf-8"), f"@{file}")


CORE = "claude_nvim.core"
"""The module every other one requires: helpers, the channel back, switching off."""

CLAIM_LUA = r"""
-- Claim this Neovim for the server on channel `chan`, before anything of ours is installed.
-- Returns the live server that holds it already, or nil. One Lua call: two servers starting
-- at once cannot both win. The half of a server that died without cleaning up is switched
-- off first, as that server would have done (it is still the owner until then).
local chan, pid = ...
local info = vim.g.claude_nvim_server
if type(info) == 'table' and info.channel ~= nil and info.channel ~= chan then
  -- A closed channel has no id (Neovim 0.10 gives its info as {[true] = 6}, not {}).
  if vim.api.nvim_get_chan_info(info.channel).id ~= nil then return info end
  local core = package.loaded['claude_nvim.core']
  if type(core) == 'table' and core.unload then pcall(core.unload, info.channel) end
end
vim.g.claude_nvim_server = { channel = chan, pid = pid, port = vim.NIL }
return vim.NIL
"""

INSTALL_LUA = r"""
-- Install (or replace) Lua modules, in order: run by the owner only, after CLAIM_LUA.
-- Each is {name, source, chunkname}; core keeps the names, to stop just those (core.unload).
local names = {}
for _, m in ipairs(...) do
  package.loaded[m[1]] = assert(loadstring(m[2], m[3]))()
  names[#names + 1] = m[1]
end
package.loaded['claude_nvim.core'].modules = names
"""


def install_arguments(modules: list[LuaModule]) -> list[list[str]]:
    """INSTALL_LUA's argument for ``modules``."""
    return [[m.name, m.source, m.chunkname] for m in modules]


MAX_FILE_MB = 50.0
"""The largest file, in MB, that a tool may make Neovim load, unless $CLAUDE_NVIM_MAX_FILE_MB
says otherwise: the Lua ``M.unloadable``'s limit."""


def max_file_bytes(megabytes: float | None = None) -> int:
    """The file size limit in bytes: ``megabytes`` MB, by default $CLAUDE_NVIM_MAX_FILE_MB's."""
    if megabytes is None:
        setting = os.environ.get("CLAUDE_NVIM_MAX_FILE_MB", "").strip()
        try:
            megabytes = float(setting) if setting else MAX_FILE_MB
        except ValueError:
            megabytes = math.nan
        if not 0 < megabytes < math.inf:
            log.warning("CLAUDE_NVIM_MAX_FILE_MB=%r is not a number of megabytes: using %g",
                        setting, MAX_FILE_MB)
            megabytes = MAX_FILE_MB
    if not 0 < megabytes < math.inf:
        raise ValueError(f"the file size limit must be a positive number of MB, not {megabytes}")
    return min(int(megabytes * 2**20), 2**53)  # Lua's numbers are doubles
