"""The ``claude-nvim`` command: its options, parsed here for every subcommand, and the dispatch.

Each subcommand is a module of :mod:`claude_nvim._commands` with ``run(args) -> int`` (the exit
status), imported only when it runs: ``claude-nvim mcp``, started by claude for each session,
does not load the server.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:  # imported only for the annotations: `hold` must start at once
    from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["hold"]:  # every Claude terminal's command: claude starts once it forks
        from ._hold.launch import quick
        status = quick(argv[1:])
        if status is not None:
            return status
    import importlib

    from ._commands import fail

    parser = _parser()
    ours, claude_args = _split_at_claude(argv)
    args = parser.parse_args(ours)
    args.claude_args = claude_args
    try:
        # `claude` owns the terminal: logging there would scribble over its screen.
        command = getattr(args, "command", None)
        _configure_logging(args.log_level, args.log_file, to_stderr=not (
            command == "claude" or (command == "remote" and not args.serve)))
    except OSError as exc:
        return fail(f"cannot open the log file ({exc.strerror}: {exc.filename}); "
                    "choose another --log-file")
    if not hasattr(args, "command"):
        parser.print_help()
        return 2
    try:
        command = importlib.import_module(f"{__package__}._commands.{args.command}")
        result: int = command.run(args)
    except KeyboardInterrupt:  # Ctrl-C outside a server (which says why it stopped itself)
        return 130
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
    serve.set_defaults(command="serve")
    where = serve.add_mutually_exclusive_group()
    where.add_argument("--nvim", metavar="ADDR",
                       help="Neovim's RPC address: socket path, named pipe or host:port "
                            "(default: $NVIM, set inside Neovim's :terminal)")
    where.add_argument("--headless", action="store_true",
                       help="start a private headless Neovim (--clean) in this directory")
    serve.add_argument("--port", type=_port, default=0,
                       help="port on 127.0.0.1 (default: a free one)")
    serve.add_argument("--listen-fd", type=int, metavar="FD",
                       help="serve on this listening socket, inherited (the Neovim plugin binds "
                            "it, writes the lock and starts claude before the server is up); "
                            "the token is $CLAUDE_NVIM_TOKEN, the --mcp-config file "
                            "$CLAUDE_NVIM_MCP_CONFIG")
    serve.add_argument("--path-map", metavar="CLAUDE=NEOVIM", action="append", default=[],
                       help="a directory of this host (Claude's) and where Neovim has it, for "
                            "Neovim on another host or Claude in a container (repeatable; the "
                            "longest prefix wins): the lock names this process, Neovim's "
                            "environment is left alone")
    serve.add_argument("--no-linger", action="store_true",
                       help="end with Neovim, even while a Claude is connected (by default the "
                            "server outlives Neovim while Claudes need it, and the next Neovim "
                            "of the project takes it over)")
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
    claude.set_defaults(command="claude")
    claude.add_argument("--nvim", metavar="ADDR", help="Neovim's RPC address (default: $NVIM)")
    claude.set_defaults(disable=[])

    remote = sub.add_parser(
        "remote", parents=[logging_options],
        help="run Claude on another host or in a container, connected to this Neovim",
        description="Reach TARGET (over SSH, or with --via a command such as docker exec -i "
                    "box), check that Python 3 and claude are there, serve this Neovim here "
                    "with the path map and carry only the CLI's WebSocket there (a small agent "
                    "there listens on its 127.0.0.1 and writes the lock file); run claude there "
                    "in this terminal; stop it all when claude exits. The arguments after "
                    "TARGET are claude's.",
        usage="claude-nvim remote [options] TARGET [claude's options and arguments ...]")
    remote.set_defaults(command="remote")
    remote.add_argument("target", metavar="TARGET",
                        help="[user@]host[:PATH], ssh://[user@]host[:port][/PATH], "
                             "docker://CONTAINER[/PATH], podman://CONTAINER[/PATH]; with --via, "
                             "only the PATH there (PATH: where Claude works; by default the "
                             "path map takes it as Neovim's working directory)")
    remote.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    remote.add_argument("--nvim", metavar="ADDR",
                        help="Neovim's RPC address here (default: $NVIM)")
    remote.add_argument("--path-map", metavar="CLAUDE=NEOVIM", action="append", default=[],
                        help="a directory there and where Neovim has it (repeatable; default: "
                             "PATH=Neovim's working directory); Claude there reaches nothing "
                             "else")
    remote.add_argument("--serve", action="store_true",
                        help="only the server, until Neovim or the connection goes (the Neovim "
                             "plugin runs the claudes itself)")
    remote.add_argument("--claude", dest="claude_only", action="store_true",
                        help="only claude there, for a server --serve runs (the Neovim "
                             "plugin's Claude terminals)")
    remote.add_argument("--ssh", metavar="CMD", default="ssh",
                        help="the ssh command and its options (default: ssh)")
    remote.add_argument("--via", metavar="CMD",
                        help="a command that runs its arguments where Claude runs, stdin and "
                             "stdout piped (e.g. 'kubectl exec -i pod --'); TARGET is the PATH")
    remote.add_argument("--via-tty", metavar="CMD",
                        help="the same with a terminal, for claude (default: --via's)")
    remote.add_argument("--remote-python", metavar="CMD", default="python3",
                        help="Python 3 there, for the agent (default: python3, else python)")
    remote.add_argument("--remote-claude", metavar="CMD", default="claude",
                        help="claude there (default: claude)")
    _add_disable(remote)

    mcp = sub.add_parser(
        "mcp", parents=[logging_options],
        help="a stdio MCP server for `claude mcp add`, relaying to the running server",
        description="Relay MCP over stdio to the model endpoint of the claude-nvim server for "
                    "this directory (or $CLAUDE_CODE_SSE_PORT). Register it once with: "
                    "claude mcp add nvim -- claude-nvim mcp")
    mcp.set_defaults(command="relay")

    doctor = sub.add_parser(
        "doctor", parents=[logging_options],
        help="check Neovim, claude, the lock directory, plugins")
    doctor.set_defaults(command="doctor")
    which = doctor.add_mutually_exclusive_group()
    which.add_argument("--nvim", metavar="ADDR", help="Neovim's RPC address (default: $NVIM)")
    which.add_argument("--no-nvim", action="store_true",
                       help="leave Neovim out (the Neovim plugin's :checkhealth reports its own)")
    doctor.add_argument("--json", action="store_true",
                        help="the checks as JSON, for programs (the Neovim plugin's :checkhealth)")

    hold = sub.add_parser(
        "hold", parents=[logging_options],
        help="run claude in a holder that outlives this terminal, and attach to it",
        description="Run COMMAND (claude) in a pseudo-terminal held by a process of its own, "
                    "which outlives this terminal (a Neovim's), serving it on "
                    "claude-N.sock in the project's directory; relay this terminal to it. "
                    "The holder ends when COMMAND does. With --attach, attach to a running one "
                    "(its recent output replayed first).",
        usage="claude-nvim hold [-h] [--number N] [--name NAME] [--project DIR] -- COMMAND ...\n"
              "       claude-nvim hold --attach SOCK")
    hold.set_defaults(command="hold")
    hold.add_argument("--attach", metavar="SOCK", help="attach to the holder at SOCK")
    hold.add_argument("--number", type=int, default=1,
                      help="the Claude's number: claude-N.sock and claude-N.json (default 1)")
    hold.add_argument("--name", help="the user's name for this Claude (kept in its JSON)")
    hold.add_argument("--project", metavar="DIR",
                      help="the project whose directory holds it (default: this directory)")
    hold.add_argument("argv", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    tools = sub.add_parser(
        "tools", parents=[logging_options],
        help="list the tools and the plugins they come from")
    tools.set_defaults(command="tools")
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
    import logging

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
