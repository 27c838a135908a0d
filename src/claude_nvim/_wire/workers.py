"""The tasks that answer one connection's messages (:class:`Workers`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import outcome
import trio

from .constants import MAX_MESSAGE_BYTES

MAX_IN_FLIGHT = 64
"""Messages of one connection being answered at once; beyond, its reading waits."""
MAX_IN_FLIGHT_BYTES = 2 * MAX_MESSAGE_BYTES
"""The same for the size of those messages (each is held until it is answered)."""


class Workers:
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
