"""The one slot for answers of megabytes, so that they are read and sent one at a time.

The :class:`~claude_nvim._app.App` owns one :class:`BigReads`; tools reach it through
:meth:`~claude_nvim.ToolContext.big_read`.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator

import trio

_HELD_UNTIL_SENT: contextvars.ContextVar[list[trio.Semaphore] | None] = contextvars.ContextVar(
    "claude_nvim_held_until_sent", default=None)


class BigReads:
    """One slot for reads of megabytes (a whole big selection, every diagnostic): big answers
    never pile up in memory (64 concurrent 11 MB answers once peaked at 1.4 GB)."""

    def __init__(self) -> None:
        self._slot = trio.Semaphore(1)

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[None]:
        """Take the slot for a big read.

        Inside :meth:`answering` the slot is kept until the answer has been sent, and taking
        it again there is free.
        """
        held = _HELD_UNTIL_SENT.get()
        if held is not None and self._slot in held:
            yield
            return
        await self._slot.acquire()
        try:
            yield
        finally:
            if held is None:
                self._slot.release()
            else:
                held.append(self._slot)

    @staticmethod
    def answering() -> _Answering:
        """The handling of one request and the sending of its answer (``with answering():``):
        slots that :meth:`read` takes inside are released at its end."""
        return _Answering()


class _Answering:
    __slots__ = ("_held", "_token")

    def __enter__(self) -> None:
        self._held: list[trio.Semaphore] = []
        self._token = _HELD_UNTIL_SENT.set(self._held)

    def __exit__(self, *exc_info: object) -> None:
        _HELD_UNTIL_SENT.reset(self._token)
        for slot in self._held:
            slot.release()
