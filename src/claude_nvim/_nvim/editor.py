"""What the server and the tools need from Neovim: the :class:`Editor` interface.

The clients that implement it are its neighbours in :mod:`claude_nvim._nvim`; their errors
are in :mod:`claude_nvim._errors`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any, Protocol

import trio

DEFAULT_TIMEOUT = 5.0
"""Seconds a non-interactive call may wait: Neovim defers requests while it waits for input."""
USE_DEFAULT = -1.0
"""A ``timeout`` argument meaning: the editor's own default."""

NotificationCallback = Callable[[list[Any]], None]


class Editor(Protocol):
    """What the server and the tools need from Neovim; every method runs on trio."""

    address: str
    """Neovim's RPC address: a socket path, named pipe or host:port."""

    @property
    def channel_id(self) -> int: ...

    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...

    async def request(self, method: str, *args: Any, timeout: float | None = ...) -> Any: ...

    async def exec_lua(self, code: str, *args: Any, timeout: float | None = ...) -> Any: ...

    async def call_lua(self, module: str, fn: str, *args: Any,
                       timeout: float | None = ...) -> Any: ...

    def call_lua_soon(self, module: str, fn: str, *args: Any) -> None: ...

    def on_notification(self, event: str, callback: NotificationCallback) -> None: ...


def parse_address(address: str) -> tuple[str, dict[str, Any]]:
    """``("tcp", {address, port})`` or ``("socket", {path})`` for a Neovim RPC address."""
    match = re.fullmatch(r"\[?([\w.:-]+?)\]?:(\d+)", address)
    if match and not os.path.exists(address):
        return "tcp", {"address": match[1], "port": int(match[2])}
    return "socket", {"path": address}


def error_text(message: object) -> str:
    """The useful part of a Neovim error message."""
    text = str(message)
    # Lua errors arrive as "Error executing lua: <where>: message\nstack traceback: ...".
    text = text.split("\nstack traceback:", 1)[0]
    return re.sub(r"^Error executing lua:\s*", "", text).strip()
