"""The request scheduling both Neovim clients share: :class:`EditorBase`.

A client (:mod:`.socket`, :mod:`.pipe`) only sends and
receives; this decides when a request goes out (the in-flight limit and the freeze budget, so
the user's keys never wait long behind ours) and fails what waits too long.
"""

from __future__ import annotations

import abc
import collections
import itertools
import logging
import math
from typing import Any

import outcome
import trio

from .._errors import EditorGone, EditorTimeout
from .editor import DEFAULT_TIMEOUT, USE_DEFAULT, NotificationCallback

log = logging.getLogger(__name__)

CALL_LUA = """
local name, fn = ...
local m = package.loaded[name]
if m == nil then error('claude-nvim: Lua module ' .. name .. ' is not installed', 0) end
return m[fn](select(3, ...))
"""
MAX_IN_FLIGHT = 16
"""The most requests we let wait in Neovim's queue at once; fewer when they are slow."""
FREEZE_BUDGET = 0.025
"""Seconds of Neovim work we queue at once, by each request's recent cost. Neovim runs queued
RPC requests back to back, ahead of the user's keys: this is how long a keystroke may wait."""
QUEUE_TIMEOUT = 60.0
"""Seconds a request may wait for its turn (behind the requests in Neovim's queue) before it
fails."""


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


class EditorBase(abc.ABC):
    """The parts every client shares: notification handlers, the in-flight limit, timeouts.

    A request costs no cancel scope and no task switch of its own: it parks its task, a slot
    freed by an answer sends the next queued request from the reader, and one watchdog task
    fails what passed its deadline (its scope's deadline is moved, it is not woken per call).
    Subclasses send with :meth:`_send_call` and report answers to :meth:`_answered`.
    """

    def __init__(self, address: str, *, timeout: float = DEFAULT_TIMEOUT,
                 max_in_flight: int = MAX_IN_FLIGHT, queue_timeout: float = QUEUE_TIMEOUT
                 ) -> None:
        self.address = address
        self.timeout = timeout
        self.queue_timeout = queue_timeout
        """Seconds a request may wait for its turn before it fails (:data:`QUEUE_TIMEOUT`)."""
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

    @abc.abstractmethod
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """Attach, then serve requests until cancelled or until Neovim goes away.

        Raises :class:`~claude_nvim._errors.EditorGone` when Neovim closes the connection.
        """

    @abc.abstractmethod
    def _attached(self) -> bool:
        """Whether requests can be sent now."""

    @abc.abstractmethod
    def _prepare(self, method: str, args: list[Any]) -> Any:
        """The request as the client will send it; raises for arguments it cannot carry."""

    @abc.abstractmethod
    def _send_call(self, msgid: int, message: Any) -> None:
        """Send a prepared request; its answer goes to :meth:`_answered`."""

    @abc.abstractmethod
    def _send_notification(self, method: str, args: list[Any]) -> None:
        """Send an RPC notification (no answer); dropped when not attached."""

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
                self._watch(call, self.queue_timeout, trio.current_time())

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
            expired = []
            for deadlines in self._deadlines.values():
                while deadlines:
                    deadline, call = deadlines[0]
                    if _stale(deadline, call):
                        deadlines.popleft()
                    elif deadline <= now:
                        deadlines.popleft()
                        expired.append(call)
                    else:
                        earliest = min(earliest, deadline)
                        break
            self._timer = trio.CancelScope(deadline=earliest)
            # After the loop: settling frees a slot, and the call launched into it is watched
            # (a new kind of deadline, perhaps) by the new timer.
            for call in expired:
                self._settle(call, outcome.Error(self._timeout_error(call)))
            with self._timer:
                await trio.sleep_forever()

    def _timeout_error(self, call: _Call) -> EditorTimeout:
        if call.msgid is None:
            return EditorTimeout(f"claude-nvim's requests to Neovim did not move for "
                                 f"{self.queue_timeout:g} s (Neovim is busy with earlier ones)")
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
