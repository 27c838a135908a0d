"""The bridge to Neovim: what the server and tools need from it, and the client that provides it.

:class:`SocketEditor` speaks msgpack-RPC to Neovim's socket straight from trio: one reader
task, one writer task that sends whatever has queued up in one write, and no thread. The
architecture doc measured such a client at about half the latency and five times the
concurrent throughput of pynvim behind a thread. pynvim (:mod:`claude_nvim.pynvim_editor`)
is kept for what trio cannot open: Windows named pipes.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import logging
import math
import os
import re
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import msgpack
import trio

from .tool import ToolError

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 5.0
"""Seconds a non-interactive call may wait: Neovim defers requests while it waits for input."""

CALL_LUA = """
local name, fn = ...
local m = package.loaded[name]
if m == nil then error('claude-nvim: Lua module ' .. name .. ' is not installed', 0) end
return m[fn](select(3, ...))
"""


class EditorGone(Exception):
    """Neovim closed the RPC connection (it quit, crashed, or was never reachable)."""


class EditorError(ToolError):
    """Neovim answered a request with an error (a Lua error, a bad API call)."""


class EditorTimeout(ToolError):
    """Neovim did not answer in time: it is busy or waiting for the user's input."""


NotificationCallback = Callable[[list[Any]], None]
MAX_IN_FLIGHT = 4
"""Requests we let wait in Neovim's queue at once."""
QUEUE_TIMEOUT = 60.0
"""Seconds a request may wait for its turn (behind MAX_IN_FLIGHT others) before it fails."""
BIG_READS = trio.Semaphore(1)
"""The one slot for reads of megabytes (a whole big selection, every diagnostic); see
:func:`big_read`."""
_HELD_UNTIL_SENT: contextvars.ContextVar[list[trio.Semaphore] | None] = contextvars.ContextVar(
    "claude_nvim_held_until_sent", default=None)


@contextlib.asynccontextmanager
async def big_read() -> AsyncIterator[None]:
    """Take the one big-read slot, so that big answers are read and sent one at a time and
    never pile up in memory (64 concurrent 11 MB answers once peaked at 1.4 GB).

    Inside :func:`answering` the slot is kept until the answer has been sent, and taking it
    again there is free.
    """
    held = _HELD_UNTIL_SENT.get()
    if held is not None and BIG_READS in held:
        yield
        return
    await BIG_READS.acquire()
    try:
        yield
    finally:
        if held is None:
            BIG_READS.release()
        else:
            held.append(BIG_READS)


@contextlib.asynccontextmanager
async def answering() -> AsyncIterator[None]:
    """The handling of one request and the sending of its answer: slots that :func:`big_read`
    takes inside are released at its end."""
    held: list[trio.Semaphore] = []
    token = _HELD_UNTIL_SENT.set(held)
    try:
        yield
    finally:
        _HELD_UNTIL_SENT.reset(token)
        for slot in held:
            slot.release()
USE_DEFAULT = -1.0
"""A ``timeout`` argument meaning: the editor's own default."""


class Editor(Protocol):
    """What the server and the tools need from Neovim; every method runs on trio."""

    address: str
    """Neovim's RPC address: a socket path, named pipe or host:port."""

    @property
    def channel_id(self) -> int: ...

    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...

    async def request(self, method: str, *args: Any, timeout: float | None = ...) -> Any: ...

    async def exec_lua(self, code: str, *args: Any, timeout: float | None = ...) -> Any: ...

    async def call_lua(self, module: str, fn: str, *args: Any,
                       timeout: float | None = ...) -> Any: ...

    def call_lua_soon(self, module: str, fn: str, *args: Any) -> None: ...

    def on_notification(self, event: str, callback: NotificationCallback) -> None: ...


def editor_for(address: str, *, timeout: float = DEFAULT_TIMEOUT,
               max_in_flight: int = MAX_IN_FLIGHT) -> Editor:
    """The editor client for a Neovim RPC address (socket path, named pipe or host:port)."""
    if sys.platform == "win32" and parse_address(address)[0] == "socket":
        from .pynvim_editor import PynvimEditor  # named pipes: trio has no client for them
        return PynvimEditor(address, timeout=timeout, max_in_flight=max_in_flight)
    return SocketEditor(address, timeout=timeout, max_in_flight=max_in_flight)


def parse_address(address: str) -> tuple[str, dict[str, Any]]:
    """``("tcp", {address, port})`` or ``("socket", {path})`` for a Neovim RPC address."""
    match = re.fullmatch(r"\[?([\w.:-]+?)\]?:(\d+)", address)
    if match and not os.path.exists(address):
        return "tcp", {"address": match[1], "port": int(match[2])}
    return "socket", {"path": address}


