"""The App: one trio nursery running the Neovim session beside the WebSocket MCP server.

It claims Neovim, runs the features (:func:`built_in`, each in its folder: ``_core/``,
``_selection/``, ...) and serves the clients; what each part of that does lives in its own
module (docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import re
import secrets
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import trio

from . import __version__ as VERSION
from . import _lockfile as lockfile
from . import _mentions as mentions
from ._big_reads import BigReads
from ._bufsync import BufsyncFeature
from ._claudes import Claude, Claudes
from ._core import CommandsFeature, CoreFeature, max_file_bytes
from ._diffs import DiffRegistry, DiffsFeature
from ._errors import EditorGone, EditorTimeout, leaf_errors
from ._feature import Feature
from ._follow import FollowFeature
from ._hooks import TOOL as HOOK_TOOL
from ._hooks import Hooks, HooksFeature, settings_argument
from ._linger import GRACE, control, holders_alive
from ._lsp import LspFeature
from ._lsp.replies import Replies
from ._mcp import McpSession
from ._mentions import MentionsFeature
from ._mentions.outboxes import Outboxes
from ._nvim import lua
from ._nvim.editor import Editor, parse_address
from ._paths import PathMap
from ._review import ReviewFeature
from ._review.rewind import RewindFeature
from ._selection import SelectionFeature
from ._tool import JSON, ConnectionInfo, Exposure, Tool, ToolContext
from ._wire import hello, jsontext, websocket
from ._wire.constants import (
    CHALLENGE_HEADER,
    MAX_MESSAGE_BYTES,
    PROOF_HEADER,
    model_endpoint_config,
    proof,
)
from ._wire.early import Early
from ._wire.websocket import Connection, ConnectionClosed, Request
from ._wire.workers import Workers
from .tools._context import BuiltinContext

log = logging.getLogger(__name__)

FIRST_PUSH_DELAY = 0.5
"""Seconds after a client's first tools/list before its first notification: the CLI drops
notifications that arrive before it has registered its handlers."""
PING_INTERVAL, PONG_TIMEOUT = 30.0, 60.0
CLIENT_VERSION = dict(zip(("major", "minor", "patch"), map(int, re.findall(r"\d+", VERSION)),
                          strict=False))
"""The package version as nvim_set_client_info takes it: "0.1.0" is major 0, minor 1, patch 0."""


def built_in(*, max_file_bytes: int, on_folders: Callable[[list[str]], None],
             diff_registry: DiffRegistry, outboxes: Outboxes, replies: Replies,
             hooks: Hooks) -> list[Feature]:
    """The features the App runs, in order: core first (the others' Lua requires it)."""
    review, follow = ReviewFeature(max_file_bytes, hooks.claudes), FollowFeature(max_file_bytes)
    hooks.listeners += [review.on_hook, follow.on_hook]
    return [CoreFeature(max_file_bytes, on_folders), LspFeature(replies), SelectionFeature(),
            DiffsFeature(diff_registry), MentionsFeature(outboxes), CommandsFeature(),
            BufsyncFeature(), HooksFeature(hooks), review, RewindFeature(review), follow]


CLAUDE_FILES: dict[str, Callable[[int, str], str]] = {
    "--mcp-config": model_endpoint_config,
}
"""What a ``claude`` gets on its command line to use a server fully, by option: each a file the
server writes privately (the content from its port and token) at start and removes at stop.
The server publishes the arguments (``core.ready``); whoever starts a claude passes them."""


Advertise = Callable[[list[str], str, str], Awaitable[tuple[int, list[str], str]]]
"""Makes a server known on Claude's host (``claude-nvim remote``), given the workspace folders
in that host's paths, the token and the IDE's name: the port there, what a ``claude`` there
gets on its command line, and the host's name."""


class AlreadyServed(Exception):
    """This Neovim already has a live claude-nvim server."""

    def __init__(self, port: int | None, pid: int | None,
                 claude: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"this Neovim already has a claude-nvim server (port {port}, "
                         f"pid {pid}); use that one")
        self.port = port
        self.pid = pid
        self.claude = claude
        """What that server published for a ``claude`` (``env``, ``args``), if it is ready."""


class App:
    """claude-nvim for one Neovim: attach, listen on 127.0.0.1, advertise, serve, clean up."""

    def __init__(
        self,
        editor: Editor,
        tools: Mapping[str, Tool],
        *,
        port: int = 0,
        lock_directory: Path | None = None,
        token: str | None = None,
        handshake_timeout: float = 10.0,
        send_timeout: float = 30.0,
        mention_queue_seconds: float = mentions.QUEUE_SECONDS,
        max_file_mb: float | None = None,
        paths: PathMap | None = None,
        remote: bool = False,
        advertise: Advertise | None = None,
        keepalive: float = 15.0,
        listening: socket.socket | None = None,
        early: Sequence[Early] = (),
        claude_files: Mapping[str, Path] | None = None,
        linger: bool = False,
        linger_grace: float = GRACE,
        on_linger: Callable[[], None] = lambda: None,
    ) -> None:
        self.editor = editor
        self.listening = listening
        """A socket bound and listening already, with a lock written for it (the Neovim
        plugin's socket activation, ``serve --listen-fd``): served instead of a new one, its
        lock adopted (rewritten as ours, removed at stop)."""
        self.early = list(early)
        """The connections taken on ``listening`` before the server loaded (:mod:`._wire.early`),
        served from where they stand."""
        self.adopted_files = dict(claude_files or {})
        """:data:`CLAUDE_FILES` written already for this server (by option), used instead of new
        ones and removed at stop as ours."""
        self.paths = paths or PathMap()
        """Where Claude's paths are in Neovim and back (``serve --path-map``)."""
        self.remote = remote
        """Neovim runs on another host (or in another container) than this server and the
        Claudes it serves: its pids, terminals and environment are not this host's."""
        self.keepalive = keepalive
        """Seconds between two checks that a remote Neovim still answers (and its timeout)."""
        self.advertise = advertise
        """For Claudes on another host (``claude-nvim remote``): instead of a lock file here,
        the server is made known there; Neovim's environment is left alone, and a client's pid
        is another host's."""
        self.linger = linger
        """Outlive Neovim while a Claude needs this server (not for remote ones)."""
        self.linger_grace = linger_grace
        """Seconds a lingering server stays with no Neovim, no client and no held Claude."""
        self.on_linger = on_linger
        """Called when Neovim has gone and the server stays (``serve`` lets go of its stdio)."""
        self.project: str | None = None
        """The project a lingering server answers for: Neovim's cwd when it first attached."""
        self._connections = 0
        self._neovim_gone = False
        self._folders: list[str] = []
        self._nursery: trio.Nursery | None = None
        self.max_file_bytes = max_file_bytes(max_file_mb)
        """Tools refuse to make Neovim load larger files (default: $CLAUDE_NVIM_MAX_FILE_MB)."""
        self.handshake_timeout = handshake_timeout
        """Seconds a client has to finish the HTTP upgrade (slow or silent clients are dropped)."""
        self.send_timeout = send_timeout
        """Seconds a client may take none of what we send it: one that stops reading is
        dropped, as it would otherwise hold its answer, and the big-read slot, forever."""
        self.tools = dict(tools)
        self._tools_for = {
            endpoint: {name: t for name, t in self.tools.items() if exposure in t.exposure}
            for endpoint, exposure in (("ide", Exposure.IDE), ("model", Exposure.MODEL))
        }
        self._loggers = {name: logging.getLogger(f"claude_nvim.tools.{name}") for name in tools}
        self.requested_port = port
        self.lock_directory = lock_directory or lockfile.lock_dir()
        self.token = token or secrets.token_hex(16)
        self.diffs = DiffRegistry()
        self.big_reads = BigReads()
        self.replies = Replies()
        self.claudes = Claudes()
        """The Claudes connected to the IDE endpoint: one record each."""
        self.hooks = Hooks(self.claudes)
        self.port = 0
        self.lock_path: Path | None = None
        self.announced = False
        """Whether it wrote its lock once: from then on, Neovim going away is normal life."""
        self.environment: dict[str, str] = {}
        """What a ``claude`` needs in its environment to connect here (as set in Neovim)."""
        self.claude_args: list[str] = []
        """What a ``claude`` needs on its command line (:data:`CLAUDE_FILES`), once started."""
        self._claude_files: list[Path] = list(self.adopted_files.values())
        self._adopted_lock = (self.lock_directory / f"{listening.getsockname()[1]}.lock"
                              if listening is not None else None)
        self._lock_pid = os.getpid()
        self._connection_ids = itertools.count(1)
        self.outboxes = Outboxes(mention_queue_seconds, self._tell, self.claudes)
        self.features: list[Feature] = built_in(
            max_file_bytes=self.max_file_bytes, on_folders=self._on_folders,
            diff_registry=self.diffs, outboxes=self.outboxes, replies=self.replies,
            hooks=self.hooks)
        """What runs in Neovim and what it sends, in order (see :class:`Feature`)."""
        for feature in self.features:
            feature.paths = self.paths
            for event, handler in feature.notifications().items():
                editor.on_notification(event, handler)

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled or until Neovim goes away; ``started`` with the port.

        Raises :class:`~claude_nvim._errors.EditorGone` (in an exception group) when Neovim
        quits, and :class:`AlreadyServed` when another server holds this Neovim. With
        ``linger``, a server whose Claudes still need it outlives its Neovim, and serves the
        next Neovim of the project that asks (:meth:`_linger`).
        """
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                await self._session(task_status=task_status)
                while await self._linger():
                    pass
                raise EditorGone("Neovim went away, and no Claude needs this server")
            finally:
                await self._clean_up()
                nursery.cancel_scope.cancel()

    async def _session(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
                       ) -> None:
        """Serve the Neovim at ``editor.address`` until it goes: returns when the server may
        linger then, raises otherwise."""
        self._neovim_gone = False
        served = False
        try:
            async with trio.open_nursery() as session:
                # The editor is shielded from outside cancellation so that the cleanup below
                # can still talk to Neovim; it is cancelled last, by us.
                editor_scope = trio.CancelScope(shield=True)
                await session.start(self._run_editor, editor_scope)
                try:
                    await self._serve(session, task_status)
                    served = True
                    await trio.sleep_forever()
                finally:
                    if served and not self._neovim_gone:  # stopped: the lock goes first
                        self._remove_files()
                    # Does nothing unless this server owns Neovim: a refused one leaves the
                    # owner's alone.
                    with trio.move_on_after(1, shield=True), contextlib.suppress(Exception):
                        await self.editor.call_lua(lua.CORE, "unload", self.editor.channel_id,
                                                   timeout=1)
                    editor_scope.cancel()
        except BaseExceptionGroup as group:
            errors = leaf_errors(group)
            if not (served and self._may_linger()
                    and all(isinstance(e, EditorGone) for e in errors)):
                raise
            log.info("Neovim went away (%s)", errors[0])

    async def _run_editor(self, scope: trio.CancelScope,
                          task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with scope:
            try:
                await self.editor.run(task_status=task_status)
            except* EditorGone:
                self._neovim_gone = True
                raise

    async def _serve(self, session: trio.Nursery, task_status: trio.TaskStatus[int]) -> None:
        editor = self.editor
        modules = [m for f in self.features for m in ((f.lua,) if f.lua else ()) + f.lua_parts]
        modules += [lua.LuaModule.from_string(t.lua_module, t.lua)
                    for t in self.tools.values() if t.lua]
        holder = await editor.exec_lua(lua.CLAIM_LUA, editor.channel_id, os.getpid(),
                                       lua.install_arguments(modules))
        if holder:
            raise AlreadyServed(holder.get("port"), holder.get("pid"), holder.get("claude"))
        await editor.request("nvim_set_client_info", "claude-nvim", CLIENT_VERSION,
                             "remote", {}, {"pid": os.getpid()})
        assert self._nursery is not None
        first = self.port == 0  # the next Neovims get the same port, clients and features
        if not first:  # Claudes that outlived the last Neovim: in this one's terminals now
            await self.claudes.relocate(editor)
        for feature in self.features:
            await (feature.start(editor, self._nursery) if first else feature.reattach(editor))
        if self.remote:
            session.start_soon(self._check_neovim)
        if first:
            self.port = await self._nursery.start(partial(
                websocket.serve, self._serve_client, self.requested_port,
                max_message_size=MAX_MESSAGE_BYTES, handshake_timeout=self.handshake_timeout,
                stall_timeout=self.send_timeout, listening=self.listening, early=self.early))
            self.early.clear()
        # Claude runs here, not in Neovim's terminals: its environment is this host's.
        here = {k: os.environ.get(k, "") for k in ("no_proxy", "NO_PROXY")}
        info = await editor.call_lua(lua.CORE, "publish", self.port,
                                     here if self.remote or self.advertise else None)
        self.environment = dict(info["env"])
        if self.advertise is not None:
            await self._advertise_there(self.advertise, info["folders"])
            task_status.started(self.port)
            return
        self._lock_pid = self._choose_lock_pid(info["pid"])
        if self.project is None and info["folders"]:
            self.project = info["folders"][0]
        # In a thread: it connects to ports, and a stop must not wait for that.
        stale_locks = await trio.to_thread.run_sync(
            lockfile.remove_stale_locks, self.lock_directory, self._lock_pid,
            abandon_on_cancel=True)
        for stale in stale_locks:
            log.info("removed a stale lock file of this Neovim: %s", stale)
        if first:
            self._write_claude_files()
        self._write_lock(info["folders"])  # the lock file says "ready" to the CLI...
        # ... and this, to whoever starts a claude in Neovim.
        claude = {"env": self.environment, "args": self.claude_args}
        await editor.call_lua(lua.CORE, "ready", claude)
        if not first and self._connections:  # Claudes that outlived the last Neovim
            await self._tell_clients(True)
        log.info("listening on ws://127.0.0.1:%d, lock file %s", self.port, self.lock_path)
        task_status.started(self.port)

    def _may_linger(self) -> bool:
        """Whether a Claude needs this server now: one connected, or a held one alive."""
        if not self.linger or self.remote or self.advertise is not None or not self.project:
            return False
        if self._connections:
            return True
        with contextlib.suppress(OSError):
            return holders_alive(self.project)
        return False

    async def _linger(self) -> bool:
        """Wait with no Neovim, while Claudes need this server, for a Neovim of the project to
        ask for it; True once that one has come and gone, False when no Claude needs it."""
        if not self._may_linger() or self.project is None:
            return False
        # The lock's pid must live, or claude deletes the lock: ours, until the next Neovim.
        self._lock_pid = os.getpid()
        folders = self._folders
        self._write_lock(folders)
        for diff in self.diffs.pending():  # their tabs went with Neovim
            self.diffs.settle(diff.id, "rejected")
        self.on_linger()
        log.info("lingering for %d Claude(s) (%d connections) of %s", len(self.claudes),
                 self._connections, self.project)
        async with trio.open_nursery() as nursery, \
                control(self.project, self.port) as asked:
            idle = trio.current_time()
            while True:
                request = None
                with trio.move_on_after(1):
                    if asked is None:  # none can come (see control)
                        await trio.sleep_forever()
                    request = await asked.receive()
                if request is None:
                    if self._may_linger():
                        idle = trio.current_time()
                    elif trio.current_time() - idle >= self.linger_grace:
                        return False
                    continue
                address, answer = request
                self.editor.address = address
                try:
                    await nursery.start(self._session)
                except Exception as exc:
                    self._neovim_gone = True  # still none
                    why = str(leaf_errors(exc)[0])
                    log.warning("cannot attach to the Neovim at %s: %s", address, why)
                    await answer({"error": why})
                    continue
                log.info("attached to the Neovim at %s", address)
                await answer({"ok": True, "pid": os.getpid(), "port": self.port})
                break
        return True

    async def _check_neovim(self) -> None:
        """A remote Neovim's connection can die without closing (a laptop asleep, a network
        gone): ask it something it answers at once (``nvim_get_mode``), now and then, and give
        up on it, and remove the lock, when it does not answer."""
        while True:
            await trio.sleep(self.keepalive)
            try:
                await self.editor.request("nvim_get_mode", timeout=self.keepalive)
            except EditorTimeout as exc:
                raise EditorGone(f"Neovim did not answer in {self.keepalive:g} s: the connection "
                                 "to it is down") from exc

    async def _advertise_there(self, advertise: Advertise, folders: list[str]) -> None:
        """Made known on Claude's host: the lock there has the folders in its paths; a
        ``claude`` there connects to the port there and gets its ``--mcp-config`` there."""
        # Only mapped folders: a local path outside the map is not that host's business.
        there = self.paths.folders_to_claude(folders)
        here = [f for f in folders if self.paths.to_claude(f) is not None]
        name = lockfile.ide_name(here or [n for _, n in self.paths.pairs], self.lock_directory,
                                 self.port)
        port, args, host = await advertise(there, self.token, name)
        self.environment["CLAUDE_CODE_SSE_PORT"] = str(port)
        self.claude_args = list(args)
        if HOOK_TOOL in self._tools_for["ide"]:
            self.claude_args += ["--settings", settings_argument()]
        # `remote`: the host, for the user to see; the plugin starts claudes there itself.
        await self.editor.call_lua(lua.CORE, "ready", {
            "env": self.environment, "args": self.claude_args, "remote": host})
        log.info("listening on ws://127.0.0.1:%d for Claude on %s (port %d there)", self.port,
                 host, port)

    def _choose_lock_pid(self, nvim_pid: int) -> int:
        # A `claude` started in a :terminal of Neovim has Neovim among its ancestors, and the
        # editor's pid lives as long as the editor: use it when Neovim runs on this machine.
        # Elsewhere its pid means nothing here, and the CLI would delete a lock naming a pid
        # that is not alive on its host.
        if self.remote:
            return os.getpid()
        kind, where = parse_address(self.editor.address)
        local = kind == "socket" or where.get("address") in ("127.0.0.1", "localhost", "::1")
        return nvim_pid if local and lockfile.pid_alive(nvim_pid) else os.getpid()

    def _write_claude_files(self) -> None:
        for option, content in CLAUDE_FILES.items():
            if option in self.adopted_files:
                self.claude_args += [option, str(self.adopted_files[option])]
                continue
            # A new file of a random name (no planted file or symlink gets the token), 0600:
            # on the command line, `ps` would show the token.
            name = f"{option.strip('-')}-{self.port}-{secrets.token_hex(8)}.json"
            path = lockfile.write_private(self.lock_directory, name,
                                          content(self.port, self.token))
            self._claude_files.append(path)
            self.claude_args += [option, str(path)]
        if HOOK_TOOL in self._tools_for["ide"]:  # not when the user disabled it
            self.claude_args += ["--settings", settings_argument()]

    def _write_lock(self, folders: list[str]) -> None:
        self._folders = folders
        name = lockfile.ide_name(folders, self.lock_directory, self.port)
        content = lockfile.lock_content(self._lock_pid, self.paths.folders_to_claude(folders),
                                        self.token, name)
        self.lock_path = lockfile.write_lock(self.lock_directory, self.port, content)
        self.announced = True

    async def _clean_up(self) -> None:
        self._remove_files()
        for feature in reversed(self.features):
            feature.stop()

    def _remove_files(self) -> None:
        lock_path, self.lock_path = self.lock_path, None  # no late rewrite brings it back
        for path in (lock_path, self._adopted_lock):
            if path is not None:
                lockfile.remove_lock(path)
        for path in self._claude_files:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        self._claude_files.clear()

    async def _tell(self, message: str, level: str) -> None:
        with contextlib.suppress(Exception):
            await self.editor.call_lua(lua.CORE, "tell", message, level)

    def _on_folders(self, folders: list[str]) -> None:
        if self.lock_path is not None:
            try:
                self._write_lock(folders)
            except OSError as exc:
                log.error("cannot rewrite the lock file: %s", exc)
            log.debug("workspace folders now %s", folders)

    # WebSocket connections.

    async def _serve_client(self, request: Request) -> None:
        refusal = hello.refusal(request.headers, self.token)
        if refusal is not None:
            status, body = refusal
            challenge = dict(request.headers).get(CHALLENGE_HEADER)
            if status == 401 and challenge is not None:  # one of ours checks a lock first
                proved = ((PROOF_HEADER, proof(self.token, challenge)),)
                await request.reject(status, body=body, headers=proved)
                return
            log.warning("refused a connection: HTTP %d", status)
            await request.reject(status, body=body)
            return
        endpoint = hello.endpoint(request.path)
        ws = await request.accept(subprotocol=hello.subprotocol(request.proposed_subprotocols))
        self._connections += 1
        connection = ConnectionInfo(id=next(self._connection_ids))
        session = McpSession(connection, self._tools_for[endpoint], self._context,
                             why_gone=self._why_gone)
        if request.initialized is not None:  # answered before the server loaded
            session.initialize(request.initialized)
        log.info("client %d connected to the %s endpoint", connection.id, endpoint)
        try:
            async with trio.open_nursery() as nursery:
                if endpoint == "ide":  # the model endpoint is a plain MCP server
                    claude = self.claudes.add(connection)
                    nursery.start_soon(self._notify_client, ws, session, claude)
                nursery.start_soon(self._keep_alive, ws)
                await ws.serve(Workers(nursery, partial(self._answer, ws, session)).submit)
                nursery.cancel_scope.cancel()  # in-flight calls have nobody to answer to
        finally:
            self._connections -= 1
            log.info("client %d disconnected (%s)", connection.id, ws.closed)
            for feature in self.features:
                await feature.disconnected(self.editor, connection.id)
            self.claudes.remove(connection.id)  # the features have let go of it

    def _why_gone(self) -> str:
        """What a tool call that needed Neovim answers when Neovim is not there."""
        if self._neovim_gone and self.project is not None and self._may_linger():
            return f"Neovim is not running; reopen it in {self.project}"
        return "Neovim went away"

    def _context(self, tool: Tool, connection: ConnectionInfo) -> ToolContext:
        editor: Editor = self.editor
        return BuiltinContext(tool=tool, editor=editor, connection=connection,
                              log=self._loggers[tool.name], big_reads=self.big_reads,
                              paths=self.paths, diffs=self.diffs,
                              replies=self.replies, hooks=self.hooks)

    async def _answer(self, ws: Connection, session: McpSession, message: str | bytes,
                      scope: trio.CancelScope) -> None:
        with self.big_reads.answering(ws) as answer:
            reply = await session.handle(message, scope)
            if reply is not None:
                # Holding the big-read slot, it had room before the read: it must not wait now.
                await self._send(ws, reply, wait=not answer.holds_slot)

    async def _send(self, ws: Connection, message: JSON, *, wait: bool = True) -> bool:
        """Send one message; ``False`` when the connection is gone (normal life) or dropped."""
        try:
            await ws.send(jsontext.dumps(message), wait=wait)
        except ConnectionClosed:
            return False
        return True

    async def _notify_client(self, ws: Connection, session: McpSession, claude: Claude) -> None:
        """Send a client its notifications once it listens: each feature's, and the outbox's."""
        await session.tools_listed.wait()
        await trio.sleep(FIRST_PUSH_DELAY)
        send = partial(self._send, ws)
        await self.claudes.identify(claude, self.editor, ws.stream.socket,
                                    local=not self.remote and self.advertise is None)
        try:
            with self.outboxes.open(claude) as inbox:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._tell_clients, True)
                    for feature in self.features:
                        nursery.start_soon(feature.push, send)
                    async for message in inbox:
                        if not await send(message):
                            break
                    nursery.cancel_scope.cancel()
        finally:  # mostly reached by cancellation: the client went away
            with trio.CancelScope(shield=True):
                await self._tell_clients(False)

    async def _tell_clients(self, connected: bool) -> None:
        """Tell Neovim how many Claudes listen now (statuslines, User autocmds)."""
        with trio.move_on_after(2), contextlib.suppress(Exception):
            await self.editor.call_lua(lua.CORE, "clients", len(self.outboxes), connected,
                                       timeout=2)

    async def _keep_alive(self, ws: Connection) -> None:
        while True:
            await trio.sleep(PING_INTERVAL)
            try:
                with trio.move_on_after(PONG_TIMEOUT) as waiting:
                    await ws.ping()
            except ConnectionClosed:
                return
            if waiting.cancelled_caught:
                log.info("closing a connection that did not answer a ping in %g s", PONG_TIMEOUT)
                await ws.aclose(1011, "ping timeout")
                return

