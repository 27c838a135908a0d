"""``claude-nvim remote TARGET``: Claude on another host or in a container, this Neovim here.

The server that speaks to Neovim runs here, in this process, with the path map; only the CLI's
WebSocket bytes cross. One command reaches the other side (``ssh -T -- host``, or
``docker exec -i box``), checks that a Python 3 and ``claude`` are there, and runs there a
small agent (``far_agent.py``, standard library only, sent as source): it listens on that
host's 127.0.0.1, writes the lock file there, and carries each connection's bytes over its
stdin and stdout in frames that this side reads with strict bounds (:class:`Frames`). Nothing
there gets more than a token-checked WebSocket, to a server that touches only the mapped
folders; nothing it says is run here. Then (unless ``--serve``, the plugin's, which starts
the claudes itself) ``claude`` runs there in this terminal; it all stops when claude exits.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import trio

from .._app import AlreadyServed, App
from .._errors import EditorGone, leaf_errors
from .._lockfile import lock_content
from .._nvim import editor_for
from .._paths import PathMap
from . import fail, log
from ._remote_parts import (
    CLAUDE_ENV,
    MAX_LINE,
    MAX_PREAMBLE,
    Frame,
    Frames,
    Probe,
    ProtocolError,
    Ready,
    Target,
    TargetError,
    agent_command,
    claude_command,
    frame,
    parse_ready,
    parse_target,
    printable,
)
from ._running import NO_NVIM, tools_to_serve

READY_SECONDS = 60.0
"""How long the other side may take to answer (a slow login, a first run)."""
KEEPALIVE = float(os.environ.get("CLAUDE_NVIM_KEEPALIVE") or 15)
"""Seconds between two frames to the agent (tests make it short); it ends after three
without one."""
STOP_SECONDS = 5.0
"""How long the agent there has to remove its lock when we are done."""


class RemoteError(Exception):
    """Why it cannot go on, for the user: one line with what to do."""


def run(args: argparse.Namespace) -> int:
    try:
        target = parse_target(args.target, args.via, args.via_tty)
        paths = PathMap.parse(args.path_map)
    except ValueError as exc:
        print(f"claude-nvim remote: {exc}", file=sys.stderr)
        return 2
    ssh = shlex.split(args.ssh)
    if args.claude_only:  # the plugin's Claude terminals: claude there, through the target
        env = {k: os.environ[k] for k in CLAUDE_ENV if k in os.environ}
        command = claude_command(target, ssh, args.remote_claude, env, args.rest)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            return fail(f"cannot run {command[0]}: {exc.strerror}")
    address = args.nvim or os.environ.get("NVIM")
    if not address:
        print(NO_NVIM.format(command="remote TARGET"), file=sys.stderr)
        return 2
    loaded = tools_to_serve(args)
    if loaded is None:
        return 1
    session = Session(target, address, paths, tools=dict(loaded.tools), python=args.remote_python,
                      claude=args.remote_claude, ssh=ssh, serve_only=args.serve,
                      user_args=args.rest)
    try:
        return trio.run(session.run)
    except KeyboardInterrupt:
        return 130


@dataclass
class Session:
    """One remote session: the agent there, the server here, and (unless ``serve_only``) the
    claude there; :meth:`run` stops them all when it ends."""

    target: Target
    nvim_address: str
    paths: PathMap
    tools: dict[str, Any]
    python: str
    claude: str
    ssh: list[str]
    serve_only: bool
    user_args: list[str]
    said: list[str] = field(default_factory=list)
    """The other side's last lines on stderr: why it failed, if it did."""
    _quiet: bool = False
    """claude has the terminal: the other side's lines go to the log only."""
    _app: App | None = None

    async def run(self) -> int:
        status = 1
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_stop_on_signals, nursery.cancel_scope)
                status = await self._run()
                nursery.cancel_scope.cancel()
        except* RemoteError as group:
            status = fail(str(leaf_errors(group)[0]))
        except* AlreadyServed as group:
            served = leaf_errors(group)[0]
            port = served.port if isinstance(served, AlreadyServed) else None
            status = fail(f"this Neovim already has a claude-nvim server (port {port}); stop "
                          "it first (the Neovim plugin's: :ClaudeNvim with a remote "
                          "target switches it)")
        except* EditorGone as group:
            status = fail(f"{leaf_errors(group)[0]} (Neovim at {self.nvim_address})")
        return status

    async def _run(self) -> int:
        command = agent_command(self.target, self.ssh, self.python, self.claude)
        async with trio.open_nursery() as nursery:
            try:
                agent: trio.Process = await nursery.start(partial_process(
                    command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE))
            except OSError as exc:
                raise RemoteError(f"cannot run {command[0]}: {exc.strerror}") from exc
            nursery.start_soon(self._relay_stderr, agent.stderr)
            assert agent.stdout is not None and agent.stdin is not None
            reader = _Reader(agent.stdout)
            with trio.move_on_after(READY_SECONDS) as waited:
                probe = await self._probe(reader, agent)
            if waited.cancelled_caught:
                raise RemoteError(f"{self.target.name} did not answer in {READY_SECONDS:g} s")
            cwd = probe.said.get("cwd", "")
            if not cwd.startswith("/"):
                raise RemoteError(f"{self.target.name} said its directory is {cwd!r}, not an "
                                  "absolute path")
            link = _Link(self, agent, reader)
            status = await link.run(await self._paths(cwd))
            nursery.cancel_scope.cancel()
        return status

    async def _paths(self, cwd: str) -> PathMap:
        """The path map: the user's, else the directory there as Neovim's cwd. Never empty:
        a Claude there reaches only what it maps."""
        if self.paths:
            return self.paths
        async with trio.open_nursery() as nursery:
            editor = editor_for(self.nvim_address)
            await nursery.start(editor.run)
            neovim_cwd: str = await editor.exec_lua("return vim.fn.getcwd(-1, -1)")
            nursery.cancel_scope.cancel()
        return PathMap(((cwd, neovim_cwd),))

    async def _probe(self, reader: _Reader, process: trio.Process) -> Probe:
        probe = Probe()
        while (line := await reader.line()) is not None:
            if probe.take(line) and probe.done:
                problems = probe.problems(self.target, self.python, self.claude)
                if problems:
                    raise RemoteError("; ".join(problems))
                if "agent" not in probe.said:
                    break
                return probe
        await process.wait()
        why = self.said[-1] if self.said else f"exit status {process.returncode}"
        raise RemoteError(f"cannot reach {self.target.name}: {why}")

    def lost(self, why: str | None = None) -> str:
        why = why or (self.said[-1] if self.said else "it ended")
        # --serve is the plugin's: a new Claude there starts a new server.
        again = ("a new Claude (:ClaudeNvim) reconnects" if self.serve_only
                 else "run the same again to reconnect")
        return (f"the connection to {self.target.name} closed ({why}): Claude there lost "
                f"this Neovim; {again}")

    async def _relay_stderr(self, stream: trio.abc.ReceiveStream | None) -> None:
        if stream is None:
            return
        async for line in _lines(stream):
            line = printable(line[:MAX_LINE])  # for a terminal and Neovim: no escapes
            self.said = [*self.said[-20:], line]
            log.debug("%s: %s", self.target.name, line)
            if not self._quiet and (self.serve_only or line.startswith("claude-nvim")):
                print(line, file=sys.stderr, flush=True)


