"""The ``claude-nvim`` command."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import secrets
import shutil
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import trio
from trio_websocket import HandshakeError

from . import __version__, doctor, lockfile
from .editor import EditorGone, editor_for
from .headless import headless_nvim
from .plugins import ToolRegistryError, load_tools, plugin_distributions
from .protocol import MODEL_PATH
from .relay import relay
from .server import AlreadyServed, App

log = logging.getLogger("claude_nvim")

NO_NVIM = """\
claude-nvim: no Neovim to attach to.
Run it from a Neovim terminal (:terminal claude-nvim {command}), where $NVIM is set,
or name Neovim's RPC address: claude-nvim {command} --nvim /path/to/nvim.sock
(start Neovim with --listen ADDR to get one)."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, claude_args = _split_at_claude(argv)
    args = parser.parse_args(ours)
    args.claude_args = claude_args
    # `claude` owns the terminal: logging there would scribble over its screen.
    _configure_logging(args.log_level, args.log_file,
                       to_stderr=getattr(args, "command", None) is not cmd_claude)
    if not hasattr(args, "command"):
        parser.print_help()
        return 2
    result: int = args.command(args)
    return result


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="claude-nvim", description="Connect Neovim to the Claude Code CLI."
    )
    parser.add_argument("--version", action="version", version=f"claude-nvim {__version__}")
    _add_logging_options(parser, os.environ.get("CLAUDE_NVIM_LOG_LEVEL", "info"), None)
    # ... and after the command word too (there, only when given).
    logging_options = argparse.ArgumentParser(add_help=False)
    _add_logging_options(logging_options, argparse.SUPPRESS, argparse.SUPPRESS)
    sub = parser.add_subparsers(metavar="COMMAND")

    serve = sub.add_parser(
        "serve", parents=[logging_options],
        help="serve Claude Code's IDE protocol for a Neovim")
    serve.set_defaults(command=cmd_serve)
    where = serve.add_mutually_exclusive_group()
    where.add_argument("--nvim", metavar="ADDR",
                       help="Neovim's RPC address: socket path, named pipe or host:port "
                            "(default: $NVIM, set inside Neovim's :terminal)")
    where.add_argument("--headless", action="store_true",
                       help="start a private headless Neovim (--clean) in this directory")
    serve.add_argument("--port", type=int, default=0,
                       help="port on 127.0.0.1 (default: a free one)")
    _add_disable(serve)

    claude = sub.add_parser(
        "claude", parents=[logging_options],
        help="serve this Neovim and run `claude` connected to it",
        description="Start the server for this Neovim (or reuse the running one) and run "
                    "`claude` with every further argument; stop when it exits.",
        usage="claude-nvim claude [--nvim ADDR] [claude arguments ...]")
    claude.set_defaults(command=cmd_claude)
    claude.add_argument("--nvim", metavar="ADDR", help="Neovim's RPC address (default: $NVIM)")
    claude.set_defaults(disable=[])

    mcp = sub.add_parser(
        "mcp", parents=[logging_options],
        help="a stdio MCP server for `claude mcp add`, relaying to the running server",
        description="Relay MCP over stdio to the model endpoint of the claude-nvim server for "
                    "this directory (or $CLAUDE_CODE_SSE_PORT). Register it once with: "
                    "claude mcp add nvim -- claude-nvim mcp")
    mcp.set_defaults(command=cmd_mcp)

    doctor = sub.add_parser(
        "doctor", parents=[logging_options],
        help="check Neovim, claude, the lock directory, plugins")
    doctor.set_defaults(command=cmd_doctor)
    doctor.add_argument("--nvim", metavar="ADDR", help="Neovim's RPC address (default: $NVIM)")

    tools = sub.add_parser(
        "tools", parents=[logging_options],
        help="list the tools and the plugins they come from")
    tools.set_defaults(command=cmd_tools)
    _add_disable(tools)
    return parser


def _add_logging_options(parser: argparse.ArgumentParser, level: str, file: str | None) -> None:
    parser.add_argument("--log-level", choices=["debug", "info", "warning", "error"],
                        default=level, help="default: $CLAUDE_NVIM_LOG_LEVEL or info")
    parser.add_argument("--log-file", default=file, help="also log to this file")


