"""``claude-nvim remote TARGET``: Claude on another host or in a container, this Neovim here.

One command: it reaches the other side (SSH, or a command such as ``docker exec -i box``),
checks that claude-nvim, Python and ``claude`` are there, lets the server there reach this
Neovim, starts ``claude-nvim serve`` there with the path map, and runs ``claude`` there through
the same connection; it stops all of it when claude exits (``--serve``: when Neovim or the
connection goes, for the Neovim plugin, which starts the claudes itself).

How Neovim is reached: over SSH, its RPC socket is forwarded as a Unix socket (``ssh -R``, of
the SSH connection this starts as a master, which claude's sessions share) in a directory of
mode 700 there, never a TCP port, which anyone there could use to run commands as you here;
through another command, Neovim's RPC goes through the server's stdin and stdout, relayed here.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import trio

from .._errors import EditorGone, leaf_errors
from .._nvim import editor_for
from .._nvim.editor import Editor, parse_address
from .._paths import PathMap
from . import fail, log
from ._remote_parts import (
    Probe,
    Target,
    TargetError,
    claude_command,
    parse_target,
    probe_script,
    quoted,
    serve_command,
    ssh_script,
)
from ._running import NO_NVIM

READY_SECONDS = 60.0
"""How long the server there may take to start (Python's start on a slow host, a first run)."""
STOP_SECONDS = 5.0
"""How long the other side has to stop the server (it removes its lock) when we are done."""

SERVED = """
local core = package.loaded['claude_nvim.core']
local info = type(core) == 'table' and core.live_server and core.live_server()
if not info then return vim.NIL end
return { port = info.port or vim.NIL, via = info.claude and info.claude.via or vim.NIL }
"""
"""This Neovim's live server (``core.live_server``): its port, and ``via`` once a remote one is
ready; nil when there is none."""


class RemoteError(Exception):
    """Why it cannot go on, for the user: one line with what to do."""


def run(args: argparse.Namespace) -> int:
    address = args.nvim or os.environ.get("NVIM")
    if not address:
        print(NO_NVIM.format(command="remote TARGET"), file=sys.stderr)
        return 2
    if parse_address(address)[0] != "socket":
        return fail(f"Neovim's address {address} is not a Unix socket: claude-nvim remote "
                    "forwards only such a socket (start Neovim with --listen /path/to/nvim.sock)")
    try:
        target = parse_target(args.target, args.via, args.via_tty)
        paths = PathMap.parse(args.path_map)
    except ValueError as exc:
        print(f"claude-nvim remote: {exc}", file=sys.stderr)
        return 2
    session = Session(target, address, paths, claude_nvim=shlex.split(args.remote_command),
                      claude=args.remote_claude, ssh=shlex.split(args.ssh),
                      serve_only=args.serve, user_args=args.rest)
    try:
        return trio.run(session.run)
    except KeyboardInterrupt:
        return 130


@dataclass
class Session:
    """One remote session: the connection, the server there, and (unless ``serve_only``) the
    claude there; :meth:`run` stops them all when it ends."""

    target: Target
    nvim_address: str
    paths: PathMap
    claude_nvim: list[str]
    claude: str
    ssh: list[str]
    serve_only: bool
    user_args: list[str]
    said: list[str] = field(default_factory=list)
    """The other side's last lines on stderr: why it failed, if it did."""
    _quiet: bool = False
    """claude has the terminal: the other side's lines go to the log only."""

    async def run(self) -> int:
        status = 1
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_stop_on_signals, nursery.cancel_scope)
                status = await self._run()
                nursery.cancel_scope.cancel()
        except* RemoteError as group:
            status = fail(str(leaf_errors(group)[0]))
        except* EditorGone as group:
            status = fail(f"{leaf_errors(group)[0]} (Neovim at {self.nvim_address})")
        return status

    async def _run(self) -> int:
        async with trio.open_nursery() as nursery:
            editor = editor_for(self.nvim_address)
            await nursery.start(editor.run)
            served = await editor.exec_lua(SERVED)
            if served:
                raise RemoteError(
                    f"this Neovim already has a claude-nvim server (port {served['port']}); "
                    "stop it first (the Neovim plugin's: :ClaudeNvim with a remote target "
                    "switches it)")
            neovim_cwd: str = await editor.exec_lua("return vim.fn.getcwd(-1, -1)")
            connect = self._ssh if self.target.is_ssh else self._exec
            status = await connect(editor, neovim_cwd)
            nursery.cancel_scope.cancel()
        return status

    # The two ways there.

    async def _ssh(self, editor: Editor, neovim_cwd: str) -> int:
        target = self.target
        assert target.ssh_host is not None
        ssh = [*self.ssh, *target.ssh_options]
        batch = ["-o", "BatchMode=yes"] if self.serve_only or not sys.stdin.isatty() else []
        with _private_directory() as local:
            control = os.path.join(local, "ssh")
            mux = [*ssh, "-S", control]
            script = ssh_script(probe_script(target.path, self.claude_nvim, self.claude))
            master_command = [*ssh, *batch, "-M", "-S", control, "-o", "ControlPersist=no",
                              "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=4",
                              target.ssh_host, quoted(["sh", "-lc", script])]
            async with trio.open_nursery() as nursery:
                master: trio.Process = await nursery.start(partial_process(
                    master_command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE))
                nursery.start_soon(self._relay_stderr, master.stderr)
                assert master.stdout is not None and master.stdin is not None
                lines = _lines(master.stdout)
                probe = await self._probe(lines, master)
                cwd = probe.said["cwd"]
                directory = await self._said(lines, "dir", master)
                socket = f"{directory}/nvim.sock"
                forward = await trio.run_process(
                    [*mux, "-O", "forward", "-R", f"{socket}:{self.nvim_address}",
                     target.ssh_host], check=False, capture_stderr=True, stdout=subprocess.DEVNULL)
                if forward.returncode != 0:
                    raise RemoteError(f"ssh could not forward Neovim's socket to {target.name} "
                                      f"({_last_line(forward.stderr)})")
                via = {"command": [*mux, "-t", target.ssh_host], "quote": True,
                       "shell": ["sh", "-lc"], "cwd": cwd, "claude": self.claude,
                       "host": target.name}
                serve = serve_command(self.claude_nvim, self._pairs(cwd, neovim_cwd), via,
                                      stdio=False)
                await master.stdin.send_all(quoted(serve).encode() + b"\n")
                status = await self._serve(editor, via, lines, master)
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await master.stdin.aclose()  # the other side stops the server, cleans up
                with trio.move_on_after(STOP_SECONDS):
                    await master.wait()
                nursery.cancel_scope.cancel()
        return status

    async def _exec(self, editor: Editor, neovim_cwd: str) -> int:
        target = self.target
        script = probe_script(target.path, self.claude_nvim, self.claude)
        try:
            done = await trio.run_process([*target.pipe, "sh", "-c", script], check=False,
                                          capture_stdout=True, capture_stderr=True)
        except OSError as exc:
            raise RemoteError(f"cannot run {shlex.join(target.pipe)}: {exc}") from exc
        probe = Probe()
        for line in done.stdout.decode(errors="replace").splitlines():
            probe.take(line)
        if not probe.done:
            raise RemoteError(f"`{shlex.join(target.pipe)} sh` did not run "
                              f"({_last_line(done.stderr) or f'exit status {done.returncode}'})")
        self._check(probe)
        cwd = probe.said["cwd"]
        via = {"command": list(target.tty), "quote": False, "shell": ["sh", "-c"], "cwd": cwd,
               "claude": self.claude, "host": target.name}
        serve = serve_command(self.claude_nvim, self._pairs(cwd, neovim_cwd), via, stdio=True)
        async with trio.open_nursery() as nursery:
            server: trio.Process = await nursery.start(partial_process(
                [*target.pipe, *serve], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE))
            nursery.start_soon(self._relay_stderr, server.stderr)
            nursery.start_soon(_relay_neovim, self.nvim_address, server)
            status = await self._serve(editor, via, None, server)
            nursery.cancel_scope.cancel()
        return status

    # What both do.

    def _pairs(self, cwd: str, neovim_cwd: str) -> list[tuple[str, str]]:
        """The path map: the user's, else the directory there as Neovim's cwd."""
        if self.paths:
            return list(self.paths.pairs)
        return [(cwd, neovim_cwd)] if self.target.path else []

    async def _probe(self, lines: AsyncIterator[str], process: trio.Process) -> Probe:
        probe = Probe()
        async for line in lines:
            if probe.take(line) and probe.done:
                self._check(probe)
                return probe
        await process.wait()
        why = self.said[-1] if self.said else f"ssh exited with status {process.returncode}"
        raise RemoteError(f"cannot reach {self.target.name}: {why}")

    def _check(self, probe: Probe) -> None:
        problems = probe.problems(self.target, self.claude_nvim, self.claude)
        if problems:
            raise RemoteError("; ".join(problems))
        if note := probe.version_note():
            print(f"claude-nvim: {note}", file=sys.stderr)

    async def _said(self, lines: AsyncIterator[str], key: str, process: trio.Process) -> str:
        probe = Probe()
        async for line in lines:
            if probe.take(line) and key in probe.said:
                return probe.said[key]
        await process.wait()
        raise RemoteError(f"{self.target.name} stopped answering "
                          f"({self.said[-1] if self.said else process.returncode})")

    async def _serve(self, editor: Editor, via: dict[str, Any],
                     lines: AsyncIterator[str] | None, process: trio.Process) -> int:
        """Wait for the server there to be ready; then run claude there (or, ``serve_only``,
        wait); the exit status."""
        async with trio.open_nursery() as nursery:
            ended = trio.Event()

            async def watch() -> None:  # the server, or the connection, ended
                if lines is not None:
                    async for line in lines:
                        if line.startswith("claude-nvim-remote exit="):
                            break
                else:
                    await process.wait()
                ended.set()

            nursery.start_soon(watch)
            published = await self._ready(editor, ended)
            log.info("the claude-nvim server on %s is ready (port %s)", self.target.name,
                     published["env"].get("CLAUDE_CODE_SSE_PORT"))
            if self.serve_only:
                await ended.wait()
                await _tell(editor, self._lost())
                raise RemoteError(self._lost())
            command = claude_command(via, published["env"], published["args"], self.user_args)
            self._quiet = True
            status = 1  # unless claude exits by itself
            with trio.open_signal_receiver(signal.SIGINT):  # claude's, through its terminal
                claude: trio.Process = await nursery.start(partial_process(command, stdin=None))
                nursery.start_soon(_cancel_when, ended, nursery.cancel_scope)
                status = await claude.wait()
            nursery.cancel_scope.cancel()
        if ended.is_set():
            await _tell(editor, self._lost())
            print(f"claude-nvim: {self._lost()}", file=sys.stderr)
        return status

    async def _ready(self, editor: Editor, ended: trio.Event) -> dict[str, Any]:
        """What the server there published for a claude, once it is ready."""
        with trio.move_on_after(READY_SECONDS):
            while not ended.is_set():
                served = await editor.exec_lua(SERVED)
                if served and served.get("via"):
                    record = await editor.exec_lua(
                        "return vim.g.claude_nvim_server.claude or vim.NIL")
                    if isinstance(record, dict):
                        return record
                await trio.sleep(0.05)
            why = next((line[len("claude-nvim: "):] for line in reversed(self.said)
                        if line.startswith("claude-nvim: ")), None)
            raise RemoteError(f"the claude-nvim server on {self.target.name} did not start"
                              + (f": {why}" if why else ""))
        raise RemoteError(f"the claude-nvim server on {self.target.name} did not start in "
                          f"{READY_SECONDS:g} s")

    def _lost(self) -> str:
        why = self.said[-1] if self.said else "it ended"
        # --serve is the plugin's: a new Claude there starts a new server.
        again = ("a new Claude (:ClaudeNvim) reconnects" if self.serve_only
                 else "run the same again to reconnect")
        return (f"the connection to {self.target.name} closed ({why}): Claude there lost "
                f"this Neovim; {again}")

    async def _relay_stderr(self, stream: trio.abc.ReceiveStream | None) -> None:
        if stream is None:
            return
        async for line in _lines(stream):
            self.said = [*self.said[-20:], line]
            log.debug("%s: %s", self.target.name, line)
            if not self._quiet and (self.serve_only or line.startswith("claude-nvim")):
                print(line, file=sys.stderr, flush=True)


