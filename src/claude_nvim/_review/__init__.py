"""The review of what Claude changed, turn by turn (``review.lua``: :ClaudeNvimReview,
:ClaudeNvimRevert, the signs).

What a turn changed comes two ways. A claude with claude-nvim's hooks says when its turns start
and end, and names each file a file tool is about to write (PreToolUse: the server reads it
then, on its own host, before claude writes it) and has written (PostToolUse). Any other change
to a loaded buffer's file (Bash's ``sed``, a formatter, a claude without hooks) is seen by
bufsync, which sends the buffer's text before it reloads it, while a Claude works or a Claude
without hooks is connected (``review.lua`` decides, from ``vim.g.claude_nvim_server.claudes``).
:mod:`.turns` keeps the texts within its budget.

The server reads files on Claude's host: the turns keep Claude's paths, and a path crosses
``self.paths`` to and from Neovim (a Claude on another host, ``serve --path-map``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import trio

from .._feature import JSON, Feature, NotificationHandler
from .._nvim.editor import Editor
from .._nvim.lua import shared_module
from .._paths import PathMap
from .._wire.constants import FILE_TOOLS
from . import disk
from .turns import QUIET_SECONDS, Turn, Turns

log = logging.getLogger(__name__)

MODULE = "claude_nvim.review"
BEFORE = "claude_nvim_review_before"
"""Lua -> server: (path, bytes): a buffer's file changed on disk; its text before."""
REQUEST = "claude_nvim_review"
"""Lua -> server: the user's commands, ("show", number or nil), ("list"), ("revert", ...)."""
WITHOUT_HOOKS = "changes on disk"
"""The label of a turn of changes whose Claude has no hooks (it may not be Claude's at all)."""
TURN_END = frozenset({"Stop", "StopFailure"})


