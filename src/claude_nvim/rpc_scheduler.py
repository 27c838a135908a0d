"""The bridge to Neovim: what the server and tools need from it, and the client that provides it.

:class:`SocketEditor` speaks msgpack-RPC to Neovim's socket straight from trio: one reader
task, one writer task that sends whatever has queued up in one write, and no thread. The
first measurements put such a client at about half the latency and five times the
concurrent throughput of pynvim behind a thread. pynvim (:mod:`claude_nvim.pynvim_editor`)
is kept for what trio cannot open: Windows named pipes.
"""

from __future__ import annotations

import collections
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
import outcome
import trio

from .tool import ToolError
from .websocket import send_all

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


def leaf_errors(error: BaseException) -> list[BaseException]:
    """The exceptions inside ``error``'s (nested) groups, in order: what trio's tasks raised."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaf_errors(inner)]
    return [error]


class EditorError(ToolError):
    """Neovim answered a request with an error (a Lua error, a bad API call)."""


class EditorTimeout(ToolError):
    """Neovim did not answer in time: it is busy or waiting for the user's input."""


NotificationCallback = Callable[[list[Any]], None]
MAX_IN_FLIGHT = 16
"""The most requests we let wait in Neovim's queue at once; fewer when they are slow."""
FREEZE_BUDGET = 0.025
"""Seconds of Neovim work we queue at once, by each request's recent cost. Neovim runs queued
RPC requests back to back, ahead of the user's keys: this is how long a keystroke may wait."""
QUEUE_TIMEOUT = 60.0
"""Seconds a request may wait for its turn (behind the requests in Neovim's queue) before it
fails."""
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


class answering:
    """The handling of one request and the sending of its answer (``with answering():``):
    slots that :func:`big_read` takes inside are released at its end."""

    __slots__ = ("_held", "_token")

    def __enter__(self) -> None:
        self._held: list[trio.Semaphore] = []
        self._token = _HELD_UNTIL_SENT.set(self._held)

    def __exit__(self, *exc_info: object) -> None:
        _HELD_UNTIL_SENT.reset(self._token)
        for slot in self._held:
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


class _Call:
    """One request: waiting for a slot, then in Neovim's queue, then settled."""

    __slots__ = ("cost", "deadline", "done", "kind", "limit", "message", "msgid", "sent",
                 "task")

    def __init__(self, message: Any, limit: float | None, kind: object) -> None:
        self.message = message
        self.limit = limit
        self.kind = kind  # what it runs in Neovim, for its cost
        self.cost = 0.0  # the time in Neovim it was expected to take when sent
        self.sent = 0.0
        self.task: trio.lowlevel.Task = trio.lowlevel.current_task()
        self.msgid: int | None = None  # set when sent
        self.deadline = math.inf
        self.done = False


