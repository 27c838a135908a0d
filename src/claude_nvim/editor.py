"""The bridge to Neovim. This is the only module that imports pynvim.

pynvim runs on one dedicated thread inside ``nvim.run_loop``; every request runs there in a
greenlet, hopped in with ``loop.call_soon_threadsafe`` and answered back with
``TrioToken.run_sync_soon``. Only plain data (no pynvim objects) crosses the threads. The
architecture doc measured this at ~0.18 ms per call, about half of pynvim's own ``async_call``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import re
from collections.abc import Callable
from typing import Any, Protocol

import greenlet
import pynvim
import trio

from .tool import ToolError

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 5.0
"""Seconds a non-interactive call may wait: Neovim defers requests while it waits for input."""

_CALL_LUA = """
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
"""Held by reads that go on in slices (a whole big selection, every diagnostic): one at a
time, so that their megabytes are not all held in memory at once."""
USE_DEFAULT = -1.0
"""A ``timeout`` argument meaning: the editor's own default."""


class Editor(Protocol):
    """What the server and the tools need from Neovim; every method runs on trio."""

    @property
    def channel_id(self) -> int: ...

    async def request(self, method: str, *args: Any, timeout: float | None = ...) -> Any: ...

    async def exec_lua(self, code: str, *args: Any, timeout: float | None = ...) -> Any: ...

    async def call_lua(self, module: str, fn: str, *args: Any,
                       timeout: float | None = ...) -> Any: ...

    def call_lua_soon(self, module: str, fn: str, *args: Any) -> None: ...

    def on_notification(self, event: str, callback: NotificationCallback) -> None: ...


def parse_address(address: str) -> tuple[str, dict[str, Any]]:
    """pynvim ``attach`` arguments for a Neovim RPC address: a socket path, pipe or host:port."""
    match = re.fullmatch(r"\[?([\w.:-]+?)\]?:(\d+)", address)
    if match and not os.path.exists(address):
        return "tcp", {"address": match[1], "port": int(match[2])}
    return "socket", {"path": address}


