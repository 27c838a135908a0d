"""The App: one trio nursery running the Neovim session beside the WebSocket MCP server."""

from __future__ import annotations

import contextlib
import hmac
import itertools
import logging
import os
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import outcome
import trio

from . import __version__ as VERSION
from . import bufsync, diffs, jsontext, lockfile, lua_util, mentions, protocol, selection, websocket
from .big_reads import BigReads
from .editor import Editor, parse_address
from .mcp import McpSession, notification
from .protocol import AUTH_HEADER, MAX_MESSAGE_BYTES, MODEL_PATH
from .tool import JSON, ConnectionInfo, Exposure, Tool, ToolContext
from .websocket import Connection, ConnectionClosed, Request

log = logging.getLogger(__name__)

FIRST_PUSH_DELAY = 0.5
"""Seconds after a client's first tools/list before its first notification: the CLI drops
notifications that arrive before it has registered its handlers."""
PING_INTERVAL, PONG_TIMEOUT = 30.0, 60.0
CLIENT_VERSION = dict(zip(("major", "minor", "patch"), map(int, re.findall(r"\d+", VERSION)),
                          strict=False))
"""The package version as nvim_set_client_info takes it: "0.1.0" is major 0, minor 1, patch 0."""


class AlreadyServed(Exception):
    """This Neovim already has a live claude-nvim server."""

    def __init__(self, port: int | None, pid: int | None) -> None:
        super().__init__(f"this Neovim already has a claude-nvim server (port {port}, "
                         f"pid {pid}); use that one")
        self.port = port
        self.pid = pid


