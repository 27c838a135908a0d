"""The ``claude-nvim`` command."""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import json
import logging
import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import trio
from trio_websocket import HandshakeError

from . import __version__, doctor, lockfile
from .errors import EditorGone, leaf_errors
from .headless import find_nvim, headless_nvim
from .nvim_client import editor_for
from .plugins import LoadedTools, ToolRegistryError, load_tools, plugin_distributions
from .relay import relay
from .server import MODEL_PATH, AlreadyServed, App

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
    try:
        # `claude` owns the terminal: logging there would scribble over its screen.
        _configure_logging(args.log_level, args.log_file,
                           to_stderr=getattr(args, "command", None) is not cmd_claude)
    except OSError as exc:
        return _fail(f"cannot open the log file ({exc.strerror}: {exc.filename}); "
                     "choose another --log-file")
    if not hasattr(args, "command"):
        parser.print_help()
        return 2
    try:
        result: int = args.command(args)
    except KeyboardInterrupt:  # Ctrl-C outside a server (which says why it stopped itself)
        return 130
    return result


def _fail(message: str, error: BaseException | None = None) -> int:
    """Say why the command failed, in one line; the traceback is for the debug log only."""
    if error is not None:
        log.debug("the failure in full:", exc_info=error)
    print(f"claude-nvim: {message}", file=sys.stderr)
    return 1


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
    serve.add_argument("--port", type=_port, default=0,
                       help="port on 127.0.0.1 (default: a free one)")
    _add_disable(serve)

    claude = sub.add_parser(
        "claude", parents=[logging_options],
        help="serve this Neovim and run `claude` connected to it",
        description="Start the server for this Neovim (or reuse the running one) and run "
                    "`claude` connected to it; stop when it exits. The options below go right "
                    "after `claude`; the first other argument and all after it are claude's "
                    "own (after `--`, all are: claude-nvim claude -- --help shows claude's "
                    "help).",
        usage="claude-nvim claude [-h] [--nvim ADDR] [--log-level LEVEL] [--log-file FILE] "
              "[--] [claude's options and arguments ...]")
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


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535)")
    return port


_LOGGING_OPTIONS = ("--log-level", "--log-file")


def _split_at_claude(argv: list[str]) -> tuple[list[str], list[str]]:
    """Split ``... claude [our options] [--] REST`` so that REST goes to ``claude`` untouched.

    Ours are any options before the command word, and after it those of ``claude-nvim claude
    --help``; the first other argument starts claude's.
    """
    at = _past_options(argv, 0, _LOGGING_OPTIONS)
    if argv[at:at + 1] != ["claude"]:
        return argv, []
    at = _past_options(argv, at + 1, (*_LOGGING_OPTIONS, "--nvim"), ("-h", "--help"))
    rest = argv[at:]
    return argv[:at], rest[1:] if rest[:1] == ["--"] else rest


