"""An :class:`~.editor.Editor` through pynvim, for Windows named pipes, which trio
cannot open. This is the only module that imports pynvim.

pynvim runs on one dedicated thread inside ``nvim.run_loop``; every request runs there in a
greenlet, hopped in with ``loop.call_soon_threadsafe`` and answered back with
``TrioToken.run_sync_soon``. Only plain data (no pynvim objects) crosses the threads.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

import greenlet
import msgpack
import pynvim
import trio

from .._errors import EditorError, EditorGone
from .editor import DEFAULT_TIMEOUT, error_text, parse_address
from .scheduler import MAX_IN_FLIGHT, QUEUE_TIMEOUT, EditorBase

log = logging.getLogger(__name__)


class PynvimEditor(EditorBase):
    """An :class:`~.editor.Editor` attached to a running Neovim through pynvim."""

    def __init__(self, address: str, *, timeout: float = DEFAULT_TIMEOUT,
                 max_in_flight: int = MAX_IN_FLIGHT, queue_timeout: float = QUEUE_TIMEOUT
                 ) -> None:
        super().__init__(address, timeout=timeout, max_in_flight=max_in_flight,
                         queue_timeout=queue_timeout)
        self._nvim: Any = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._gone = False
        self._stopping = False

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
            nursery.start_soon(self._expire_calls)
            task_status.started()

    async def _own_thread(self, attached: trio.Event) -> None:
        try:
            await trio.to_thread.run_sync(self._thread_main, attached)
        finally:
            self._gone = True
            self._fail_all(EditorGone("Neovim went away"))
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

        def on_notification(name: str, args: list[Any]) -> None:
            self._to_trio(self._notified, name, args)

        try:
            nvim.run_loop(on_request, on_notification, setup, err_cb=log.debug)
        except (OSError, EOFError) as exc:
            log.debug("Neovim RPC loop ended: %r", exc)
        finally:
            nvim.close()

    def _to_trio(self, fn: Callable[..., object], *args: Any) -> None:
        assert self._token is not None
        with contextlib.suppress(trio.RunFinishedError):  # shutting down: nobody waits any more
            self._token.run_sync_soon(fn, *args)

    def _hop(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` in a greenlet on the pynvim thread, where requests are allowed."""
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            self._nvim.loop.call_soon_threadsafe(lambda: greenlet.greenlet(fn).switch())

    def _attached(self) -> bool:
        return not self._gone and self._nvim is not None

    def _prepare(self, method: str, args: list[Any]) -> tuple[str, list[Any]]:
        return method, args

    def _send_call(self, msgid: int, message: tuple[str, list[Any]]) -> None:
        method, args = message

        def in_greenlet() -> None:
            error: BaseException | None = None
            result: Any = None
            try:
                # The session's request, not Nvim.request: that one walks every argument and
                # result in Python to swap in Buffer/Window objects we never use.
                result = self._nvim._session.request(method, *args)
                # Lua hands back handles as numbers; API calls return them as ext types.
                if method != "nvim_exec_lua":
                    result = _plain(result)
            except pynvim.NvimError as exc:
                error = EditorError(error_text(exc.args[0] if exc.args else exc))
            except (OSError, EOFError):
                error = EditorGone("Neovim went away")
            except Exception as exc:
                error = exc
            self._to_trio(self._answered, msgid, error, result)

        self._hop(in_greenlet)

    def _send_notification(self, method: str, args: list[Any]) -> None:
        if self._attached():
            self._hop(lambda: self._nvim._session.request(method, *args, async_=True))


def _plain(value: Any) -> Any:
    """``value`` with Buffer/Window/Tabpage ext types replaced by their integer handles."""
    if isinstance(value, msgpack.ExtType):
        return msgpack.unpackb(value.data)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value