# Lua's level names and vim.log.levels numbers (TRACE = 0 ... ERROR = 4), syslog's names,
# and no level at all.
LUA_LOG_LEVELS: dict[str | int | None, int] = {
    "trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
    "notice": logging.INFO, "warn": logging.WARNING, "warning": logging.WARNING,
    "error": logging.ERROR, "critical": logging.CRITICAL, "fatal": logging.CRITICAL,
    0: logging.DEBUG, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR,
    None: logging.ERROR,
}


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
    ) -> None:
        self.editor = editor
        self.max_file_bytes = lua_util.max_file_bytes(max_file_mb)
        """Tools refuse to make Neovim load larger files (default: $CLAUDE_NVIM_MAX_FILE_MB)."""
        self.handshake_timeout = handshake_timeout
        """Seconds a client has to finish the HTTP upgrade (slow or silent clients are dropped)."""
        self.send_timeout = send_timeout
        """Seconds a client may take none of what we send it: one that stops reading is
        dropped, as it would otherwise hold its answer, and the big-read slot, forever."""
        self.mention_queue_seconds = mention_queue_seconds
        """Seconds @-mentions sent with no client ready wait for one before they are dropped."""
        self.tools = dict(tools)
        self._tools_for = {
            endpoint: {name: t for name, t in self.tools.items() if exposure in t.exposure}
            for endpoint, exposure in (("ide", Exposure.IDE), ("model", Exposure.MODEL))
        }
        self._loggers = {name: logging.getLogger(f"claude_nvim.tools.{name}") for name in tools}
        self.requested_port = port
        self.lock_directory = lock_directory or lockfile.lock_dir()
        self.token = token or secrets.token_hex(16)
        self.selection = selection.SelectionTracker()
        self.diffs = diffs.DiffRegistry()
        self.big_reads = BigReads()
        self.port = 0
        self.lock_path: Path | None = None
        self.environment: dict[str, str] = {}
        """What a ``claude`` needs in its environment to connect here (as set in Neovim)."""
        self._lock_pid = os.getpid()
        self._connection_ids = itertools.count(1)
        self._outboxes: dict[int, trio.MemorySendChannel[JSON]] = {}
        """Notification queues of the clients that are ready to receive them."""
        self._queued_mentions: list[JSON] = []
        self._nursery: trio.Nursery | None = None
        editor.on_notification(selection.NOTIFICATION, self._on_selection)
        editor.on_notification(diffs.NOTIFICATION, self._on_diff)
        editor.on_notification(mentions.NOTIFICATION, self._on_mention)
        editor.on_notification("claude_nvim_folders", self._on_folders)
        editor.on_notification("claude_nvim_log", self._on_lua_log)

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled or until Neovim goes away; ``started`` with the port.

        Raises :class:`~claude_nvim.errors.EditorGone` (in an exception group) when Neovim
        quits, and :class:`AlreadyServed` when another server holds this Neovim.
        """
        async with trio.open_nursery() as nursery:
            # The session is shielded from outside cancellation so that the cleanup below can
            # still talk to Neovim; it is cancelled last, by us.
            editor_scope = trio.CancelScope(shield=True)
            await nursery.start(self._run_editor, editor_scope)
            try:
                await self._serve(task_status)
            finally:
                await self._clean_up()
                editor_scope.cancel()

    async def _run_editor(self, scope: trio.CancelScope,
                          task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with scope:
            await self.editor.run(task_status=task_status)

    async def _serve(self, task_status: trio.TaskStatus[int]) -> None:
        editor = self.editor
        holder = await editor.exec_lua(lua_util.CLAIM_LUA, editor.channel_id, os.getpid())
        if holder:
            raise AlreadyServed(holder.get("port"), holder.get("pid"))
        modules = [[lua_util.MODULE, lua_util.LUA], [selection.MODULE, selection.LUA],
                   [diffs.MODULE, diffs.LUA], [mentions.MODULE, mentions.LUA],
                   [bufsync.MODULE, bufsync.LUA, bufsync.CHUNKNAME]]
        modules += [[t.lua_module, t.lua] for t in self.tools.values() if t.lua]
        await editor.exec_lua(lua_util.INSTALL_LUA, modules)
        await editor.request("nvim_set_client_info", "claude-nvim", CLIENT_VERSION,
                             "remote", {}, {"pid": os.getpid()})
        await editor.call_lua(lua_util.MODULE, "start", editor.channel_id, self.max_file_bytes,
                              [module[0] for module in modules])
        await editor.call_lua(selection.MODULE, "start")
        await editor.call_lua(bufsync.MODULE, "setup", {})
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            port = await nursery.start(partial(
                websocket.serve, self._serve_client, self.requested_port,
                max_message_size=MAX_MESSAGE_BYTES, handshake_timeout=self.handshake_timeout,
                stall_timeout=self.send_timeout))
            self.port = port
            info = await editor.call_lua(lua_util.MODULE, "publish", self.port)
            self.environment = dict(info["env"])
            self._lock_pid = self._choose_lock_pid(info["pid"])
            # In a thread: it connects to ports, and a stop must not wait for that.
            stale_locks = await trio.to_thread.run_sync(
                lockfile.remove_stale_locks, self.lock_directory, self._lock_pid,
                abandon_on_cancel=True)
            for stale in stale_locks:
                log.info("removed a stale lock file of this Neovim: %s", stale)
            self._write_lock(info["folders"])  # last: the lock file says "ready"
            log.info("listening on ws://127.0.0.1:%d, lock file %s", self.port, self.lock_path)
            task_status.started(self.port)

    def _choose_lock_pid(self, nvim_pid: int) -> int:
        # A `claude` started in a :terminal of Neovim has Neovim among its ancestors, and the
        # editor's pid lives as long as the editor: use it when Neovim runs on this machine.
        kind, where = parse_address(self.editor.address)
        local = kind == "socket" or where.get("address") in ("127.0.0.1", "localhost", "::1")
        return nvim_pid if local and lockfile.pid_alive(nvim_pid) else os.getpid()

    def _write_lock(self, folders: list[str]) -> None:
        content = lockfile.lock_content(self._lock_pid, folders, self.token)
        self.lock_path = lockfile.write_lock(self.lock_directory, self.port, content)

    async def _clean_up(self) -> None:
        lock_path, self.lock_path = self.lock_path, None  # no late rewrite brings it back
        if lock_path is not None:
            lockfile.remove_lock(lock_path)
        # Does nothing unless this server owns Neovim: a refused one leaves the owner's alone.
        with trio.move_on_after(1, shield=True), contextlib.suppress(Exception):
            await self.editor.call_lua(lua_util.MODULE, "unload", self.editor.channel_id,
                                       timeout=1)

    # Notifications from Neovim's Lua.

    def _on_selection(self, args: list[Any]) -> None:
        if args and isinstance(args[0], dict):
            self.selection.update(args[0])

    def _on_diff(self, args: list[Any]) -> None:
        diff_id, status, result = [*args, None, None, None][:3]
        if isinstance(diff_id, int) and status in ("accepted", "rejected"):
            self.diffs.settle(diff_id, status, result)

    def _on_mention(self, args: list[Any]) -> None:
        if not args or not isinstance(args[0], dict):
            return
        message = notification("at_mentioned", args[0])
        if self._outboxes:
            self._broadcast(message)
            return
        self._queued_mentions.append(message)
        if self._nursery is not None and len(self._queued_mentions) == 1:
            self._nursery.start_soon(self._expire_mentions)

    def _broadcast(self, message: JSON) -> None:
        for outbox in self._outboxes.values():
            with contextlib.suppress(trio.WouldBlock):  # a stuck client misses it
                outbox.send_nowait(message)

    async def _expire_mentions(self) -> None:
        await self._tell("no Claude is connected yet: the mention is sent when one connects")
        await trio.sleep(self.mention_queue_seconds)
        if self._queued_mentions:
            count = len(self._queued_mentions)
            self._queued_mentions.clear()
            await self._tell(f"no Claude connected within {self.mention_queue_seconds:g} s: "
                             f"{count} mention(s) dropped; start claude and send again", "WARN")

    async def _tell(self, message: str, level: str = "INFO") -> None:
        with contextlib.suppress(Exception):
            await self.editor.call_lua(lua_util.MODULE, "tell", message, level)

    def _on_folders(self, args: list[Any]) -> None:
        if self.lock_path is not None and args and isinstance(args[0], list):
            try:
                self._write_lock([str(f) for f in args[0]])
            except OSError as exc:
                log.error("cannot rewrite the lock file: %s", exc)
            log.debug("workspace folders now %s", args[0])

    def _on_lua_log(self, args: list[Any]) -> None:
        level, message = [*args, None, ""][:2]
        key = level.lower() if isinstance(level, str) else level if isinstance(level, int) else None
        number = LUA_LOG_LEVELS.get(key)
        if number is None:  # a level nobody knows: the message still gets through
            log.warning("Neovim: %s (level %r)", message, level)
        else:
            log.log(number, "Neovim: %s", message)

    # WebSocket connections.

    def _refusal(self, request: Request) -> tuple[int, bytes] | None:
        token = None
        for name, value in request.headers:
            lowered = name.lower()
            if lowered == b"origin":
                # Browsers always send Origin; the CLI never does. No web page gets in.
                return 403, b"Forbidden: browser requests are not accepted"
            if lowered == AUTH_HEADER:
                token = value
        if token is None or not hmac.compare_digest(token, self.token.encode()):
            return 401, b"Unauthorized"
        return None

    async def _serve_client(self, request: Request) -> None:
        refusal = self._refusal(request)
        if refusal is not None:
            status, body = refusal
            challenge = dict(request.headers).get(protocol.CHALLENGE_HEADER)
            if status == 401 and challenge is not None:  # one of ours checks a lock first
                proved = ((protocol.PROOF_HEADER, protocol.proof(self.token, challenge)),)
                await request.reject(status, body=body, headers=proved)
                return
            log.warning("refused a connection: HTTP %d", status)
            await request.reject(status, body=body)
            return
        endpoint = "model" if request.path.split("?")[0].rstrip("/") == MODEL_PATH else "ide"
        subprotocol = "mcp" if "mcp" in request.proposed_subprotocols else None
        ws = await request.accept(subprotocol=subprotocol)
        connection = ConnectionInfo(id=next(self._connection_ids))
        session = McpSession(connection, self._tools_for[endpoint], self._context)
        log.info("client %d connected to the %s endpoint", connection.id, endpoint)
        try:
            async with trio.open_nursery() as nursery:
                if endpoint == "ide":  # the model endpoint is a plain MCP server
                    nursery.start_soon(self._notify_client, ws, session)
                nursery.start_soon(self._keep_alive, ws)
                await ws.serve(_Workers(nursery, partial(self._answer, ws, session)).submit)
                nursery.cancel_scope.cancel()  # in-flight calls have nobody to answer to
        finally:
            log.info("client %d disconnected (%s)", connection.id, ws.closed)
            await self._close_diffs_of(connection)

    async def _close_diffs_of(self, connection: ConnectionInfo) -> None:
        # Pending diffs were rejected and closed when their calls were cancelled; accepted
        # ones still wait for a close_tab that will never come.
        for diff in self.diffs.owned_by(connection.id):
            self.diffs.forget(diff.id)
            with trio.move_on_after(2, shield=True), contextlib.suppress(Exception):
                # reload: the CLI may have written an accepted file just before it went.
                await self.editor.call_lua(diffs.MODULE, "close", diff.id, True, timeout=2)

    def _context(self, tool: Tool, connection: ConnectionInfo) -> ToolContext:
        editor: Editor = self.editor
        return ToolContext(tool, editor, self.diffs, connection, self._loggers[tool.name],
                           self.big_reads)

    async def _answer(self, ws: Connection, session: McpSession, message: str | bytes,
                      scope: trio.CancelScope) -> None:
        with self.big_reads.answering():
            reply = await session.handle(message, scope)
            if reply is not None:
                await self._send(ws, reply)

    async def _send(self, ws: Connection, message: JSON) -> bool:
        """Send one message; ``False`` when the connection is gone (normal life) or dropped."""
        try:
            await ws.send(jsontext.dumps(message))
        except ConnectionClosed:
            return False
        return True

    async def _notify_client(self, ws: Connection, session: McpSession) -> None:
        """Send a client its notifications once it listens: the selection, then @-mentions."""
        await session.tools_listed.wait()
        await trio.sleep(FIRST_PUSH_DELAY)
        outbox, inbox = trio.open_memory_channel[JSON](64)
        connection_id = session.connection.id
        self._outboxes[connection_id] = outbox
        try:
            for message in self._queued_mentions:
                with contextlib.suppress(trio.WouldBlock):
                    outbox.send_nowait(message)
            self._queued_mentions.clear()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._push_selection, ws)
                async for message in inbox:
                    if not await self._send(ws, message):
                        break
                nursery.cancel_scope.cancel()
        finally:
            del self._outboxes[connection_id]

    async def _push_selection(self, ws: Connection) -> None:
        version = 0
        while True:
            version, payload = await self.selection.wait_newer(version)
            if not await self._send(ws, notification("selection_changed", payload)):
                return

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


MAX_IN_FLIGHT = 64
"""Messages of one connection being answered at once; beyond, its reading waits."""
MAX_IN_FLIGHT_BYTES = 2 * MAX_MESSAGE_BYTES
"""The same for the size of those messages (each is held until it is answered)."""


class _Workers:
    """The tasks that answer one connection's messages, one at a time each, and are reused:
    a task and a cancel scope of its own per message took a quarter of a small call's CPU.

    A worker's cancel scope is its current call's: ``notifications/cancelled`` cancels it, and
    the worker ends with its call; a new one takes the next message.

    At most ``MAX_IN_FLIGHT`` messages (``MAX_IN_FLIGHT_BYTES``) are in the works: then
    :meth:`submit` returns an event, set when there is room again, for the connection to wait
    for before it reads more. A client that pipelines thousands of requests and reads none of
    the answers gets backpressure, not thousands of tasks holding their answers.
    """

    def __init__(self, nursery: trio.Nursery,
                 answer: Callable[[str | bytes, trio.CancelScope], Awaitable[None]]) -> None:
        self._nursery = nursery
        self._answer = answer
        self._idle: dict[trio.lowlevel.Task, None] = {}  # a dict: removing one is O(1)
        self._busy = 0
        self._bytes = 0
        self._room: trio.Event | None = None

    def submit(self, message: str | bytes) -> trio.Event | None:
        self._busy += 1
        self._bytes += len(message)
        if self._idle:
            trio.lowlevel.reschedule(self._idle.popitem()[0], outcome.Value(message))
        else:
            self._nursery.start_soon(self._work, message)
        if self._busy < MAX_IN_FLIGHT and self._bytes < MAX_IN_FLIGHT_BYTES:
            return None
        self._room = trio.Event()
        return self._room

    async def _work(self, message: str | bytes) -> None:
        task = trio.lowlevel.current_task()

        def abort(_: object) -> trio.lowlevel.Abort:  # cancelled while idle
            del self._idle[task]
            return trio.lowlevel.Abort.SUCCEEDED

        with trio.CancelScope() as scope:
            while True:
                size = len(message)
                try:
                    await self._answer(message, scope)
                finally:
                    self._done(size)
                del message  # it may be megabytes
                self._idle[task] = None
                message = await trio.lowlevel.wait_task_rescheduled(abort)

    def _done(self, size: int) -> None:
        self._busy -= 1
        self._bytes -= size
        if self._room is not None and self._busy < MAX_IN_FLIGHT \
                and self._bytes < MAX_IN_FLIGHT_BYTES:
            self._room.set()
            self._room = None