class EditorBase:
    """The parts every client shares: notification handlers, the in-flight limit, timeouts.

    A request costs no cancel scope and no task switch of its own: it parks its task, a slot
    freed by an answer sends the next queued request from the reader, and one watchdog task
    fails what passed its deadline (its scope's deadline is moved, it is not woken per call).
    Subclasses send with :meth:`_send_call` and report answers to :meth:`_answered`.
    """

    def __init__(self, address: str, *, timeout: float = DEFAULT_TIMEOUT,
                 max_in_flight: int = MAX_IN_FLIGHT) -> None:
        self.address = address
        self.timeout = timeout
        self._max_in_flight = max_in_flight
        self._in_flight: dict[int, _Call] = {}
        self._in_flight_cost = 0.0
        self._costs: dict[object, float] = {}
        """Per kind of request, a moving average of its time in Neovim."""
        self._last_answer = 0.0
        self._waiting: collections.deque[_Call] = collections.deque()
        self._ids = itertools.count(1)
        self._deadlines: dict[float, collections.deque[tuple[float, _Call]]] = {}
        """Per timeout length, calls in the order they started, so in deadline order."""
        self._timer = trio.CancelScope()
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

    # What a client provides.

    def _attached(self) -> bool:
        raise NotImplementedError

    def _prepare(self, method: str, args: list[Any]) -> Any:
        """The request as the client will send it; raises for arguments it cannot carry."""
        raise NotImplementedError

    def _send_call(self, msgid: int, message: Any) -> None:
        """Send a prepared request; its answer goes to :meth:`_answered`."""
        raise NotImplementedError

    def _send_notification(self, method: str, args: list[Any]) -> None:
        raise NotImplementedError

    # Requests.

    async def request(self, method: str, *args: Any, timeout: float | None = USE_DEFAULT) -> Any:
        """Make one Neovim API request; ``timeout=None`` waits as long as it takes."""
        return await self._request(method, list(args), timeout, method)

    async def _request(self, method: str, args: list[Any], timeout: float | None,
                       kind: object) -> Any:
        if not self._attached():
            raise EditorGone("Neovim is not attached")
        call = _Call(self._prepare(method, args),
                     self.timeout if timeout == USE_DEFAULT else timeout, kind)
        if not self._waiting and self._has_room(call):
            self._launch(call)
        else:
            # Our own queue is not Neovim's fault: its wait has a limit of its own.
            self._waiting.append(call)
            if call.limit is not None:
                self._watch(call, QUEUE_TIMEOUT, trio.current_time())

        def abort(_: Any) -> trio.lowlevel.Abort:  # cancelled: the answer, if any, is dropped
            self._settle(call, None)
            return trio.lowlevel.Abort.SUCCEEDED

        return await trio.lowlevel.wait_task_rescheduled(abort)

    def _cost(self, call: _Call) -> float:
        # A kind not seen yet goes alone: it may be slow.
        return self._costs.get(call.kind, FREEZE_BUDGET)

    def _has_room(self, call: _Call) -> bool:
        """Whether Neovim's queue of our requests stays within FREEZE_BUDGET with ``call``."""
        return not self._in_flight or (len(self._in_flight) < self._max_in_flight and
                                       self._in_flight_cost + self._cost(call) <= FREEZE_BUDGET)

    def _launch(self, call: _Call) -> None:
        msgid = call.msgid = next(self._ids) & 0xFFFFFFFF  # msgpack-RPC ids are 32-bit
        self._in_flight[msgid] = call
        call.cost = self._cost(call)
        self._in_flight_cost += call.cost
        call.sent = trio.current_time()
        if call.limit is not None:
            self._watch(call, call.limit, call.sent)
        self._send_call(msgid, call.message)

    def _answered(self, msgid: int, error: BaseException | None, result: Any) -> None:
        call = self._in_flight.get(msgid)
        if call is not None:  # else its caller timed out or was cancelled
            # Neovim works on one request at a time, in order: this one from when it arrived
            # or the one before was answered, whichever came later.
            now = trio.current_time()
            took = now - max(call.sent, self._last_answer)
            self._last_answer = now
            self._costs[call.kind] = (self._costs.get(call.kind, took) + took) / 2
            self._settle(call, outcome.Error(error) if error is not None
                         else outcome.Value(result))

    def _settle(self, call: _Call, result: outcome.Outcome[Any] | None) -> None:
        """End a call: wake its task with ``result`` (``None``: it was cancelled), free its
        slot, and send the next queued call."""
        if call.done:
            return
        call.done = True
        call.message = None
        if call.msgid is not None:
            del self._in_flight[call.msgid]
            self._in_flight_cost = self._in_flight_cost - call.cost if self._in_flight else 0.0
        if result is not None:
            trio.lowlevel.reschedule(call.task, result)
        for deadlines in self._deadlines.values():  # calls end in order: usually O(1)
            while deadlines and _stale(*deadlines[0]):
                deadlines.popleft()
        while self._waiting and (self._waiting[0].done or self._has_room(self._waiting[0])):
            waiting = self._waiting.popleft()
            if not waiting.done:
                self._launch(waiting)

    def _fail_all(self, error: BaseException) -> None:
        for call in [*self._in_flight.values(), *self._waiting]:
            self._settle(call, outcome.Error(error))

    # Deadlines.

    def _watch(self, call: _Call, seconds: float, now: float) -> None:
        call.deadline = now + seconds
        self._deadlines.setdefault(seconds, collections.deque()).append((call.deadline, call))
        if call.deadline < self._timer.deadline:
            self._timer.deadline = call.deadline

    async def _expire_calls(self) -> None:
        """Fail the calls whose deadline passed. Asleep until the earliest deadline, and with
        no deadline when nothing waits: no wake-ups per call, none when idle."""
        while True:
            now = trio.current_time()
            earliest = math.inf
            for deadlines in self._deadlines.values():
                while deadlines:
                    deadline, call = deadlines[0]
                    if _stale(deadline, call):
                        deadlines.popleft()
                    elif deadline <= now:
                        deadlines.popleft()
                        self._settle(call, outcome.Error(self._timeout_error(call)))
                    else:
                        earliest = min(earliest, deadline)
                        break
            self._timer = trio.CancelScope(deadline=earliest)
            with self._timer:
                await trio.sleep_forever()

    def _timeout_error(self, call: _Call) -> EditorTimeout:
        if call.msgid is None:
            return EditorTimeout(f"claude-nvim's requests to Neovim did not move for "
                                 f"{QUEUE_TIMEOUT:g} s (Neovim is busy with earlier ones)")
        return EditorTimeout(
            f"Neovim did not answer within {call.limit:g} s "
            "(it may be waiting for input: a prompt, a pending operator, or a long command)")

    async def exec_lua(self, code: str, *args: Any, timeout: float | None = USE_DEFAULT) -> Any:
        """Run a Lua chunk in Neovim with ``...`` = ``args``; returns its value."""
        return await self._request("nvim_exec_lua", [code, list(args)], timeout,
                                   "nvim_exec_lua")

    async def call_lua(self, module: str, fn: str, *args: Any,
                       timeout: float | None = USE_DEFAULT) -> Any:
        """Call ``package.loaded[module][fn](*args)`` in Neovim: one round trip."""
        return await self._request("nvim_exec_lua", [CALL_LUA, [module, fn, *args]], timeout,
                                   (module, fn))

    def call_lua_soon(self, module: str, fn: str, *args: Any) -> None:
        """Like :meth:`call_lua`, without waiting: sent as an RPC notification (no answer).

        Neovim reports a failure only in its own log; use it where nobody needs the result.
        """
        self._send_notification("nvim_exec_lua", [CALL_LUA, [module, fn, *args]])


