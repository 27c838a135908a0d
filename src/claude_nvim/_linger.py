"""A server that outlives its Neovim while Claudes need it: its files in the project directory.

When Neovim goes and a Claude is still connected (or a held Claude lives, ``claude-*.json``),
the App (:mod:`claude_nvim._app`) keeps serving and opens :func:`control` here: ``server.json``
(pid, port, socket) and ``server.sock``, where a new Neovim of the same project asks it to attach
(``{"nvim": "<address>"}``, one JSON line; the answer ``{"ok": true}`` or ``{"error": ...}``).
The plugin's half is ``lua/claude_nvim/linger.lua``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import trio

from ._lockfile import pid_alive
from ._project import key, project_dir, remove_if_empty, root, write_record

log = logging.getLogger(__name__)

GRACE = 2.0
"""Seconds a lingering server waits with no Neovim, no client and no held Claude before it
exits: a Claude between two reconnect attempts (its first comes at once) is not gone."""
MAX_REQUEST = 64 * 1024
REQUEST_SECONDS = 5.0
"""How long an asker has to send its request."""

Request = tuple[str, Callable[[dict[str, object]], Awaitable[None]]]
"""A Neovim's address, and how to answer the one who asked."""


def holders_alive(cwd: str) -> bool:
    """Whether a held Claude of the project lives (a ``claude-<n>.json`` naming a live pid)."""
    for path in (root() / key(cwd)).glob("claude-*.json"):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        pid = record.get("holder") if isinstance(record, dict) else None
        if isinstance(pid, int) and pid_alive(pid):
            return True
    return False


def _owner(record: Path) -> int | None:
    """The pid a ``server.json`` names, if it is alive."""
    try:
        pid = json.loads(record.read_text(encoding="utf-8")).get("pid")
    except (OSError, ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) and pid_alive(pid) else None


@contextlib.asynccontextmanager
async def control(project: str, port: int
                  ) -> AsyncIterator[trio.MemoryReceiveChannel[Request] | None]:
    """``server.json`` and ``server.sock`` in the directory of ``project`` for the block, and
    the requests that come through it; ``None`` (nothing written) when another live server has
    them, or the directory is not private."""
    try:
        directory = project_dir(project)
    except OSError as exc:
        log.warning("no Neovim can take this server over: %s", exc)
        yield None
        return
    record, path = directory / "server.json", directory / "server.sock"
    owner = _owner(record)
    if owner not in (None, os.getpid()):
        log.info("another lingering server (pid %d) answers in %s", owner, directory)
        yield None
        return
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listener = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    send, receive = trio.open_memory_channel[Request](0)
    try:
        try:
            await listener.bind(str(path))
            os.chmod(path, 0o600)
            listener.listen(4)
            write_record(record, {"pid": os.getpid(), "port": port, "socket": str(path)})
        except OSError as exc:  # a path too long for a socket, say: it lingers all the same
            log.warning("no Neovim can take this server over: %s", exc)
            yield None
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, _handler(send),
                               [trio.SocketListener(listener)])
            yield receive
            nursery.cancel_scope.cancel()
    finally:
        listener.close()
        if _owner(record) == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                record.unlink()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        remove_if_empty(directory)  # held Claudes' files stay


def _handler(send: trio.MemorySendChannel[Request]
                    ) -> Callable[[trio.SocketStream], Awaitable[None]]:
    async def handle(stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            with trio.move_on_after(REQUEST_SECONDS):
                while b"\n" not in data and len(data) < MAX_REQUEST:
                    chunk = await stream.receive_some(4096)
                    if not chunk:
                        break
                    data += chunk
            try:
                address = json.loads(data.split(b"\n")[0])["nvim"]
            except (ValueError, KeyError, TypeError):
                address = None
            answered = trio.Event()

            async def answer(reply: dict[str, object]) -> None:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await stream.send_all(json.dumps(reply).encode() + b"\n")
                answered.set()

            if not isinstance(address, str) or not address:
                await answer({"error": 'expected {"nvim": "<address>"}'})
                return
            await send.send((address, answer))
            await answered.wait()

    return handle
