"""Answers that a tool's Lua sends later: for work Neovim finishes asynchronously.

Some answers are not ready when a Lua function returns (a language server's reply, a job's
output), and Lua must never block Neovim waiting for them. :meth:`Replies.call` calls
``fn(reply_id, ...)`` in a tool's Lua module; that function starts the work and returns at
once, and when the work is done Lua sends the answer as a notification::

    package.loaded['claude_nvim.core'].notify('claude_nvim_reply', reply_id, ok, value)

``ok`` true: ``value`` is the answer. ``ok`` false: ``value`` is a message for the caller
(the tool call fails with it, ``isError: true``). ``value`` must not be ``nil``.

When the answer does not come in time, or the caller goes away, the module's
``cancel(reply_id)`` is called: it should stop the work, forget the reply id, and may return
a short description of what it was waiting for, which goes into the timeout message.

The App owns one :class:`Replies`: :class:`~claude_nvim._lsp.LspFeature` routes the
``claude_nvim_reply`` notification to it, and tools reach it as ``ToolContext.replies``.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import trio

from .._errors import ToolError
from .._nvim.editor import Editor

EVENT = "claude_nvim_reply"
CANCEL_TIMEOUT = 1.0
"""Seconds to wait for Neovim to acknowledge a cancellation."""


class ReplyTimeout(ToolError):
    """The Lua side did not answer in time."""


class Replies:
    """The replies Neovim's Lua owes us: reply id -> where to put the answer."""

    def __init__(self) -> None:
        self.waiting: dict[int, tuple[trio.Event, list[tuple[bool, Any]]]] = {}
        self._ids = itertools.count(1)

    def on_reply(self, args: list[Any]) -> None:
        """The ``claude_nvim_reply`` notification's handler."""
        if len(args) < 3 or not isinstance(args[0], int):
            return
        entry = self.waiting.pop(args[0], None)
        if entry is not None:  # else: cancelled or timed out already
            done, box = entry
            box.append((bool(args[1]), args[2]))
            done.set()

    async def call(self, editor: Editor, module: str, fn: str, *args: Any, timeout: float,
                   cancel: str = "cancel") -> Any:
        """Call ``fn(reply_id, *args)`` of the Lua ``module`` and wait for its reply.

        Raises :class:`~claude_nvim.ToolError` with Lua's message when it replies
        ``ok = false``, and :class:`ReplyTimeout` when no reply comes within ``timeout``
        seconds (counted from the call).
        """
        reply_id = next(self._ids)
        done = trio.Event()
        box: list[tuple[bool, Any]] = []
        # Registered before the call: a reply sent at once may arrive before the call's answer.
        self.waiting[reply_id] = (done, box)
        waiting_for: Any = None
        try:
            with trio.move_on_after(timeout):
                await editor.call_lua(module, fn, reply_id, *args)
                await done.wait()
        finally:
            self.waiting.pop(reply_id, None)
            if not done.is_set():  # timed out, failed, or the caller went away: stop the work
                waiting_for = await _cancel(editor, module, cancel, reply_id)
        if not box:
            if isinstance(waiting_for, str) and waiting_for:
                raise ReplyTimeout(f"No answer within {timeout:g} s: gave up {waiting_for}")
            raise ReplyTimeout(f"Neovim did not answer within {timeout:g} s")
        ok, value = box[0]
        if not ok:
            raise ToolError(str(value))
        return value


async def _cancel(editor: Editor, module: str, cancel: str, reply_id: int) -> Any:
    with trio.move_on_after(CANCEL_TIMEOUT, shield=True), contextlib.suppress(Exception):
        return await editor.call_lua(module, cancel, reply_id, timeout=CANCEL_TIMEOUT)
    return None
