"""What ``serve`` and ``claude`` share: the tools to serve, and running a server until it stops
with an exit status, or one line of error, for what stopped it."""

from __future__ import annotations

import argparse
import errno
import gc
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from .. import _lockfile as lockfile
from .._app import AlreadyServed, App
from .._errors import EditorGone, leaf_errors
from .._plugins import LoadedTools, ToolRegistryError, load_tools
from . import fail, log
from .tools import disabled, warn_unmatched

NO_NVIM = """\
claude-nvim: no Neovim to attach to.
Run it from a Neovim terminal (:terminal claude-nvim {command}), where $NVIM is set,
or name Neovim's RPC address: claude-nvim {command} --nvim /path/to/nvim.sock
(start Neovim with --listen ADDR to get one)."""


def tools_to_serve(args: argparse.Namespace) -> LoadedTools | None:
    """The tools to serve, or None when there are none to serve (and the user was told)."""
    try:
        loaded = load_tools(disabled=disabled(args))
    except ToolRegistryError as exc:
        fail(str(exc), exc)
        return None
    warn_unmatched(loaded.unmatched)
    return loaded


def run_server(app: App, session: Callable[[Callable[[], None]], Awaitable[int]], *,
               signalled: int, neovim_gone: int) -> int:
    """Run ``session(ready)``, which starts ``app`` and calls ``ready`` once it serves; the
    exit status: the session's, or for what stopped it.

    SIGTERM or SIGHUP (the terminal closed) stop it (status ``signalled``), and the lock file
    goes with it; Neovim going away after the start is status ``neovim_gone``.
    """
    started = False

    def ready() -> None:
        nonlocal started
        started = True

    async def until_stopped() -> int:
        # What was imported lives as long as the server: leave it out of every full collection
        # (they took 10-20 ms each under load, a few times a second).
        gc.freeze()
        status = signalled
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_stop_on_signals, nursery.cancel_scope)
            status = await session(ready)
            nursery.cancel_scope.cancel()
        return status

    try:
        return trio.run(until_stopped)
    except BaseException as error:  # _stopped raises again what it does not expect
        # (Its lock written, it has started: Neovim may quit before the rest is done.)
        return _stopped(error, app, started or app.announced, neovim_gone=neovim_gone)


def _stopped(error: BaseException, app: App, started: bool, *, neovim_gone: int) -> int:
    """The exit status for what stopped ``app``: one stop reason, or one line of error.

    Raises ``error`` when it was not expected.
    """
    errors = leaf_errors(error)
    if any(isinstance(e, KeyboardInterrupt) for e in errors):
        # Ctrl-C reaches a headless Neovim too, which quits: that is no second reason.
        log.info("stopped: interrupted")
        return 130
    if started and isinstance(errors[0], EditorGone):
        log.info("stopped: Neovim went away (%s)", errors[0])
        return neovim_gone
    for e in errors:
        if (why := _explain(e, app, started)) is not None:
            return fail(why, error)
    raise error


def _explain(error: BaseException, app: App, started: bool) -> str | None:
    """``cause; what to do`` for an expected failure of a server, or None."""
    if isinstance(error, (AlreadyServed, lockfile.UnsafeLockDirectory)):
        return str(error)
    if isinstance(error, EditorGone) and not started:
        return f"{error}; check that Neovim runs there (`:echo v:servername` in it shows it)"
    if isinstance(error, OSError) and error.filename is not None:
        directory, path = app.lock_directory, Path(os.fsdecode(error.filename))
        if path.is_relative_to(directory) or directory.is_relative_to(path):
            return (f"cannot write the lock file in {directory} ({error.strerror}: {path}); "
                    "make that a directory you can write, or set CLAUDE_CONFIG_DIR (for "
                    "claude too) to another")
    elif isinstance(error, OSError) and not started:  # the only one without a file: bind()
        port = app.requested_port
        cause = (f"port {port} is in use" if error.errno == errno.EADDRINUSE
                 else f"cannot listen on 127.0.0.1:{port} ({error.strerror})")
        return f"{cause}; choose another --port, or leave it out to take a free one"
    return None


async def _stop_on_signals(scope: trio.CancelScope) -> None:
    wanted = [signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    with trio.open_signal_receiver(*wanted) as received:
        async for signum in received:
            log.info("stopping on %s", signal.Signals(signum).name)
            scope.cancel()
            return