def _stale(deadline: float, call: _Call) -> bool:
    """Whether a deadline no longer matters: its call was settled, or it was sent and has the
    deadline of its answer now."""
    return call.done or call.deadline != deadline


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
        self._outgoing: list[bytes] = []
        self._wake_writer = trio.Event()
        self._connected = False

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
                # The socket itself: the stream's wrappers cost 2-4 µs a call.
                nursery.start_soon(self._read, stream.socket)
                nursery.start_soon(self._write, stream.socket)
                nursery.start_soon(self._expire_calls)
                self._connected = True
                self._channel_id = (await self.request("nvim_get_api_info"))[0]
                task_status.started()
        finally:
            self._connected = False
            self._fail_all(EditorGone("Neovim went away"))
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _read(self, socket: trio.socket.SocketType) -> None:
        unpacker = msgpack.Unpacker(unicode_errors="surrogateescape", ext_hook=_handle_from_ext,
                                    max_buffer_size=0)
        while True:
            try:
                data = await socket.recv(RECEIVE_BYTES)
            except OSError as exc:
                raise EditorGone(f"Neovim connection failed: {exc}") from exc
            if not data:
                raise EditorGone("Neovim closed the connection")
            unpacker.feed(data)
            for message in unpacker:
                self._received(message)

    async def _write(self, socket: trio.socket.SocketType) -> None:
        # One writer that sends everything queued since its last write in one go: much
        # faster under load than each task sending under a lock (measured).
        while True:
            await self._wake_writer.wait()
            self._wake_writer = trio.Event()
            batch, self._outgoing = self._outgoing, []
            data = b"".join(batch)
            del batch
            try:
                await send_all(socket, data)
            except OSError as exc:
                raise EditorGone(f"Neovim connection failed: {exc}") from exc
            # Free a big request now, not when the next small one wakes us: unmapping
            # megabytes takes milliseconds, which that request would wait.
            del data

    def _send(self, data: bytes) -> None:
        self._outgoing.append(data)
        self._wake_writer.set()

    def _received(self, message: Any) -> None:
        if not isinstance(message, list) or not message:
            log.debug("malformed message from Neovim: %r", message)
        elif message[0] == RESPONSE and len(message) == 4:
            error = message[2]
            if error is not None:
                text = error[1] if isinstance(error, list) and len(error) > 1 else error
                self._answered(message[1], EditorError(error_text(text)), None)
            else:
                self._answered(message[1], None, message[3])
        elif message[0] == NOTIFICATION and len(message) == 3:
            self._notified(message[1], message[2])
        elif message[0] == REQUEST and len(message) == 4:
            refusal = f"claude-nvim takes no RPC requests (got {message[2]!r})"
            self._send(self._packer.pack([RESPONSE, message[1], refusal, None]))
        else:
            log.debug("malformed message from Neovim: %r", message)

    def _attached(self) -> bool:
        return self._connected

    def _prepare(self, method: str, args: list[Any]) -> bytes:
        # The request's last two fields; the id comes when it is sent.
        packed: bytes = self._packer.pack(method) + self._packer.pack(args)
        return packed

    def _send_call(self, msgid: int, message: bytes) -> None:
        self._send(b"\x94\x00" + self._packer.pack(msgid) + message)  # [REQUEST, msgid, ...]

    def _send_notification(self, method: str, args: list[Any]) -> None:
        if self._connected:
            self._send(self._packer.pack([NOTIFICATION, method, args]))


async def _connect(address: str) -> trio.SocketStream:
    kind, where = parse_address(address)
    if kind == "tcp":
        return await trio.open_tcp_stream(where["address"], where["port"])  # sets TCP_NODELAY
    return await trio.open_unix_socket(where["path"])


def _handle_from_ext(code: int, data: bytes) -> Any:
    # Buffer, Window and Tabpage handles are msgpack ext types holding an integer; the rest of
    # claude-nvim passes handles as plain integers, which Neovim accepts everywhere.
    return msgpack.unpackb(data)
