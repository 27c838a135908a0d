"""The Neovim half's Lua modules, and the two chunks that put them in place.

The shared modules are real files, ``<name>.lua`` in their feature's folder (package data:
``claude_nvim/_selection/selection.lua``), installed in Neovim as ``claude_nvim.<name>`` and
loaded with the chunkname ``@<file>``, so that a Lua error or traceback names the file and line
(docs/architecture.md, "Lua"). A Neovim plugin owns the bare ``claude_nvim`` module: the server
installs, and stops, only the modules it names here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class LuaModule:
    """A Lua module for Neovim: ``package.loaded[name]`` becomes what ``source`` returns."""

    name: str
    source: str
    chunkname: str
    """What Lua calls the chunk in errors: ``@<path>`` for a file, ``=<name>`` for a string."""

    @classmethod
    def from_string(cls, name: str, source: str) -> LuaModule:
        """A module whose source is ``source`` (a tool's ``lua``): named by its file when it
        was read from one (:func:`read_lua`), else by ``name``."""
        return cls(name, source,
                   source.chunkname if isinstance(source, LuaFile) else f"={name}")


class LuaFile(str):
    """Lua source read from a file of package data (:func:`read_lua`). A ``str``, as a tool's
    ``lua`` is, which also knows the chunkname ``@<path>`` that makes its errors name the file
    and the line."""

    chunkname: str


def read_lua(package: str, file: str) -> LuaFile:
    """The Lua source of ``file`` in ``package`` (package data): a tool's own Lua, say,
    ``read_lua(__package__, "open_file.lua")``."""
    path = resources.files(package).joinpath(file)
    source = LuaFile(path.read_text(encoding="utf-8"))
    source.chunkname = f"@{path}"
    return source


@functools.cache
def shared_module(package: str, name: str) -> LuaModule:
    """``<name>.lua`` of ``package`` (package data: a feature's folder), read once, as the
    module ``claude_nvim.<name>``."""
    source = read_lua(package, f"{name}.lua")
    return LuaModule(f"claude_nvim.{name}", source, source.chunkname)


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
