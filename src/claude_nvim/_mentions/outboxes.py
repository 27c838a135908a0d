"""The notifications on their way to the IDE clients: one outbox per client that listens, the
@-mention routing among several Claudes (:class:`~claude_nvim._claudes.Claudes`), and the
@-mentions sent while none listens, kept for a while for the first that comes."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence

import trio

from .._claudes import Claude, Claudes
from .._wire.jsontext import JSON

Tell = Callable[[str, str], Awaitable[None]]
"""Tells the user ``message`` in Neovim at a level ("INFO", "WARN")."""

OUTBOX_SIZE = 64
"""Messages a client may have waiting; beyond, a stuck client misses them."""


class Outboxes:
    """The IDE clients' outboxes, and the @-mention queue for when there is no client."""

    def __init__(self, queue_seconds: float, tell: Tell, claudes: Claudes | None = None) -> None:
        self.queue_seconds = queue_seconds
        """Seconds queued mentions wait for a client before they are dropped."""
        self._tell = tell
        self._outboxes: dict[int, trio.MemorySendChannel[JSON]] = {}
        """By connection id: the clients listening now."""
        self._queued: list[JSON] = []
        self.claudes = claudes if claudes is not None else Claudes()
        """Who the Claudes are, and which terminal each runs in."""

    def __len__(self) -> int:
        """The clients listening now."""
        return len(self._outboxes)

    def send_mention(self, messages: Sequence[JSON], recent_terminals: Sequence[int],
                     nursery: trio.Nursery, labels: Mapping[int, str] | None = None) -> None:
        """Send ``messages`` to one listening client: the Claude of the terminal the user was
        in last (``recent_terminals``: buffer numbers, most recent first), else the latest to
        connect; with more than one listening, the user is told which got them, by its label
        in ``labels`` (terminal buffer -> "Claude 2 · fix the parser") if it has one. With
        none, queue them for the first that comes, for :attr:`queue_seconds` (the user is
        told, in a task of ``nursery``)."""
        target = self.claudes.mention_target(recent_terminals, self._outboxes)
        if target is not None:
            for message in messages:
                with contextlib.suppress(trio.WouldBlock):  # a stuck client misses it
                    self._outboxes[target.id].send_nowait(message)
            if len(self._outboxes) > 1:
                terminal = target.terminal.buffer if target.terminal else None
                label = (labels or {}).get(terminal or 0) or target.label
                count = f"{len(messages)} mentions " if len(messages) > 1 else ""
                nursery.start_soon(self._tell, f"{count}sent to {label}", "INFO")
            return
        first = not self._queued
        self._queued.extend(messages)
        if first and self._queued:
            nursery.start_soon(self._expire)

    @contextlib.contextmanager
    def open(self, claude: Claude) -> Iterator[trio.MemoryReceiveChannel[JSON]]:
        """The outbox of ``claude`` while it listens, with the queued mentions in it."""
        outbox, inbox = trio.open_memory_channel[JSON](OUTBOX_SIZE)
        client_id = claude.id
        self._outboxes[client_id] = outbox
        try:
            for message in self._queued:
                with contextlib.suppress(trio.WouldBlock):
                    outbox.send_nowait(message)
            self._queued.clear()
            yield inbox
        finally:
            del self._outboxes[client_id]

    async def _expire(self) -> None:
        await self._tell("no Claude is connected yet: the mention is sent when one connects",
                         "INFO")
        await trio.sleep(self.queue_seconds)
        if self._queued:
            count = len(self._queued)
            self._queued.clear()
            await self._tell(f"no Claude connected within {self.queue_seconds:g} s: "
                             f"{count} mention(s) dropped; start claude and send again", "WARN")
