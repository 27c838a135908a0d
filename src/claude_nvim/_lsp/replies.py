"""Answers that a tool's Lua sends later: for work Neovim finishes asynchronously.

Some answers are not ready when a Lua function returns (a language server's reply, a job's
output), and Lua must never block Neovim waiting for them. :func:`call_lua_async` calls
``fn(reply_id, ...)`` in the tool's Lua module; that function starts the work and returns at
once, and when the work is done Lua sends the answer as a notification::

    package.loaded['claude_nvim.core'].notify('claude_nvim_reply', reply_id, ok, value)

``ok`` true: ``value`` is the answer. ``ok`` false: ``value`` is a message for the caller
(the tool call fails with it, ``isError: true``). ``value`` must not be ``nil``.

When the answer does not come in time, or the caller goes away, the module's
``cancel(reply_id)`` is called: it should stop the work, forget the reply id, and may return
a short description of what it was waiting for, which goes into the timeout message.

The handler of the ``claude_nvim_reply`` notification is installed on the editor the first
time a tool uses it (with ``Editor.on_notification``); nothing else needs to know about it.
"""

from __future__ import annotations

import contextlib
import itertools
import weakref
from typing import Any

import trio

from .._tool import ToolContext, ToolError

EVENT = "claude_nvim_reply"
CANCEL_TIMEOUT = 1.0
"""Seconds to wait for Neovim to acknowledge a cancellation."""


class ReplyTimeout(ToolError):
    """The Lua side did not answer in time."""


class _Replies:
    """The replies one editor's Lua owes us: reply id -> where to put the answer."""

    def __init__(self) -> None:
        self.waiting: dict[int, tuple[trio.Event, list[tuple[bool, Any]]]] = {}

    def on_reply(self, args: list[Any]) -> None:
        if len(args) < 3 or not isinstance(args[0], int):
            return
        entry = self.waiting.pop(args[0], None)
        if entry is not None:  # else: cancelled or timed out already
            done, box = entry
            box.append((bool(args[1]), args[2]))
            done.set()


_by_editor: weakref.WeakKeyDictionary[Any, _Replies] = weakref.WeakKeyDictionary()
_ids = itertools.count(1)


def _replies_of(ctx: ToolContext) -> _Replies:
    replies = _by_editor.get(ctx.editor)
    if replies is None:
        replies = _by_editor[ctx.editor] = _Replies()
        ctx.editor.on_notification(EVENT, replies.on_reply)
    return replies


async def call_lua_async(ctx: ToolContext, fn: str, *args: Any, timeout: float,
                         cancel: str = "cancel") -> Any:
    """Call ``fn(reply_id, *args)`` of the tool's Lua module and wait for its reply.

    Raises :class:`~claude_nvim.tool.ToolError` with Lua's message when it replies
    ``ok = false``, and :class:`ReplyTimeout` when no reply comes within ``timeout`` seconds
    (counted from the call).
    """
    replies = _replies_of(ctx)
    reply_id = next(_ids)
    done = trio.Event()
    box: list[tuple[bool, Any]] = []
    # Registered before the call: a reply sent at once may arrive before the call's answer.
    replies.waiting[reply_id] = (done, box)
    waiting_for: Any = None
    try:
        with trio.move_on_after(timeout):
            await ctx.call_lua(fn, reply_id, *args)
            await done.wait()
    finally:
        replies.waiting.pop(reply_id, None)
        if not done.is_set():  # timed out, failed, or the caller went away: stop the work
            waiting_for = await _cancel(ctx, cancel, reply_id)
    if not box:
        if isinstance(waiting_for, str) and waiting_for:
            raise ReplyTimeout(f"No answer within {timeout:g} s: gave up {waiting_for}")
        raise ReplyTimeout(f"Neovim did not answer within {timeout:g} s")
    ok, value = box[0]
    if not ok:
        raise ToolError(str(value))
    return value


async def _cancel(ctx: ToolContext, cancel: str, reply_id: int) -> Any:
    with trio.move_on_after(CANCEL_TIMEOUT, shield=True), contextlib.suppress(Exception):
        return await ctx.editor.call_lua(ctx.tool.lua_module, cancel, reply_id,
                                         timeout=CANCEL_TIMEOUT)
    return None