def _past_options(argv: list[str], at: int, with_value: Sequence[str],
                  flags: Sequence[str] | None = None) -> int:
    """Where the options from ``at`` on end: ``flags`` (None: any other option) and
    ``with_value`` (``--name VALUE`` or ``--name=VALUE``)."""
    while at < len(argv):
        name = argv[at].split("=", 1)[0]
        if name in with_value:
            at += 1 if "=" in argv[at] else 2
        elif argv[at] in flags if flags is not None else argv[at].startswith("-"):
            at += 1
        else:
            break
    return at


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
        return _fail(str(exc), exc)
    sources = plugin_distributions()
    _warn_unmatched(disabled - {t.name for t in loaded.tools.values()}
                    - {b.name for b in loaded.broken} - set(sources))
    rows = [("TOOL", "ENDPOINT", "PLUGIN", "FROM", "STATUS")]
    for tool in sorted(loaded.tools.values(), key=lambda t: t.name.lower()):
        plugin = tool.plugin or "?"
        status = [word for word, applies in (
            ("disabled", tool.name in disabled or plugin in disabled),
            ("hidden", tool.description is None)) if applies]
        rows.append((tool.name, "+".join(str(e.name).lower() for e in tool.exposure), plugin,
                     " ".join(sources.get(plugin, ("(in-process)",))), ", ".join(status)))
    for broken in loaded.broken:
        rows.append(("-", "-", broken.name, broken.distribution or "?",
                     f"broken: {broken.error}"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
              + "  " + row[4])
    return 0


def _load_tools(args: argparse.Namespace) -> LoadedTools | None:
    """The tools to serve, or None when there are none to serve (and the user was told)."""
    try:
        loaded = load_tools(disabled=_disabled(args))
    except ToolRegistryError as exc:
        _fail(str(exc), exc)
        return None
    _warn_unmatched(loaded.unmatched)
    return loaded


def _warn_unmatched(names: Iterable[str]) -> None:
    for name in sorted(names):
        log.warning("cannot disable %r: no tool or plugin has that name (claude-nvim tools "
                    "lists them)", name)


def cmd_serve(args: argparse.Namespace) -> int:
    loaded = _load_tools(args)
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
        return _run(App(editor_for(address), loaded.tools, port=args.port), ready_note)


def _start_headless(stack: contextlib.ExitStack) -> str | None:
    """Start a private headless Neovim here for ``stack``'s life; its address, or None."""
    try:
        nvim = find_nvim()
    except FileNotFoundError as exc:
        _fail(str(exc), exc)
        return None
    try:
        address, _process = stack.enter_context(headless_nvim(cwd=os.getcwd()))
    except (OSError, RuntimeError) as exc:  # it does not run, or quits before listening
        _fail(f"cannot start `{nvim} --headless` ({exc}); check that it runs, "
              "or set CLAUDE_NVIM_NVIM to another nvim", exc)
        return None
    log.info("started a headless Neovim at %s; diffs there can only be answered over "
             "RPC (nvim --server %s --remote-send ...)", address, address)
    return address


def _run(app: App, ready_note: str | None = None) -> int:
    started = False

    def ready() -> None:
        nonlocal started
        started = True
        if ready_note:
            print(f"claude-nvim: serving on port {app.port}; {ready_note}; Ctrl-C stops",
                  file=sys.stderr, flush=True)

    try:
        trio.run(_serve, app, ready)
    except BaseException as error:  # _stopped raises again what it does not expect
        return _stopped(error, app, started)
    return 0


def _stopped(error: BaseException, app: App, started: bool, *, neovim_gone: int = 0) -> int:
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
            return _fail(why, error)
    raise error


def _explain(error: BaseException, app: App, started: bool) -> str | None:
    """``cause; what to do`` for an expected failure of a server, or None."""
    if isinstance(error, AlreadyServed):
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
        print(f"claude-nvim mcp: cannot reach the server on port {port}: "
              f"{leaf_errors(group)[0]}",
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
    loaded = _load_tools(args)
    if loaded is None:
        return 1
    app = App(editor_for(address), loaded.tools)
    started = False

    def ready() -> None:
        nonlocal started
        started = True

    try:
        status: int = trio.run(_claude_session, app, [claude, *args.claude_args], ready)
    except BaseException as error:  # _stopped raises again what it does not expect
        # Neovim went away under claude: claude was stopped with the server.
        return _stopped(error, app, started, neovim_gone=1)
    return status


async def _claude_session(app: App, command: list[str], ready: Callable[[], None]) -> int:
    """Run ``command`` (claude) connected to ``app``, or to this Neovim's running server.

    SIGTERM or SIGHUP (the terminal closed) stop both, and the lock file goes with them.
    """
    status = 128 + signal.SIGTERM
    gc.freeze()  # as for serve: the server runs here too
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_signals, nursery.cancel_scope)
        status = await _serve_and_run_claude(app, command, ready)
        nursery.cancel_scope.cancel()
    return status


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


@contextlib.contextmanager
def _model_endpoint_file(directory: Path, port: int, token: str) -> Iterator[str]:
    """The --mcp-config for claude as a private file: on the command line, `ps` shows it."""
    path = directory / f"mcp-{port}-{os.getpid()}.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(model_endpoint_config(port, token))
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


async def _serve(app: App, ready: Callable[[], None]) -> None:
    # What was imported lives as long as the server: leave it out of every full collection
    # (they took 10-20 ms each under load, a few times a second).
    gc.freeze()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_signals, nursery.cancel_scope)
        async with trio.open_nursery() as serving:
            await serving.start(app.run)
            ready()
        nursery.cancel_scope.cancel()


async def _stop_on_signals(scope: trio.CancelScope) -> None:
    wanted = [signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    with trio.open_signal_receiver(*wanted) as received:
        async for signum in received:
            log.info("stopping on %s", signal.Signals(signum).name)
            scope.cancel()
            return
