"""The one slot for answers of megabytes, so that they are read and sent one at a time.

The :class:`~claude_nvim._app.App` owns one :class:`BigReads`; tools reach it through
:meth:`~claude_nvim.ToolContext.big_read`.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator
from typing import Protocol

import trio


class Outlet(Protocol):
    """Where an answer goes (a connection): it may have no room for it yet."""

    def has_room(self) -> bool:
        """Whether a message queued now would not wait (a backlog under the high-water mark)."""
        ...

    async def room(self) -> None:
        """Wait until :meth:`has_room` (or the outlet is closed)."""
        ...


_ANSWERING: contextvars.ContextVar[_Answering | None] = contextvars.ContextVar(
    "claude_nvim_answering", default=None)


class BigReads:
    """One slot for reads of megabytes (a whole big selection, every diagnostic): big answers
    never pile up in memory (64 concurrent 11 MB answers once peaked at 1.4 GB).

    Taken only once the answer's connection has room for it: a client reading a trickle holds
    its own answers, never the slot (one that asked twice for 20 MB and read 256 KB/s once
    made every other client's big read wait 28-90 s)."""

    def __init__(self) -> None:
        self._slot = trio.Semaphore(1)

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[None]:
        """Take the slot for a big read.

        Inside :meth:`answering` the slot is taken once its outlet has room, kept until the
        answer has been queued, and taking it again there is free.
        """
        answer = _ANSWERING.get()
        if answer is not None and self._slot in answer.held:
            yield
            return
        outlet = answer.outlet if answer is not None else None
        while True:
            if outlet is not None:
                await outlet.room()
            await self._slot.acquire()
            if outlet is None or outlet.has_room():
                break
            self._slot.release()  # room went while we waited for the slot: wait again
        try:
            yield
        finally:
            if answer is None:
                self._slot.release()
            else:
                answer.held.append(self._slot)

    @staticmethod
    def answering(outlet: Outlet | None = None) -> _Answering:
        """The handling of one request and the sending of its answer to ``outlet``
        (``with answering(connection) as answer:``): slots that :meth:`read` takes inside are
        released at its end; while it holds one (:attr:`_Answering.holds_slot`), queue the
        answer without waiting for room, as room was waited for before the read."""
        return _Answering(outlet)


class _Answering:
    __slots__ = ("_token", "held", "outlet")

    def __init__(self, outlet: Outlet | None) -> None:
        self.outlet = outlet
        self.held: list[trio.Semaphore] = []

    @property
    def holds_slot(self) -> bool:
        return bool(self.held)

    def __enter__(self) -> _Answering:
        self._token = _ANSWERING.set(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        _ANSWERING.reset(self._token)
        for slot in self.held:
            slot.release()
