"""The Neovim client for an address: above both clients, which know nothing of each other."""

from __future__ import annotations

import sys

from .editor import DEFAULT_TIMEOUT, Editor, parse_address
from .scheduler import MAX_IN_FLIGHT
from .socket import SocketEditor


def editor_for(address: str, *, timeout: float = DEFAULT_TIMEOUT,
               max_in_flight: int = MAX_IN_FLIGHT) -> Editor:
    """The editor client for a Neovim RPC address (socket path, named pipe or host:port)."""
    if sys.platform == "win32" and parse_address(address)[0] == "socket":
        from .pipe import PynvimEditor  # named pipes: trio has no client for them
        return PynvimEditor(address, timeout=timeout, max_in_flight=max_in_flight)
    return SocketEditor(address, timeout=timeout, max_in_flight=max_in_flight)