class ReviewFeature(Feature):
    """``claude_nvim.review``: Claude's turns, their changes, and the user's review of them."""

    lua = shared_module(__name__, "review")

    def __init__(self, max_file_bytes: int, label_of: Callable[[int], str] = str,
                 turns: Turns | None = None, quiet_seconds: float = QUIET_SECONDS) -> None:
        self.max_file_bytes = max_file_bytes
        self._label_of = label_of
        """How the user knows a Claude, by its connection id (its hooks may come before)."""
        self.turns = turns or Turns()
        self.quiet_seconds = quiet_seconds
        self._editor: Editor | None = None
        self._nursery: trio.Nursery | None = None
        self._quiet = trio.Event()

    def notifications(self) -> Mapping[str, NotificationHandler]:
        return {BEFORE: self._before, REQUEST: self._request}

    def options(self, editor: Editor) -> JSON:
        return {"before": BEFORE, "request": REQUEST}

    async def start(self, editor: Editor, nursery: trio.Nursery) -> None:
        self._editor, self._nursery = editor, nursery
        await super().start(editor, nursery)
        nursery.start_soon(self._end_quiet_turns)

    def stop(self) -> None:
        self._editor = self._nursery = None

    # Reading files: in a thread, the hook's answer waits for it (claude writes after).

    async def _read(self, path: str) -> tuple[bytes | None, bool]:
        """The file's bytes (None: no file), and whether they could be read."""
        try:
            data = await trio.to_thread.run_sync(disk.read, path, self.max_file_bytes)
        except disk.Unreadable as why:
            log.info("review: not kept: %s", why)
            return None, False
        return data, True

    # claude's hooks (a Hooks listener)

    async def on_hook(self, claude: JSON, event: JSON) -> None:
        name, claude_id, now = event["name"], claude["id"], time.time()
        if name == "UserPromptSubmit":
            await self._finish(claude_id)  # a rejected turn ends without Stop
            self.turns.start(claude_id, str(claude.get("label") or ""), event["prompt"], now)
            self._forget_reported()
        elif name in ("PreToolUse", "PostToolUse") and event["tool"] in FILE_TOOLS \
                and event["path"]:
            turn = self.turns.current(claude_id) or self.turns.start(
                claude_id, str(claude.get("label") or ""), "", now)
            path = event["path"]
            key = disk.key(path)
            if name == "PreToolUse":
                if key not in turn.files and key not in turn.too_big:
                    before, ok = await self._read(path)
                    if ok:
                        self.turns.add(turn, key, path, before, now)
                    else:
                        turn.too_big[key] = path
            else:
                after, ok = await self._read(path)
                self.turns.written(turn, key, after if ok else None)
        elif name in TURN_END or (name == "Notification"
                                  and event["notification"] == "idle_prompt"):
            await self._finish(claude_id)

    async def disconnected(self, editor: Editor, client_id: int) -> None:
        await self._finish(client_id)

    def _label(self, turn: Turn) -> Turn:
        if turn.claude is not None:
            turn.label = self._label_of(turn.claude) or turn.label
        return turn

    async def _finish(self, claude: int | None, *, reviewed: bool = False) -> None:
        """End ``claude``'s open turn: its files as they are now, then Neovim is told (unless
        it ends as the user reviews it)."""
        turn = self.turns.current(claude)
        if turn is None:
            return
        self._label(turn)
        for key, change in list(turn.files.items()):
            after, ok = await self._read(change.path)
            self.turns.written(turn, key, after if ok else None)
        recorded = self.turns.end(claude)
        self._forget_reported()
        if recorded is not None and self._nursery is not None and not reviewed:
            self._nursery.start_soon(self._mark, recorded)

    def _forget_reported(self) -> None:
        if self._editor is not None:
            self._editor.call_lua_soon(MODULE, "forget_reported")

    async def _mark(self, turn: Turn) -> None:
        """Tell Neovim a turn changed files: signs in the loaded ones, status()."""
        editor = self._editor
        if editor is None or turn.number is None:
            return
        paths = {self.paths.to_neovim(c.path): c for c in turn.files.values()}
        try:
            loaded = await editor.call_lua(MODULE, "recorded", turn.summary(), list(paths))
            befores = {path: c.before or b"" for path, c in paths.items()
                       if path in (loaded or [])}
            if befores:
                await editor.call_lua(MODULE, "mark", turn.number, befores)
        except Exception as exc:  # Neovim busy or gone: no signs, nothing else lost
            log.info("review: could not mark turn %s: %s", turn.number, exc)

    # bufsync saw a loaded buffer's file change (review.lua sends its text before)

    def _before(self, args: list[Any]) -> None:
        path, before = [*args, None, None][:2]
        if not isinstance(path, str) or not isinstance(before, (str, bytes)) \
                or self._nursery is None:
            return
        data = before.encode("utf-8", "surrogateescape") if isinstance(before, str) else before
        self._nursery.start_soon(self._changed_on_disk, self.paths.to_claude(path), data)

    async def _changed_on_disk(self, path: str, before: bytes) -> None:
        key, now = disk.key(path), time.time()
        if self.turns.owner_of(key) is not None:
            return  # a hook named it: that turn has its text from before
        hooked = [t for t in self.turns.open_turns() if t.claude is not None]
        # Bash, a formatter...: the working Claude's turn (the latest to start), else a turn
        # of changes by a Claude without hooks.
        turn = max(hooked, key=lambda t: t.started) if hooked else (
            self.turns.current(None) or self.turns.start(None, WITHOUT_HOOKS, "", now))
        if self.turns.add(turn, key, path, before, now):
            after, ok = await self._read(path)
            self.turns.written(turn, key, after if ok else None)
        if turn.claude is None:
            self._quiet.set()

    async def _end_quiet_turns(self) -> None:
        """The turn of changes without hooks ends once none came for ``quiet_seconds``."""
        while True:
            await self._quiet.wait()
            self._quiet = trio.Event()
            while (turn := self.turns.current(None)) is not None:
                left = turn.last_change + self.quiet_seconds - time.time()
                if left <= 0:
                    await self._finish(None)
                else:
                    await trio.sleep(left)

    # The user's commands

    def _request(self, args: list[Any]) -> None:
        if self._nursery is not None and args and isinstance(args[0], str):
            self._nursery.start_soon(self._answer, args[0], args[1:])

    async def _answer(self, what: str, args: list[Any]) -> None:
        editor = self._editor
        if editor is None:
            return
        try:
            if what == "list":
                summaries = [self._label(t).summary() for t in reversed(list(self.turns))]
                await editor.call_lua(MODULE, "pick", summaries)
            elif what == "show":
                await self._show(editor, args[0] if args and isinstance(args[0], int) else None)
            elif what == "revert" and len(args) >= 2 and isinstance(args[0], str):
                await self._revert(editor, args[0], args[1] if isinstance(args[1], int)
                                   else None, args[2] if len(args) > 2 else {})
        except Exception as exc:
            log.warning("review: %s failed: %s", what, exc)

    async def _show(self, editor: Editor, number: int | None) -> None:
        turn = self.turns.get(number)
        if turn is None:
            await editor.call_lua(MODULE, "none", number)
            return
        if turn.claude is None and turn.open:
            await self._finish(None, reviewed=True)  # later changes make a new turn
        elif turn.open:
            for key, change in list(turn.files.items()):  # as far as it got
                after, ok = await self._read(change.path)
                self.turns.written(turn, key, after if ok else None)
        await editor.call_lua(MODULE, "show", payload(self._label(turn), self.paths))

    async def _revert(self, editor: Editor, path: str, number: int | None,
                      how: Any) -> None:
        key = disk.key(self.paths.to_claude(path))
        turn = self.turns.get(number) if number is not None else self.turns.latest_with(key)
        change = turn.files.get(key) if turn is not None else None
        if turn is None or change is None:
            await editor.call_lua(MODULE, "revert", path, None, how)
            return
        await editor.call_lua(MODULE, "revert", path, {
            "number": turn.number, "label": self._label(turn).label,
            "path": self.paths.to_neovim(change.path),
            "before": change.before, "after": change.after}, how)


def payload(turn: Turn, paths: PathMap) -> JSON:
    """A turn as review.lua shows it, in Neovim's paths: each file's bytes before and after
    (``None``: none)."""
    return {**turn.summary(),
            "changes": [{"path": paths.to_neovim(c.path), "before": c.before, "after": c.after}
                        for c in turn.files.values()],
            "too_big": [paths.to_neovim(path) for path in turn.too_big.values()]}