@dataclass
class _Link:
    """The server here and the agent there: the agent's connections are this server's."""

    session: Session
    agent: trio.Process
    reader: _Reader
    frames: Frames = field(default_factory=Frames)
    ready: trio.Event = field(default_factory=trio.Event)
    there: Ready | None = None
    sending: trio.Lock = field(default_factory=trio.Lock)
    sockets: dict[int, trio.SocketStream] = field(default_factory=dict)
    app: App | None = None

    async def run(self, paths: PathMap) -> int:
        session = self.session
        app = App(editor_for(session.nvim_address), session.tools, paths=paths,
                  advertise=self._advertise)
        self.app = app
        status = 1
        async with trio.open_nursery() as nursery:
            ended = trio.Event()
            nursery.start_soon(self._carry, nursery, ended)
            await nursery.start(app.run)
            nursery.start_soon(self._keep_alive)  # after L: the agent's first frame
            log.info("the claude-nvim server here is ready for Claude on %s (port %s there)",
                     session.target.name, app.environment.get("CLAUDE_CODE_SSE_PORT"))
            if session.serve_only:
                await ended.wait()
            else:
                status = await self._claude(app, ended)
            nursery.cancel_scope.cancel()  # the server stops: Neovim is free again
        if ended.is_set():  # then the user hears of it, and may start another at once
            await _tell(session.nvim_address, session.lost(self.broken))
            print(f"claude-nvim: {session.lost(self.broken)}", file=sys.stderr)
            status = 1 if session.serve_only else status
        await self._stop()
        return status

    broken: str | None = None
    """Why the agent's frames were refused, when they were."""

    async def _advertise(self, folders: list[str], token: str, name: str
                         ) -> tuple[int, list[str], str]:
        lock = lock_content(0, folders, token, name)
        await self._send(frame(b"L", 0, _json({"lock": lock, "keepalive": KEEPALIVE})))
        with trio.move_on_after(READY_SECONDS):
            await self.ready.wait()
        if self.there is None:
            raise RemoteError(f"the agent on {self.session.target.name} did not start"
                              + (f": {self.broken}" if self.broken else ""))
        return self.there.port, ["--mcp-config", self.there.mcp_config], self.session.target.name

    async def _carry(self, nursery: trio.Nursery, ended: trio.Event) -> None:
        """The agent's frames, until it ends or breaks the protocol."""
        try:
            while data := await self.reader.receive_some():
                for got in self.frames.feed(data):
                    await self._take(got, nursery)
        except ProtocolError as exc:
            self.broken = f"its agent broke the protocol: {exc}"
            log.warning("%s: %s", self.session.target.name, self.broken)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        ended.set()
        if not self.ready.is_set():
            self.ready.set()  # _advertise says why

    async def _keep_alive(self) -> None:
        """Now and then a frame: the agent ends when none comes (this side asleep, gone)."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while True:
                await trio.sleep(KEEPALIVE)
                await self._send(frame(b"P", 0))

    async def _take(self, got: Frame, nursery: trio.Nursery) -> None:
        if got.kind == b"R":
            self.there = parse_ready(got.data)
            self.ready.set()
        elif got.kind == b"O":
            assert self.app is not None  # and listening: the agent is ready after that
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", self.app.port)
            except OSError:
                await self._close(got.number)
                return
            self.sockets[got.number] = stream
            nursery.start_soon(self._from_server, got.number, stream)
        elif got.kind == b"D":
            open_stream = self.sockets.get(got.number)
            if open_stream is not None:
                try:
                    await open_stream.send_all(got.data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    await self._close(got.number)
        elif got.kind == b"C":
            closed = self.sockets.pop(got.number, None)
            if closed is not None:
                await closed.aclose()

    async def _from_server(self, number: int, stream: trio.SocketStream) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while data := await stream.receive_some(1 << 16):
                await self._send(frame(b"D", number, data))
        await self._close(number)

    async def _close(self, number: int) -> None:
        self.frames.open.discard(number)
        stream = self.sockets.pop(number, None)
        if stream is not None:
            await stream.aclose()
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self._send(frame(b"C", number))

    async def _send(self, data: bytes) -> None:
        assert self.agent.stdin is not None
        async with self.sending:
            await self.agent.stdin.send_all(data)

    async def _claude(self, app: App, ended: trio.Event) -> int:
        """claude there, in this terminal, until it exits (or the connection ends)."""
        session = self.session
        command = claude_command(session.target, session.ssh, session.claude, app.environment,
                                 [*app.claude_args, *session.user_args])
        session._quiet = True
        status = 1  # unless claude exits by itself
        async with trio.open_nursery() as nursery:
            with trio.open_signal_receiver(signal.SIGINT):  # claude's, through its terminal
                claude: trio.Process = await nursery.start(partial_process(command, stdin=None))
                nursery.start_soon(_cancel_when, ended, nursery.cancel_scope)
                status = await claude.wait()
            nursery.cancel_scope.cancel()
        return status

    async def _stop(self) -> None:
        """Close the agent's stdin: it removes its files there and exits."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            assert self.agent.stdin is not None
            await self.agent.stdin.aclose()
        with trio.move_on_after(STOP_SECONDS):
            await self.agent.wait()