def _add_disable(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--disable", metavar="NAME", action="append", default=[],
                        help="leave out a tool or a plugin (repeatable; also "
                             "CLAUDE_NVIM_DISABLE=a,b)")


def _split_at_claude(argv: list[str]) -> tuple[list[str], list[str]]:
    """Split ``... claude [--nvim ADDR] REST`` so that REST goes to ``claude`` untouched."""
    at = 0
    while at < len(argv) and argv[at].startswith("-"):  # options before the command word
        at += 2 if argv[at] in ("--log-level", "--log-file") else 1
    if argv[at:at + 1] != ["claude"]:
        return argv, []
    at += 1
    if argv[at:at + 1] == ["--nvim"]:
        at += 2
    elif argv[at:at + 1] and argv[at].startswith("--nvim="):
        at += 1
    return argv[:at], argv[at:]


def _configure_logging(level: str, log_file: str | None, *, to_stderr: bool = True) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)] if to_stderr else []
    if not handlers and not log_file:
        handlers.append(logging.NullHandler())
    if log_file:
        handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
    logging.basicConfig(level=level.upper(), handlers=handlers,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Their debug lines are per frame and per event: noise, even when debugging claude-nvim.
    for chatty in ("trio-websocket", "asyncio"):
        logging.getLogger(chatty).setLevel(max(logging.INFO, logging.getLogger().level))


def _disabled(args: argparse.Namespace) -> list[str]:
    from_env = os.environ.get("CLAUDE_NVIM_DISABLE", "")
    return [*args.disable, *(n.strip() for n in from_env.split(",") if n.strip())]


def cmd_tools(args: argparse.Namespace) -> int:
    disabled = set(_disabled(args))
    try:
        loaded = load_tools()
    except ToolRegistryError as exc:
        print(f"claude-nvim: {exc}", file=sys.stderr)
        return 1
    sources = plugin_distributions()
    rows = [("TOOL", "ENDPOINT", "PLUGIN", "FROM", "STATUS")]
    for tool in sorted(loaded.tools.values(), key=lambda t: t.name.lower()):
        plugin = tool.plugin or "?"
        status = [word for word, applies in (
            ("disabled", tool.name in disabled or plugin in disabled),
            ("hidden", tool.description is None)) if applies]
        rows.append((tool.name, "+".join(sorted(tool.exposure)), plugin,
                     " ".join(sources.get(plugin, ("(in-process)",))), ", ".join(status)))
    for broken in loaded.broken:
        rows.append(("-", "-", broken.name, broken.distribution or "?",
                     f"broken: {broken.error}"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
              + "  " + row[4])
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        loaded = load_tools(disabled=_disabled(args))
    except ToolRegistryError as exc:
        print(f"claude-nvim: {exc}", file=sys.stderr)
        return 1
    with _neovim_address(args) as address:
        if address is None:
            print(NO_NVIM.format(command="serve") + "\nOr try it with --headless.",
                  file=sys.stderr)
            return 2
        return _run(App(editor_for(address), loaded.tools, port=args.port))


def _run(app: App) -> int:
    status = 0
    try:
        trio.run(_serve, app)
    except* KeyboardInterrupt:
        log.info("stopped: interrupted")
        status = 130
    except* EditorGone as group:
        if not app.port:  # it never started: Neovim was not reachable
            print(f"claude-nvim: {_first(group)}", file=sys.stderr)
            status = 1
        else:
            log.info("stopped: Neovim went away (%s)", _first(group))
    except* (AlreadyServed, lockfile.UnsafeLockDirectory) as group:
        print(f"claude-nvim: {_first(group)}", file=sys.stderr)
        status = 1
    return status


def _first(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


def cmd_doctor(args: argparse.Namespace) -> int:
    return doctor.report(doctor.check(args.nvim or os.environ.get("NVIM")))


def cmd_mcp(args: argparse.Namespace) -> int:
    try:
        port, token = lockfile.find_server(os.getcwd())
    except LookupError as exc:
        print(f"claude-nvim mcp: {exc}", file=sys.stderr)
        return 1
    status = 0
    try:
        trio.run(relay, port, token)
    except* (OSError, HandshakeError) as group:
        print(f"claude-nvim mcp: cannot reach the server on port {port}: {_first(group)}",
              file=sys.stderr)
        status = 1
    return status


def model_endpoint_config(port: int, token: str) -> str:
    """``claude --mcp-config`` JSON for the model endpoint: its tools are ``mcp__nvim__*``."""
    return json.dumps({"mcpServers": {"nvim": {
        "type": "ws", "url": f"ws://127.0.0.1:{port}{MODEL_PATH}",
        "headers": {"X-Claude-Code-Ide-Authorization": token},
    }}})


def cmd_claude(args: argparse.Namespace) -> int:
    address = args.nvim or os.environ.get("NVIM")
    if not address:
        print(NO_NVIM.format(command="claude"), file=sys.stderr)
        return 2
    claude = shutil.which(os.environ.get("CLAUDE_NVIM_CLAUDE", "claude"))
    if claude is None:
        print("claude-nvim: `claude` is not on PATH; install Claude Code "
              "(npm install -g @anthropic-ai/claude-code)", file=sys.stderr)
        return 127
    try:
        loaded = load_tools(disabled=_disabled(args))
    except ToolRegistryError as exc:
        print(f"claude-nvim: {exc}", file=sys.stderr)
        return 1
    app = App(editor_for(address), loaded.tools)
    try:
        status: int = trio.run(_claude_session, app, [claude, *args.claude_args])
    except* EditorGone:
        log.info("stopped: Neovim went away")
        status = 1
    except* lockfile.UnsafeLockDirectory as group:
        print(f"claude-nvim: {_first(group)}", file=sys.stderr)
        status = 1
    return status


async def _claude_session(app: App, command: list[str]) -> int:
    """Run ``command`` (claude) connected to ``app``, or to this Neovim's running server.

    SIGTERM or SIGHUP (the terminal closed) stop both, and the lock file goes with them.
    """
    status = 128 + signal.SIGTERM
    gc.freeze()  # as for serve: the server runs here too
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_signals, nursery.cancel_scope)
        status = await _serve_and_run_claude(app, command)
        nursery.cancel_scope.cancel()
    return status


async def _serve_and_run_claude(app: App, command: list[str]) -> int:
    environment = dict(os.environ)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(app.run)
            with _model_endpoint_file(app.lock_directory, app.port, app.token) as config:
                return await _run_claude([*command, "--mcp-config", config],
                                         {**environment, **app.environment},
                                         nursery.cancel_scope)
    except* AlreadyServed as group:
        served = _first(group)
        assert isinstance(served, AlreadyServed)
        log.info("reusing this Neovim's running server on port %s", served.port)
        environment["CLAUDE_CODE_SSE_PORT"] = str(served.port)
    try:
        port, token = lockfile.find_server(os.getcwd(), environment)
    except LookupError:
        return await _run_claude(command, environment, None)
    with _model_endpoint_file(lockfile.lock_dir(environment), port, token) as config:
        return await _run_claude([*command, "--mcp-config", config], environment, None)


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


@contextlib.contextmanager
def _neovim_address(args: argparse.Namespace) -> Iterator[str | None]:
    if args.headless:
        with headless_nvim(cwd=os.getcwd()) as (address, _process):
            log.info("started a headless Neovim at %s; diffs there can only be answered over "
                     "RPC (nvim --server %s --remote-send ...)", address, address)
            yield address
    else:
        yield args.nvim or os.environ.get("NVIM") or None


async def _serve(app: App) -> None:
    # What was imported lives as long as the server: leave it out of every full collection
    # (they took 10-20 ms each under load, a few times a second).
    gc.freeze()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_signals, nursery.cancel_scope)
        await app.run()
        nursery.cancel_scope.cancel()


async def _stop_on_signals(scope: trio.CancelScope) -> None:
    wanted = [signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    with trio.open_signal_receiver(*wanted) as received:
        async for signum in received:
            log.info("stopping on %s", signal.Signals(signum).name)
            scope.cancel()
            return
