"""The one slot for answers of megabytes, so that they are read and sent one at a time."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator

import trio

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