class EditorBase:
    """The parts every client shares: notification handlers, the in-flight limit, timeouts."""

    def __init__(self, address: str, *, timeout: float = DEFAULT_TIMEOUT,
                 max_in_flight: int = MAX_IN_FLIGHT) -> None:
        self.address = address
        self.timeout = timeout
        # Neovim runs queued RPC requests back to back, ahead of the user's keys: keep the
        # queue short so a keystroke never waits behind a pile of our requests.
        self._slots = trio.Semaphore(max_in_flight)
        self._handlers: dict[str, NotificationCallback] = {}
        self._channel_id = 0

    @property
    def channel_id(self) -> int:
        """Neovim's id for our RPC channel, for ``vim.rpcnotify`` from Lua."""
        return self._channel_id

    def on_notification(self, event: str, callback: NotificationCallback) -> None:
        """Run ``callback(args)`` on trio for each ``vim.rpcnotify(chan, event, ...)``."""
        self._handlers[event] = callback

    def _notified(self, name: str, args: list[Any]) -> None:
        handler = self._handlers.get(name)
        if handler is None:
            log.debug("unhandled Neovim notification %s", name)
            return
        try:
            handler(args)
        except Exception:
            log.exception("handling Neovim notification %s failed", name)

    async def _roundtrip(self, method: str, args: list[Any]) -> Any:
        """Send one request and wait for its answer (no limits: :meth:`request` adds them)."""
        raise NotImplementedError

    def _send_notification(self, method: str, args: list[Any]) -> None:
        raise NotImplementedError

    async def request(self, method: str, *args: Any, timeout: float | None = USE_DEFAULT) -> Any:
        """Make one Neovim API request; ``timeout=None`` waits as long as it takes."""
        limit = self.timeout if timeout == USE_DEFAULT else timeout
        try:
            try:
                self._slots.acquire_nowait()
            except trio.WouldBlock:
                # Our own queue is not Neovim's fault: its wait has a limit of its own.
                with trio.fail_after(QUEUE_TIMEOUT if limit is not None else math.inf):
                    await self._slots.acquire()
            try:
                with trio.fail_after(limit if limit is not None else math.inf):
                    return await self._roundtrip(method, list(args))
            finally:
                self._slots.release()
        except trio.TooSlowError:
            raise EditorTimeout(
                f"Neovim did not answer within {limit:g} s "
                "(it may be waiting for input: a prompt, a pending operator, or a long command)"
            ) from None

    async def exec_lua(self, code: str, *args: Any, timeout: float | None = USE_DEFAULT) -> Any:
        """Run a Lua chunk in Neovim with ``...`` = ``args``; returns its value."""
        return await self.request("nvim_exec_lua", code, list(args), timeout=timeout)

    async def call_lua(self, module: str, fn: str, *args: Any,
                       timeout: float | None = USE_DEFAULT) -> Any:
        """Call ``package.loaded[module][fn](*args)`` in Neovim: one round trip."""
        return await self.exec_lua(CALL_LUA, module, fn, *args, timeout=timeout)

    def call_lua_soon(self, module: str, fn: str, *args: Any) -> None:
        """Like :meth:`call_lua`, without waiting: sent as an RPC notification (no answer).

        Neovim reports a failure only in its own log; use it where nobody needs the result.
        """
        self._send_notification("nvim_exec_lua", [CALL_LUA, [module, fn, *args]])


def error_text(message: object) -> str:
    """The useful part of a Neovim error message."""
    text = str(message)
    # Lua errors arrive as "Error executing lua: <where>: message\nstack traceback: ...".
    text = text.split("\nstack traceback:", 1)[0]
    return re.sub(r"^Error executing lua:\s*", "", text).strip()


REQUEST, RESPONSE, NOTIFICATION = 0, 1, 2
"""msgpack-RPC message types."""
RECEIVE_BYTES = 256 * 1024