class PynvimEditor:
    """An :class:`Editor` attached to a running Neovim through pynvim."""

    def __init__(self, address: str, *, timeout: float = DEFAULT_TIMEOUT,
                 max_in_flight: int = MAX_IN_FLIGHT) -> None:
        self.address = address
        self.timeout = timeout
        # Neovim runs queued RPC requests back to back, ahead of the user's keys: keep the
        # queue short so a keystroke never waits behind a pile of our requests.
        self._slots = trio.Semaphore(max_in_flight)
        self._handlers: dict[str, NotificationCallback] = {}
        self._nvim: Any = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._channel_id = 0
        self._pending: dict[int, Callable[[tuple[bool, Any]], None]] = {}
        self._ids = itertools.count()
        self._gone = False
        self._stopping = False

    @property
    def channel_id(self) -> int:
        """Neovim's id for our RPC channel, for ``vim.rpcnotify`` from Lua."""
        return self._channel_id

    def on_notification(self, event: str, callback: NotificationCallback) -> None:
        """Run ``callback(args)`` on trio for each ``vim.rpcnotify(chan, event, ...)``."""
        self._handlers[event] = callback

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Attach, then serve requests until cancelled or until Neovim goes away.

        Raises :class:`EditorGone` when Neovim closes the connection.
        """
        self._token = trio.lowlevel.current_trio_token()
        attached = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._own_thread, attached)
            await attached.wait()
            nursery.start_soon(self._stop_loop_when_cancelled)
            task_status.started()

    async def _own_thread(self, attached: trio.Event) -> None:
        try:
            await trio.to_thread.run_sync(self._thread_main, attached)
        finally:
            self._gone = True
            for finish in list(self._pending.values()):
                finish((False, EditorGone("Neovim went away")))
            self._pending.clear()
        if not self._stopping:
            raise EditorGone("Neovim closed the connection")

    async def _stop_loop_when_cancelled(self) -> None:
        try:
            await trio.sleep_forever()
        finally:
            self._stopping = True
            self._hop(self._nvim.stop_loop)

    def _thread_main(self, attached: trio.Event) -> None:
        kind, kwargs = parse_address(self.address)
        try:
            nvim = pynvim.attach(kind, **kwargs)
        except OSError as exc:
            raise EditorGone(f"cannot reach Neovim at {self.address}: {exc}") from exc
        self._nvim = nvim

        def setup() -> None:
            self._channel_id = nvim.channel_id
            self._to_trio(attached.set)

        def on_request(name: str, args: list[Any]) -> Any:
            raise RuntimeError(f"claude-nvim takes no RPC requests (got {name!r})")

        try:
            nvim.run_loop(on_request, self._on_notification, setup, err_cb=log.debug)
        except (OSError, EOFError) as exc:
            log.debug("Neovim RPC loop ended: %r", exc)
        finally:
            nvim.close()

    def _on_notification(self, name: str, args: list[Any]) -> None:
        handler = self._handlers.get(name)
        if handler is not None:
            self._to_trio(_logged, handler, name, args)
        else:
            log.debug("unhandled Neovim notification %s", name)

    def _to_trio(self, fn: Callable[..., object], *args: Any) -> None:
        assert self._token is not None
        with contextlib.suppress(trio.RunFinishedError):  # shutting down: nobody waits any more
            self._token.run_sync_soon(fn, *args)

    def _hop(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` in a greenlet on the pynvim thread, where requests are allowed."""
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            self._nvim.loop.call_soon_threadsafe(lambda: greenlet.greenlet(fn).switch())

    async def _call(self, fn: Callable[[Any], Any], timeout: float | None) -> Any:
        if self._gone or self._nvim is None:
            raise EditorGone("Neovim is not attached")
        call_id = next(self._ids)
        done = trio.Event()
        outcome: list[tuple[bool, Any]] = []

        def finish(result: tuple[bool, Any]) -> None:
            if self._pending.pop(call_id, None) is not None:
                outcome.append(result)
                done.set()

        def in_greenlet() -> None:
            try:
                result: tuple[bool, Any] = (True, fn(self._nvim))
            except pynvim.NvimError as exc:
                result = (False, EditorError(_nvim_error_text(exc)))
            except (OSError, EOFError):
                result = (False, EditorGone("Neovim went away"))
            except Exception as exc:
                result = (False, exc)
            self._to_trio(finish, result)

        try:
            # Our own queue is not Neovim's fault: its wait has a limit of its own.
            with trio.fail_after(QUEUE_TIMEOUT if timeout is not None else float("inf")):
                await self._slots.acquire()
            try:
                with trio.fail_after(timeout if timeout is not None else float("inf")):
                    self._pending[call_id] = finish
                    self._hop(in_greenlet)
                    await done.wait()
            finally:
                self._slots.release()
        except trio.TooSlowError:
            raise EditorTimeout(
                f"Neovim did not answer within {timeout:g} s "
                "(it may be waiting for input: a prompt, a pending operator, or a long command)"
            ) from None
        finally:
            self._pending.pop(call_id, None)
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    async def request(self, method: str, *args: Any, timeout: float | None = USE_DEFAULT) -> Any:
        """Make one Neovim API request; ``timeout=None`` waits as long as it takes."""
        # The session's request, not Nvim.request: that one walks every argument and result
        # in Python to swap in Buffer/Window objects we never use (half the server's CPU on a
        # 50,000-diagnostic answer). msgpack already decodes strings.
        return await self._call(lambda nvim: nvim._session.request(method, *args),
                                self._limit(timeout))

    async def exec_lua(self, code: str, *args: Any, timeout: float | None = USE_DEFAULT) -> Any:
        """Run a Lua chunk in Neovim with ``...`` = ``args``; returns its value."""
        return await self.request("nvim_exec_lua", code, list(args), timeout=timeout)

    async def call_lua(self, module: str, fn: str, *args: Any,
                       timeout: float | None = USE_DEFAULT) -> Any:
        """Call ``package.loaded[module][fn](*args)`` in Neovim: one round trip."""
        return await self.exec_lua(_CALL_LUA, module, fn, *args, timeout=timeout)

    def call_lua_soon(self, module: str, fn: str, *args: Any) -> None:
        """Like :meth:`call_lua`, without waiting: sent as an RPC notification (no answer).

        Neovim reports a failure only in its own log; use it where nobody needs the result.
        """
        if self._gone or self._nvim is None:
            return
        payload = [_CALL_LUA, [module, fn, *args]]
        self._hop(lambda: self._nvim._session.request("nvim_exec_lua", *payload, async_=True))

    def _limit(self, timeout: float | None) -> float | None:
        return self.timeout if timeout == USE_DEFAULT else timeout


def _logged(handler: NotificationCallback, name: str, args: list[Any]) -> None:
    # It runs in trio's run_sync_soon, where an exception would end the whole run.
    try:
        handler(args)
    except Exception:
        log.exception("handling Neovim notification %s failed", name)


def _nvim_error_text(exc: Exception) -> str:
    text = str(exc.args[0] if exc.args else exc)
    # Lua errors arrive as "Error executing lua: <where>: message\nstack traceback: ...".
    text = text.split("\nstack traceback:", 1)[0]
    return re.sub(r"^Error executing lua:\s*", "", text).strip()
