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

import os
import stat
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


def open_to_others(address: str) -> str | None:
    """Why the Neovim at ``address`` is open to other users of this host, or None.

    ``serve --path-map`` may reach a Neovim on another host through a forwarded socket that
    the user set up (``claude-nvim remote`` never does: its server runs beside Neovim): whoever
    can connect to that can run any command as the user, on the user's machine. So it
    must be a socket of this user's that no one else may open, or one in such a directory. A
    TCP address is open to every process of the host.
    """
    kind, where = parse_address(address)
    if kind == "tcp":
        return (f"Neovim's address {address} is a TCP port, which every user of this host can "
                "connect to (and run commands as you in Neovim): forward Neovim's socket as a "
                "Unix socket instead, or run claude-nvim beside Neovim (claude-nvim remote)")
    path = where["path"]
    try:
        info = os.lstat(path)
        folder = os.lstat(os.path.dirname(os.path.abspath(path)))
    except OSError as exc:
        return f"cannot check Neovim's socket {path}: {exc.strerror}"
    mine = os.geteuid()
    if not stat.S_ISSOCK(info.st_mode) or info.st_uid != mine:
        return f"{path} is not a socket of yours"
    if stat.S_IMODE(info.st_mode) & 0o077 == 0:
        return None
    if (folder.st_uid == mine and stat.S_ISDIR(folder.st_mode)
            and stat.S_IMODE(folder.st_mode) & 0o077 == 0):
        return None
    return (f"Neovim's socket {path} (mode {stat.S_IMODE(info.st_mode):o}, in a directory of "
            f"mode {stat.S_IMODE(folder.st_mode):o}) is open to other users, who could run "
            "commands as you in Neovim: keep sshd's StreamLocalBindMask at 0177 (its default) "
            "or put the socket in a directory of mode 700")
