"""The Neovim client: what the server and the tools need from Neovim, over msgpack-RPC.

Its layers, each in its own module (as pynvim splits its msgpack_rpc), bottom first:

- :mod:`.editor`: the :class:`~.editor.Editor` interface, all that the rest of claude-nvim uses;
- :mod:`.scheduler`: :class:`~.scheduler.EditorBase`, the request scheduling both clients
  share (in-flight limit, freeze budget, timeouts);
- :mod:`.socket`: the msgpack-RPC client on trio, for unix sockets and TCP;
- :mod:`.pipe`: the pynvim client, for Windows named pipes (the only module importing pynvim);
- here, :func:`editor_for`, which picks one for an address (the clients know nothing of each
  other).

Beside them: :mod:`.lua`, the Lua modules the server installs in Neovim and the chunks that
install them; :mod:`.headless`, a private headless Neovim. Their errors are in
:mod:`claude_nvim._errors`.
"""

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