TELL = """
local core = package.loaded['claude_nvim.core']
if type(core) == 'table' and core.tell then return core.tell(...) end
vim.api.nvim_echo({ { 'claude-nvim: ' .. select(1, ...), 'WarningMsg' } }, true, {})
"""


async def _tell(editor: Editor, message: str) -> None:
    """Tell the user in Neovim (core.tell: one line, no prompt), if it is still there."""
    with trio.move_on_after(2), contextlib.suppress(Exception):
        await editor.exec_lua(TELL, message, "WARN")


def partial_process(command: list[str], **options: Any) -> Any:
    """``trio.run_process`` for ``nursery.start``: the process, not checked."""
    async def start(task_status: trio.TaskStatus[trio.Process] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        await trio.run_process(command, check=False, task_status=task_status, **options)
    return start


async def _cancel_when(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


async def _relay_neovim(address: str, server: trio.Process) -> None:
    """Neovim's RPC between its socket here and the server's stdin and stdout there."""
    assert server.stdin is not None and server.stdout is not None
    to_server, from_server = server.stdin, server.stdout
    async with await trio.open_unix_socket(address) as neovim, trio.open_nursery() as nursery:

        async def pump(source: trio.abc.ReceiveStream, sink: trio.abc.SendStream) -> None:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                while data := await source.receive_some(1 << 16):
                    await sink.send_all(data)
            nursery.cancel_scope.cancel()  # one side is gone: so is the other

        nursery.start_soon(pump, neovim, to_server)
        nursery.start_soon(pump, from_server, neovim)
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await to_server.aclose()


async def _lines(stream: trio.abc.ReceiveStream) -> AsyncIterator[str]:
    buffer = b""
    while chunk := await stream.receive_some(1 << 16):
        buffer += chunk
        *whole, buffer = buffer.split(b"\n")
        for line in whole:
            yield line.decode(errors="replace").rstrip("\r")
    if buffer:
        yield buffer.decode(errors="replace")


def _last_line(data: bytes) -> str:
    lines = [line for line in data.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else ""


@contextlib.contextmanager
def _private_directory() -> Any:
    path = tempfile.mkdtemp(prefix="claude-nvim-")  # 0700: the SSH master's socket is in it
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def _stop_on_signals(scope: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as received:
        async for signum in received:
            log.info("stopping on %s", signal.Signals(signum).name)
            scope.cancel()
            return


__all__ = ["RemoteError", "Session", "TargetError", "run"]
