"""What a feature is: one part of claude-nvim with a Neovim half, which the App runs.

The App (:mod:`claude_nvim._app`) does not know the features by name: it iterates the list
:func:`claude_nvim._app.built_in` returns, as tox iterates its internal plugins. A feature is a
folder (``_selection/``: its :class:`Feature` subclass in ``__init__.py``, its Lua beside it);
adding one is writing that folder and adding one object to that list.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from ._nvim.lua import LuaModule
from ._paths import PathMap
from ._wire.jsontext import JSON as JSON

if TYPE_CHECKING:
    import trio

    from ._nvim.editor import Editor

NotificationHandler = Callable[[list[Any]], None]
"""Called with a Neovim notification's arguments, in the editor's task: it must not block."""
Send = Callable[[JSON], Awaitable[bool]]
"""Sends one message to one client; ``False`` once the client is gone."""


class Feature:
    """One part of claude-nvim with a Neovim half. What the App does with each, in list order:

    1. At start, it installs every feature's :attr:`lua` module (then the tools' modules) in
       one call, and routes the Neovim notifications named in :meth:`notifications` to their
       handlers.
    2. ``await feature.start(editor, nursery)``: by default, the Lua module's
       ``setup(opts)`` with :meth:`options`. ``nursery`` lives as long as the server.
    3. For each IDE client, once it listens: ``await feature.push(send)`` in a task of its
       own, cancelled when the client goes.
    4. When a client disconnects: ``await feature.disconnected(editor, client_id)``.
    5. When the server outlives its Neovim and the next one of the project takes it over:
       ``await feature.reattach(editor)``, by default ``setup(opts)`` there again.
    6. At the end, core's Lua ``unload`` calls each installed module's ``stop()`` (the last
       installed first), then the App calls :meth:`stop` here, last feature first.

    Every method has a default that does nothing beyond steps 2 and 5, so a feature overrides only
    what it has. Budgets (docs/architecture.md): a notification handler runs in the editor's
    task and must not block; Lua's per-keystroke work stays in Lua, cheap.
    """

    lua: LuaModule | None = None
    """Its Lua module, with ``setup(opts)`` and ``stop()``: usually
    ``shared_module(__name__, "<name>")``, ``<name>.lua`` in the feature's folder."""
    lua_parts: tuple[LuaModule, ...] = ()
    """More Lua modules of its folder that ``lua`` (or others) require, installed right after
    it: rooms of one feature's Lua, without a ``setup`` of their own."""
    paths: PathMap = PathMap()
    """Where Claude's paths are in Neovim and back: a path a feature sends to a client goes
    through ``self.paths.to_claude`` (or ``to_claude_fields``). The App sets the server's."""
    editor: Editor | None = None
    """The Neovim it was started with, from :meth:`start` to :meth:`stop` (None outside): for
    what it does later, on a notification or a hook."""
    nursery: trio.Nursery | None = None
    """The server's nursery, from :meth:`start` to :meth:`stop`: for the tasks it starts."""

    def notifications(self) -> Mapping[str, NotificationHandler]:
        """The Neovim notifications it handles: event name -> handler."""
        return {}

    def options(self, editor: Editor) -> JSON:
        """The ``opts`` its Lua module's ``setup(opts)`` gets."""
        return {}

    async def start(self, editor: Editor, nursery: trio.Nursery) -> None:
        """Start it, once its Lua is installed: by default, ``setup(self.options(editor))``;
        ``editor`` and ``nursery`` are kept (:attr:`editor`, :attr:`nursery`)."""
        self.editor, self.nursery = editor, nursery
        if self.lua is not None:
            await editor.call_lua(self.lua.name, "setup", self.options(editor))

    async def reattach(self, editor: Editor) -> None:
        """Set it up in a new Neovim, the server having outlived the last one (its Lua is
        installed again): by default, ``setup(self.options(editor))`` as :meth:`start` does.
        ``editor`` and the nursery :meth:`start` got are the same as then."""
        if self.lua is not None:
            await editor.call_lua(self.lua.name, "setup", self.options(editor))

    async def push(self, send: Send) -> None:
        """Send one IDE client this feature's notifications, for as long as it listens."""

    async def disconnected(self, editor: Editor, client_id: int) -> None:
        """A client went away: let go of what it owned."""

    def stop(self) -> None:
        """The server stops (Neovim's half has been switched off already); an override calls
        this one."""
        self.editor = self.nursery = None
