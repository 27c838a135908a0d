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
    """``claude_nvim/lua/<name>.lua``, read once, as the module ``claude_nvim.<name>``."""
    file = resources.files(__package__).joinpath("lua", f"{name}.lua")
    return LuaModule(f"claude_nvim.{name}", file.read_text(encoding="utf-8"), f"@{file}")


CORE = "claude_nvim.core"
"""The module every other one requires: helpers, the channel back, switching off."""

CLAIM_LUA = r"""
-- Claim this Neovim for the server on channel `chan` and install its Lua modules, or return
-- the live server that holds it already (nothing installed). One Lua call: two servers
-- starting at once cannot both win. Whether a server lives is core.live_server's to say (the
-- core being installed, core first). The half of a server that died without cleaning up is
-- switched off first, as that server would have done (it is still the owner until then).
-- Each module is {name, source, chunkname}; core keeps the names, to stop just those.
local chan, pid, modules = ...
local loaded = { assert(loadstring(modules[1][2], modules[1][3]))() }
local core = loaded[1]
local holder = core.live_server()
if holder ~= nil and holder.channel ~= chan then return holder end
local old, record = package.loaded['claude_nvim.core'], vim.g.claude_nvim_server
if type(record) == 'table' and type(old) == 'table' and old.unload then
  pcall(old.unload, record.channel)
end
vim.g.claude_nvim_server = { channel = chan, pid = pid, port = vim.NIL }
local names = {}
for i, m in ipairs(modules) do
  package.loaded[m[1]] = loaded[i] or assert(loadstring(m[2], m[3]))()
  names[#names + 1] = m[1]
end
core.modules = names
return vim.NIL
"""


def install_arguments(modules: list[LuaModule]) -> list[list[str]]:
    """CLAIM_LUA's argument for ``modules`` (core first)."""
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
