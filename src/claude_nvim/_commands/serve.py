"""``claude-nvim serve``: serve Claude Code's IDE protocol for a Neovim until it goes away.

Handed a listening socket (``--listen-fd``), it answers claude's first connection before it
imports the server (:mod:`.._wire.early`): the imports below are the light ones.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._wire.early import answer_first
from . import fail, log

EARLY_SECONDS = 3.0
"""How long a server handed its socket waits for claude's connection before it loads anyway
(claude connects 0.7-1.5 s after it starts; $CLAUDE_NVIM_EARLY_SECONDS: the plugin gives 0
when no claude is starting)."""


def run(args: argparse.Namespace) -> int:
    activated = _activated(args.listen_fd)
    if isinstance(activated, str):
        return fail(activated)
    if activated:
        try:
            seconds = float(os.environ.get("CLAUDE_NVIM_EARLY_SECONDS") or EARLY_SECONDS)
        except ValueError:
            seconds = EARLY_SECONDS
        started = time.monotonic()
        activated["early"] = early = answer_first(activated["listening"], activated["token"],
                                                  seconds=seconds)
        log.debug("loading after %.0f ms of early answers: %d connection(s), %d initialized",
                  (time.monotonic() - started) * 1000, len(early),
                  sum(e.initialize is not None for e in early))
    return _serve(args, activated)


def _serve(args: argparse.Namespace, activated: dict[str, Any]) -> int:
    # Imported now: claude is connected (or the early answers gave up waiting).
    import trio

    from .._app import App
    from .._nvim import editor_for, open_to_others
    from .._paths import PathMap
    from ._running import NO_NVIM, run_server, tools_to_serve

    loaded = tools_to_serve(args)
    if loaded is None:
        return 1
    with contextlib.ExitStack() as stack:
        ready_note = None
        if args.headless:
            address = _start_headless(stack)
            if address is None:
                return 1
            ready_note = f"run `claude --ide` in {os.getcwd()} (or a directory below it)"
        else:
            address = args.nvim or os.environ.get("NVIM")
        if not address:
            print(NO_NVIM.format(command="serve") + "\nOr try it with --headless.",
                  file=sys.stderr)
            return 2
        try:
            paths = PathMap.parse(args.path_map)
        except ValueError as exc:
            print(f"claude-nvim serve: --path-map {exc}", file=sys.stderr)
            return 2
        remote = bool(paths)
        if remote and (refusal := open_to_others(address)):
            return fail(refusal)
        # Tests make it short; a dead connection costs a lock that outlives it this long.
        keepalive = float(os.environ.get("CLAUDE_NVIM_KEEPALIVE") or 15)
        # A private headless Neovim goes with the server: nothing to linger for.
        linger = not (args.no_linger or remote or args.headless or sys.platform == "win32")
        app = App(editor_for(address), loaded.tools, port=args.port, paths=paths, remote=remote,
                  keepalive=keepalive, linger=linger, on_linger=_let_go_of_pipes, **activated)

        async def serve(ready: Callable[[], None]) -> int:
            async with trio.open_nursery() as serving:
                await serving.start(app.run)
                ready()
                if ready_note:
                    print(f"claude-nvim: serving on port {app.port}; {ready_note}; Ctrl-C stops",
                          file=sys.stderr, flush=True)
            return 0

        return run_server(app, serve, signalled=0, neovim_gone=0)


def _activated(fd: int | None) -> dict[str, Any] | str:
    """What ``serve --listen-fd`` was handed, as App's keywords (none without it): the
    listening socket, the token (never on a command line, where `ps` shows it: from the
    environment, which claude and the rest of this server's children do not get) and the
    claude files written for them; or why they cannot be used."""
    token = os.environ.pop("CLAUDE_NVIM_TOKEN", "")
    mcp_config = os.environ.pop("CLAUDE_NVIM_MCP_CONFIG", "")
    if fd is None:
        return {}
    if len(token) < 32:
        return "--listen-fd needs $CLAUDE_NVIM_TOKEN, the lock's token (32 hex digits or more)"
    try:
        listening = socket.socket(fileno=fd)
    except OSError as exc:
        return f"--listen-fd {fd}: {exc.strerror or exc}"
    if listening.family != socket.AF_INET or listening.type != socket.SOCK_STREAM \
            or listening.getsockname()[0] != "127.0.0.1" \
            or not listening.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
        listening.detach()
        return f"--listen-fd {fd} is not a TCP socket listening on 127.0.0.1"
    files = {"--mcp-config": Path(mcp_config)} if mcp_config else {}
    return {"listening": listening, "token": token, "claude_files": files}


def _let_go_of_pipes() -> None:
    """Neovim has gone, the server stays: the pipes of Neovim's job (socket pairs: libuv's)
    are broken, so stdin, stdout and stderr that were such go to /dev/null (not a terminal)."""
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in (0, 1, 2):
            with contextlib.suppress(OSError):
                if stat.S_ISFIFO(mode := os.fstat(fd).st_mode) or stat.S_ISSOCK(mode):
                    os.dup2(null, fd)
    finally:
        os.close(null)


def _start_headless(stack: contextlib.ExitStack) -> str | None:
    """Start a private headless Neovim here for ``stack``'s life; its address, or None."""
    from .._nvim.headless import find_nvim, headless_nvim

    try:
        nvim = find_nvim()
    except FileNotFoundError as exc:
        fail(str(exc), exc)
        return None
    try:
        address, _process = stack.enter_context(headless_nvim(cwd=os.getcwd()))
    except (OSError, RuntimeError) as exc:  # it does not run, or quits before listening
        fail(f"cannot start `{nvim} --headless` ({exc}); check that it runs, "
             "or set CLAUDE_NVIM_NVIM to another nvim", exc)
        return None
    log.info("started a headless Neovim at %s; diffs there can only be answered over "
             "RPC (nvim --server %s --remote-send ...)", address, address)
    return address