class _Reader:
    """The agent's stdout: first lines (the probe's, a profile's), bounded, then bytes."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.buffer = b""
        self.taken = 0

    async def line(self) -> str | None:
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_LINE or self.taken > MAX_PREAMBLE:
                raise RemoteError("the other side says too much before it starts")
            chunk = bytes(await self.stream.receive_some(1 << 16))
            if not chunk:
                return None
            self.taken += len(chunk)
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode(errors="replace").rstrip("\r")

    async def receive_some(self) -> bytes:
        if self.buffer:
            data, self.buffer = self.buffer, b""
            return data
        return bytes(await self.stream.receive_some(1 << 16))


TELL = """
local core = package.loaded['claude_nvim.core']
if type(core) == 'table' and core.tell then return core.tell(...) end
vim.api.nvim_echo({ { 'claude-nvim: ' .. select(1, ...), 'WarningMsg' } }, true, {})
"""


async def _tell(address: str, message: str) -> None:
    """Tell the user in Neovim (one line, no prompt), if it is still there."""
    with trio.move_on_after(2), contextlib.suppress(Exception):
        async with trio.open_nursery() as nursery:
            editor = editor_for(address)
            await nursery.start(editor.run)
            await editor.exec_lua(TELL, message, "WARN")
            nursery.cancel_scope.cancel()


def partial_process(command: list[str], **options: Any) -> Any:
    """``trio.run_process`` for ``nursery.start``: the process, not checked."""
    async def start(task_status: trio.TaskStatus[trio.Process] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        await trio.run_process(command, check=False, task_status=task_status, **options)
    return start


async def _cancel_when(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


async def _lines(stream: trio.abc.ReceiveStream) -> AsyncIterator[str]:
    buffer = b""
    while chunk := await stream.receive_some(1 << 16):
        buffer += chunk
        *whole, buffer = buffer.split(b"\n")
        for line in whole:
            yield line.decode(errors="replace").rstrip("\r")
        buffer = buffer[-MAX_LINE:]
    if buffer:
        yield buffer.decode(errors="replace")


def _json(value: Any) -> bytes:
    import json
    return json.dumps(value, separators=(",", ":")).encode()


async def _stop_on_signals(scope: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as received:
        async for signum in received:
            log.info("stopping on %s", signal.Signals(signum).name)
            scope.cancel()
            return


__all__ = ["RemoteError", "Session", "TargetError", "run"]
