"""``claude-nvim claude``: serve this Neovim (or reuse its running server) and run ``claude``
connected to it, with the model endpoint as its MCP server ``nvim``; stop when it exits."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import secrets
import shutil
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import trio

from .. import _lockfile as lockfile
from .._app import AlreadyServed, App
from .._errors import leaf_errors
from .._nvim import editor_for
from .._wire.constants import MODEL_PATH
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
    return run_server(app, functools.partial(_serve_and_run_claude, app,
                                             [claude, *args.claude_args]),
                      signalled=128 + signal.SIGTERM, neovim_gone=1)


async def _serve_and_run_claude(app: App, command: list[str],
                                ready: Callable[[], None]) -> int:
    environment = dict(os.environ)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(app.run)
            ready()
            with _model_endpoint_file(app.lock_directory, app.port, app.token) as config:
                return await _run_claude([*command, "--mcp-config", config],
                                         {**environment, **app.environment},
                                         nursery.cancel_scope)
    except* AlreadyServed as group:
        served = leaf_errors(group)[0]
        assert isinstance(served, AlreadyServed)
        log.info("reusing this Neovim's running server on port %s", served.port)
        environment["CLAUDE_CODE_SSE_PORT"] = str(served.port)
    try:
        port, token = lockfile.find_server(os.getcwd(), environment)
    except LookupError:
        return await _run_claude(command, environment, None)
    with _model_endpoint_file(lockfile.lock_dir(environment), port, token) as config:
        return await _run_claude([*command, "--mcp-config", config], environment, None)


def model_endpoint_config(port: int, token: str) -> str:
    """``claude --mcp-config`` JSON for the model endpoint: its tools are ``mcp__nvim__*``."""
    return json.dumps({"mcpServers": {"nvim": {
        "type": "ws", "url": f"ws://127.0.0.1:{port}{MODEL_PATH}",
        "headers": {"X-Claude-Code-Ide-Authorization": token},
    }}})


@contextlib.contextmanager
def _model_endpoint_file(directory: Path, port: int, token: str) -> Iterator[str]:
    """The --mcp-config for claude as a private file: on the command line, `ps` shows it.

    A new file of a random name (no planted file or symlink gets the token), born 0600.
    """
    path = lockfile.write_private(directory, f"mcp-{port}-{secrets.token_hex(8)}.json",
                                  model_endpoint_config(port, token))
    try:
        yield str(path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


async def _run_claude(command: list[str], environment: dict[str, str],
                      scope: trio.CancelScope | None) -> int:
    # Ctrl-C in the terminal reaches us too; it is claude's to handle, not ours.
    with trio.open_signal_receiver(signal.SIGINT):
        done = await trio.run_process(command, stdin=None, check=False, env=environment)
    if scope is not None:
        scope.cancel()
    return done.returncode
