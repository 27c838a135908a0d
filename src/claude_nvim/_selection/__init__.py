"""Selection tracking: the server half of ``selection.lua`` and the selection tools' reads.

Lua computes the selection on each cursor or mode event and sends it with a leading+trailing
throttle, so a single move arrives at once and a burst costs one message per window. The
server keeps only the latest value; each connection sends the newest state it has not sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio

from .._big_reads import BigReads
from .._errors import EditorError, ToolError
from .._feature import JSON, Feature, NotificationHandler, Send
from .._nvim.editor import Editor
from .._nvim.lua import shared_module
from .._wire.jsonrpc import notification

MODULE = "claude_nvim.selection"
NOTIFICATION = "claude_nvim_selection"
OUTSIDE = ("The active editor's file is outside the folders mapped for this Claude "
           "(serve --path-map): nothing of it is sent")
"""The selection tools' answer for a file outside the map (a Claude on another host)."""
TEXT_CAP = 10_000
"""Bytes of selection text a notification carries (the CLI uses 2,000 characters)."""
WINDOW_MS = 50
"""The throttle window: at most one notification per window, the final state always sent."""

LUA_ROWS = 2000
"""Rows a full read takes in Lua at most; longer charwise/linewise selections read the rest
with plain nvim_buf_get_lines requests (see ``read_full``)."""
READ_ROWS = 5000
"""Rows per nvim_buf_get_lines request of a big read: about 1 ms of Neovim's time each."""

SLICE_MS = 10
"""How long one read of a big selection may hold Neovim; the rest comes in further reads."""


async def read_full(editor: Editor, big_reads: BigReads, fn: str) -> dict[str, Any] | None:
    """The selection from ``fn`` ("current" or "latest") with its full text, read in parts.

    Raises :class:`ToolError` when the buffer keeps changing under the read.
    """
    for _attempt in range(3):
        args = [None, SLICE_MS] if fn == "current" else [SLICE_MS]  # current: no cap
        payload: dict[str, Any] | None = await editor.call_lua(MODULE, fn, *args)
        if payload is None:
            return None
        more = payload.pop("more", None)
        if more is None:
            return payload
        async with big_reads.read():
            read_rest = _read_rows if "rows" in more else _read_slices
            rest = await read_rest(editor, more)
        if rest is not None:
            payload["text"] += rest
            return payload
        # else the buffer changed under the read: read it all again
    raise ToolError("the selection kept changing while it was read; try again")


async def _read_rows(editor: Editor, more: dict[str, Any]) -> str | None:
    """Whole rows ``more["rows"]`` (from, to) as text after a line break, then ``more["tail"]``;
    ``None`` when the buffer changed meanwhile."""
    buf, (first, stop), tail = more["buf"], more["rows"], str(more["tail"])
    parts = [""]
    try:
        for row in range(first, stop, READ_ROWS):
            parts += await editor.request("nvim_buf_get_lines", buf, row,
                                          min(row + READ_ROWS, stop), True)
        # Requests run in order and the tick only grows: unchanged now means unchanged
        # throughout, so the rows all come from one version of the buffer.
        if await editor.request("nvim_buf_get_changedtick", buf) != more["tick"]:
            return None
    except EditorError:
        return None  # the buffer is gone, or lost the rows
    return "\n".join(parts) + tail


async def _read_slices(editor: Editor, more: dict[str, Any]) -> str | None:
    parts = [""]
    while True:
        part = await editor.call_lua(MODULE, "slice", more, SLICE_MS)
        if part is None:
            return None
        parts.append(part["text"])
        if part.get("next") is None:
            return "\n".join(parts)
        more = {**more, "next": part["next"]}


class SelectionTracker:
    """The latest selection Neovim reported; no queue, so a slow client skips states."""

    def __init__(self) -> None:
        self.current: dict[str, Any] | None = None
        self.version = 0
        self._changed = trio.Event()

    def update(self, payload: dict[str, Any]) -> None:
        self.current = payload
        self.version += 1
        self._changed.set()
        self._changed = trio.Event()

    async def wait_newer(self, version: int) -> tuple[int, dict[str, Any]]:
        """Wait for a state newer than ``version``; returns ``(version, payload)``."""
        while self.version <= version or self.current is None:
            await self._changed.wait()
        return self.version, self.current


class SelectionFeature(Feature):
    """``claude_nvim.selection``: Neovim sends the selection as it changes; each IDE client
    gets the newest state it has not had (``selection_changed``)."""

    lua = shared_module(__name__, "selection")

    def __init__(self) -> None:
        self.tracker = SelectionTracker()

    def notifications(self) -> Mapping[str, NotificationHandler]:
        return {NOTIFICATION: self._update}

    def options(self, editor: Editor) -> JSON:
        return {"cap": TEXT_CAP, "window_ms": WINDOW_MS, "lua_rows": LUA_ROWS,
                "event": NOTIFICATION}

    def _update(self, args: list[Any]) -> None:
        if args and isinstance(args[0], dict):
            payload = self.paths.to_claude_fields(args[0], resolve=True)  # it holds text
            if payload is not None:  # a file outside the mapped folders: nothing is sent
                self.tracker.update(payload)

    async def push(self, send: Send) -> None:
        version = 0
        while True:
            version, payload = await self.tracker.wait_newer(version)
            if not await send(notification("selection_changed", payload)):
                return
