"""Socket I/O shared by the WebSocket server and the Neovim socket client."""

from __future__ import annotations

import trio


async def send_all(socket: trio.socket.SocketType, data: memoryview | bytes) -> None:
    """Send all of ``data``; raises ``OSError`` or ``trio.ClosedResourceError``."""
    view = memoryview(data)
    while view:
        view = view[await socket.send(view):]