class SocketEditor(EditorBase):
    """An :class:`Editor` speaking msgpack-RPC to a Neovim unix socket or TCP address."""

    def __init__(self, address: str, *, timeout: float = DEFAULT_TIMEOUT,
                 max_in_flight: int = MAX_IN_FLIGHT) -> None:
        super().__init__(address, timeout=timeout, max_in_flight=max_in_flight)
        # Neovim sends every Lua string as msgpack str, valid UTF-8 or not (file names, buffer
        # bytes): surrogateescape carries such bytes through to Python and back unchanged.
        self._packer = msgpack.Packer(unicode_errors="surrogateescape")
        self._pending: dict[int, Callable[[BaseException | None, Any], None]] = {}
        self._ids = itertools.count(1)
        self._outgoing: list[bytes] = []
        self._wake_writer = trio.Event()
        self._attached = False

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Attach, then serve requests until cancelled or until Neovim goes away.

        Raises :class:`EditorGone` when Neovim closes the connection.
        """
        try:
            stream = await _connect(self.address)
        except OSError as exc:
            raise EditorGone(f"cannot reach Neovim at {self.address}: {exc}") from exc
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read, stream)
                nursery.start_soon(self._write, stream)
                self._attached = True
                self._channel_id = (await self._roundtrip("nvim_get_api_info", []))[0]
                task_status.started()
        finally:
            self._attached = False
            for finish in list(self._pending.values()):
                finish(EditorGone("Neovim went away"), None)
            self._pending.clear()
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _read(self, stream: trio.abc.ReceiveStream) -> None:
        unpacker = msgpack.Unpacker(unicode_errors="surrogateescape", ext_hook=_handle_from_ext,
                                    max_buffer_size=0)
        while True:
            try:
                data = await stream.receive_some(RECEIVE_BYTES)
            except (trio.BrokenResourceError, OSError) as exc:
                raise EditorGone(f"Neovim connection failed: {exc}") from exc
            if not data:
                raise EditorGone("Neovim closed the connection")
            unpacker.feed(data)
            for message in unpacker:
                self._received(message)

    async def _write(self, stream: trio.abc.SendStream) -> None:
        # One writer that sends everything queued since its last write in one go: much
        # faster under load than each task sending under a lock (architecture doc, 2).
        while True:
            await self._wake_writer.wait()
            self._wake_writer = trio.Event()
            batch, self._outgoing = self._outgoing, []
            try:
                await stream.send_all(b"".join(batch))
            except (trio.BrokenResourceError, OSError) as exc:
                raise EditorGone(f"Neovim connection failed: {exc}") from exc

    def _send(self, message: list[Any]) -> None:
        self._outgoing.append(self._packer.pack(message))
        self._wake_writer.set()

    def _received(self, message: Any) -> None:
        if not isinstance(message, list) or not message:
            log.debug("malformed message from Neovim: %r", message)
        elif message[0] == RESPONSE and len(message) == 4:
            finish = self._pending.pop(message[1], None)
            if finish is not None:  # else: its caller timed out or was cancelled
                error = message[2]
                if error is not None:
                    text = error[1] if isinstance(error, list) and len(error) > 1 else error
                    finish(EditorError(error_text(text)), None)
                else:
                    finish(None, message[3])
        elif message[0] == NOTIFICATION and len(message) == 3:
            self._notified(message[1], message[2])
        elif message[0] == REQUEST and len(message) == 4:
            refusal = f"claude-nvim takes no RPC requests (got {message[2]!r})"
            self._send([RESPONSE, message[1], refusal, None])
        else:
            log.debug("malformed message from Neovim: %r", message)

    async def _roundtrip(self, method: str, args: list[Any]) -> Any:
        if not self._attached:
            raise EditorGone("Neovim is not attached")
        msgid = next(self._ids) & 0xFFFFFFFF  # msgpack-RPC ids are 32-bit
        done = trio.Event()
        outcome: list[Any] = []

        def finish(error: BaseException | None, result: Any) -> None:
            outcome[:] = [error, result]
            done.set()

        self._send([REQUEST, msgid, method, args])  # may raise: arguments msgpack cannot carry
        self._pending[msgid] = finish
        try:
            await done.wait()
        finally:
            self._pending.pop(msgid, None)
        error, result = outcome
        if error is not None:
            raise error
        return result

    def _send_notification(self, method: str, args: list[Any]) -> None:
        if self._attached:
            self._send([NOTIFICATION, method, args])


async def _connect(address: str) -> trio.abc.Stream:
    kind, where = parse_address(address)
    if kind == "tcp":
        return await trio.open_tcp_stream(where["address"], where["port"])  # sets TCP_NODELAY
    return await trio.open_unix_socket(where["path"])


def _handle_from_ext(code: int, data: bytes) -> Any:
    # Buffer, Window and Tabpage handles are msgpack ext types holding an integer; the rest of
    # claude-nvim passes handles as plain integers, which Neovim accepts everywhere.
    return msgpack.unpackb(data)
