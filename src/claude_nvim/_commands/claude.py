"""``claude-nvim claude``: serve this Neovim (or reuse its running server) and run ``claude``
connected to it, with what the server publishes for a claude (its environment, and its
arguments: the model endpoint as the MCP server ``nvim``); stop when it exits."""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import trio

from .._app import AlreadyServed, App
from .._errors import leaf_errors
from .._nvim import editor_for
from . import log
from ._running import NO_NVIM, run_server, tools_to_serve


def run(args: argparse.Namespace) -> int:
    address = args.nvim or os.environ.get("NVIM")
    if not address:
        print(NO_NVIM.format(command="claude"), file=sys.stderr)
        return 2
    claude = shutil.which(os.environ.get("CLAUDE_NVIM_CLAUDE", "claude"))
    if claude is None:
        print("claude-nvim: `claude` is not on PATH; install Claude Code "
              "(npm install -g @anthropic-ai/claude-code)", file=sys.stderr)
        return 127
    loaded = tools_to_serve(args)
    if loaded is None:
        return 1
    app = App(editor_for(address), loaded.tools)
    # Neovim went away under claude: claude was stopped with the server.
    return run_server(app, functools.partial(_serve_and_run_claude, app, claude,
                                             args.claude_args),
                      signalled=128 + signal.SIGTERM, neovim_gone=1)


def claude_command(claude: str, published: Sequence[str], users: Sequence[str]) -> list[str]:
    """``claude`` with the server's arguments first: after a user's ``--`` they would be
    prompt text."""
    return [claude, *published, *users]


async def _serve_and_run_claude(app: App, claude: str, users: list[str],
                                ready: Callable[[], None]) -> int:
    environment = dict(os.environ)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(app.run)
            ready()
            return await _run_claude(claude_command(claude, app.claude_args, users),
                                     {**environment, **app.environment}, nursery.cancel_scope)
    except* AlreadyServed as group:
        served = leaf_errors(group)[0]
        assert isinstance(served, AlreadyServed)
        log.info("reusing this Neovim's running server on port %s", served.port)
    published: Mapping[str, Any] = served.claude or {}
    if served.port is not None:
        environment["CLAUDE_CODE_SSE_PORT"] = str(served.port)
    environment.update({str(k): str(v) for k, v in (published.get("env") or {}).items()})
    args = [str(a) for a in published.get("args") or []]
    return await _run_claude(claude_command(claude, args, users), environment, None)


async def _run_claude(command: list[str], environment: dict[str, str],
                      scope: trio.CancelScope | None) -> int:
    # Ctrl-C in the terminal reaches us too; it is claude's to handle, not ours.
    with trio.open_signal_receiver(signal.SIGINT):
        done = await trio.run_process(command, stdin=None, check=False, env=environment)
    if scope is not None:
        scope.cancel()
    return done.returncode
