"""The review of what Claude changed, turn by turn (``review.lua``: :ClaudeNvimReview,
:ClaudeNvimRevert, the signs).

What a turn changed comes two ways. A claude with claude-nvim's hooks says when its turns start
and end, and names each file a file tool is about to write (PreToolUse: the server reads it
then, on its own host, before claude writes it) and has written (PostToolUse). Any other change
to a loaded buffer's file (Bash's ``sed``, a formatter, a claude without hooks) is seen by
bufsync, which sends the buffer's text before it reloads it, while a Claude works or a Claude
without hooks is connected (``review.lua`` decides, from ``vim.g.claude_nvim_server.claudes``).
:mod:`.turns` keeps the texts within its budget.

The turns keep Claude's paths, and a path crosses ``self.paths`` to and from Neovim. Without a
path map (Claudes on this machine) the server reads them as they are. With one (a Claude on
another host or in a container, ``serve --path-map``, the server beside Neovim) a path the far
side names must lie in a mapped folder, or nothing is recorded; the server reads the mapped
file here; a revert is shown the bytes Claude's write left (``check``), and review.lua takes
back or deletes a whole file only while it still holds them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import trio

from .._claudes import Claude, Claudes
from .._feature import JSON, Feature, NotificationHandler
from .._nvim.editor import Editor
from .._nvim.lua import shared_module
from .._paths import OutsideMap
from .._wire.constants import FILE_TOOLS
from . import disk
from .turns import MAX_FILES, MAX_LABEL, QUIET_SECONDS, Turn, Turns

log = logging.getLogger(__name__)

MODULE = "claude_nvim.review"
BEFORE = "claude_nvim_review_before"
"""Lua -> server: (path, bytes): a buffer's file changed on disk; its text before."""
REQUEST = "claude_nvim_review"
"""Lua -> server: the user's commands, ("show", number or nil), ("list"), ("revert", ...)."""
WITHOUT_HOOKS = "changes on disk"
"""The label of a turn of changes whose Claude has no hooks (it may not be Claude's at all)."""
TURN_END = frozenset({"Stop", "StopFailure"})
PATHS_PER_CALL = 200
"""A turn's paths Neovim looks for among its buffers in one call (``review.recorded``): a
slice of a few milliseconds, whatever the turn."""
MARK_BYTES_PER_CALL = 1 << 20
"""The texts before of loaded files sent in one call (``review.mark``, which diffs them)."""


class ReviewFeature(Feature):
    """``claude_nvim.review``: Claude's turns, their changes, and the user's review of them."""

    lua = shared_module(__name__, "review")

    def __init__(self, max_file_bytes: int, claudes: Claudes | None = None,
                 turns: Turns | None = None, quiet_seconds: float = QUIET_SECONDS) -> None:
        self.max_file_bytes = max_file_bytes
        self.claudes = claudes if claudes is not None else Claudes()
        """Who the Claudes are: a turn is named by its Claude's label (its hooks may come
        before it has one)."""
        self.turns = turns or Turns()
        self.quiet_seconds = quiet_seconds
        self._quiet = trio.Event()
        self._unreviewed: dict[str, int] | None = None
        """The summary of the latest turn recorded and not reviewed since, as Neovim's status
        counts it: for the next Neovim, when the server outlives this one."""
        self._marking = trio.Lock()
        """Signs go to Neovim one turn (or one restore) at a time: a later turn's win."""

    def notifications(self) -> Mapping[str, NotificationHandler]:
        return {BEFORE: self._before, REQUEST: self._request}

    def options(self, editor: Editor) -> JSON:
        return {"before": BEFORE, "request": REQUEST}

    async def start(self, editor: Editor, nursery: trio.Nursery) -> None:
        await super().start(editor, nursery)
        nursery.start_soon(self._end_quiet_turns)

    async def reattach(self, editor: Editor) -> None:
        await super().reattach(editor)
        if self.nursery is not None:  # the new Neovim is ready first: this takes slices
            self.nursery.start_soon(self._restore)

    # Reading files: in a thread, the hook's answer waits for it (claude writes after).

    def _key(self, path: str) -> str:
        """What the file at Claude's ``path`` is known by: with a map, its normalised path
        (checked where it came in), else its real path here (:func:`disk.key`)."""
        return path if self.paths.confines else disk.key(path)

    def in_neovim(self, path: str) -> str | None:
        """Claude's ``path`` in Neovim, checked again (a symlink may lead out since): None when
        it is outside the map."""
        try:
            return self.paths.to_neovim(path)
        except OutsideMap as why:
            log.warning("review: %s", why)
            return None

    async def _read(self, path: str) -> tuple[bytes | None, bool]:
        """The bytes of the file at Claude's ``path`` (None: no file), and whether they could be
        read: here, where Neovim's copy is when a map says so."""
        local = self.in_neovim(path)
        if local is None:
            return None, False
        try:
            data = await trio.to_thread.run_sync(disk.read, local, self.max_file_bytes)
        except disk.Unreadable as why:
            log.info("review: not kept: %s", why)
            return None, False
        return data, True

    # claude's hooks (a Hooks listener)

    async def on_hook(self, claude: Claude, event: JSON) -> None:
        name, claude_id, now = event["name"], claude.id, time.time()
        if name == "UserPromptSubmit":
            await self._finish(claude_id)  # a rejected turn ends without Stop
            self.turns.start(claude_id, claude.label, event["prompt"], now)
            self._forget_reported()
        elif name in ("PreToolUse", "PostToolUse") and event["tool"] in FILE_TOOLS \
                and 0 < len(event["path"]) <= disk.MAX_PATH:
            turn = self.turns.current(claude_id) or self.turns.start(
                claude_id, claude.label, "", now)
            try:
                path = self.paths.claude_path(event["path"])
            except OutsideMap as why:  # a far side's name for a file it may not touch
                log.warning("review: a hook of %s refused, nothing recorded: %s",
                            claude.label or claude_id, why)
                return
            key = self._key(path)
            if name == "PreToolUse":
                if key not in turn.files and key not in turn.too_big:
                    before, ok = await self._read(path)
                    if ok:
                        self.turns.add(turn, key, path, before, now)
                    else:
                        self.turns.too_big(turn, key, path)
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
            turn.label = (self.claudes.label_of(turn.claude) or turn.label)[:MAX_LABEL]
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
        if recorded is not None and not reviewed:
            # Kept even while no Neovim is open (its marks fail then): the next one shows it.
            recorded.reviewed = False  # seen while it went on: what it did since is not
            self._unreviewed = {"number": recorded.number or 0,
                                "files": recorded.file_count()}
            if self.nursery is not None:
                self.nursery.start_soon(self._mark, recorded)

    def reviewed(self, turns: list[Turn], number: int | None) -> None:
        """The user saw ``turns`` in a review of turn ``number`` (review.lua's ``show``: their
        signs go, and the status counts no turn up to ``number``)."""
        for turn in turns:
            turn.reviewed = True
        if self._unreviewed is not None and number is not None \
                and self._unreviewed["number"] <= number:
            self._unreviewed = None

    def _forget_reported(self) -> None:
        if self.editor is not None:
            self.editor.call_lua_soon(MODULE, "forget_reported")

    async def _mark(self, turn: Turn) -> None:
        """Tell Neovim a turn changed files: signs in the loaded ones, status()."""
        editor = self.editor
        if editor is None or turn.number is None:
            return
        async with self._marking:
            await self._sign(editor, "recorded", turn.summary(), turn.number,
                             self._befores([turn]))

    async def _restore(self) -> None:
        """In a new Neovim, the server having outlived the last: the review as the last one
        showed it, or would have for the turns that ended while none was open. status()
        counts the latest turn not reviewed; each file's signs are those of the latest turn
        that changed it, unless that one was reviewed or is still going."""
        editor = self.editor
        if editor is None:
            return
        async with self._marking:
            befores = self._befores(list(self.turns))
            if befores or self._unreviewed is not None:
                await self._sign(editor, "restore", self._unreviewed, None, befores)

    def _befores(self, turns: list[Turn]) -> dict[str, bytes | None]:
        """Each file of ``turns`` (the latest turn to change it decides) that a sign marks: in
        Neovim's path, its bytes before that turn."""
        befores: dict[str, bytes | None] = {}
        seen: set[str] = set()
        for turn in reversed(turns):
            for key, change in turn.files.items():
                if key in seen:
                    continue
                seen.add(key)
                if turn.open or turn.reviewed:
                    continue
                local = self.in_neovim(change.path)
                if local is not None:
                    befores[local] = change.before
            seen.update(turn.too_big)
        return befores

    async def _sign(self, editor: Editor, find: str, summary: JSON | None, number: int | None,
                    befores: dict[str, bytes | None]) -> None:
        """Signs in the loaded buffers of the files of ``befores`` (Neovim's path -> bytes
        before), in slices, a call each: review.lua's ``find`` (``recorded`` or ``restore``,
        with the ``summary`` of the turn status() counts) answers which are loaded,
        ``PATHS_PER_CALL`` paths a call; ``mark`` signs them (turn ``number``'s),
        ``MARK_BYTES_PER_CALL`` of texts a call. Any number of files never holds Neovim longer
        than one slice."""
        names = list(befores)
        try:
            loaded: set[str] = set()
            for at in range(0, max(len(names), 1), PATHS_PER_CALL):
                found = await editor.call_lua(MODULE, find, summary,
                                              names[at:at + PATHS_PER_CALL])
                loaded.update(found if isinstance(found, list) else [])
            sending: dict[str, bytes] = {}
            size = 0
            for path in (name for name in names if name in loaded):
                before = befores[path] or b""
                if sending and size + len(before) > MARK_BYTES_PER_CALL:
                    await editor.call_lua(MODULE, "mark", number, sending)
                    sending, size = {}, 0
                sending[path], size = before, size + len(before)
            if sending:
                await editor.call_lua(MODULE, "mark", number, sending)
        except Exception as exc:  # Neovim busy or gone: no signs, nothing else lost
            log.info("review: could not mark %s: %s",
                     f"turn {number}" if number is not None else "the turns kept", exc)

    # bufsync saw a loaded buffer's file change (review.lua sends its text before)

    def _before(self, args: list[Any]) -> None:
        path, before = [*args, None, None][:2]
        if not isinstance(path, str) or not isinstance(before, (str, bytes)) \
                or self.nursery is None:
            return
        data = before.encode("utf-8", "surrogateescape") if isinstance(before, str) else before
        claude_path = self.paths.to_claude(path)
        if claude_path is not None:  # None: outside the map, no Claude there changes it
            self.nursery.start_soon(self._changed_on_disk, claude_path, data)

    async def _changed_on_disk(self, path: str, before: bytes) -> None:
        key, now = self._key(path), time.time()
        if self.turns.owner_of(key) is not None:
            return  # a hook named it: that turn has its text from before
        latest = self.turns.latest_with(key)
        if latest is not None and latest.claude is not None:
            # That change may be a hooked turn's, which ended before Neovim heard so (the
            # states reach it up to Hooks.push_seconds late; a buffer may have followed the
            # writes of several turns at once): then the file is as that turn left it, and
            # the change is not recorded twice.
            change = latest.files[key]
            if change.before == before or (change.after is not None
                                           and await self._read(path) == (change.after, True)):
                return
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
        if self.nursery is not None and args and isinstance(args[0], str):
            self.nursery.start_soon(self._answer, args[0], args[1:])

    async def _answer(self, what: str, args: list[Any]) -> None:
        editor = self.editor
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
        await editor.call_lua(MODULE, "show", payload(self._label(turn), self.in_neovim))
        self.reviewed([turn], turn.number)

    async def _revert(self, editor: Editor, path: str, number: int | None,
                      how: Any) -> None:
        claude_path = self.paths.to_claude(path)
        key = self._key(claude_path) if claude_path is not None else None
        turn = self.turns.get(number) if number is not None else (
            self.turns.latest_with(key) if key is not None else None)
        change = turn.files.get(key) if turn is not None and key is not None else None
        local = self.in_neovim(change.path) if change is not None else None
        if turn is None or change is None or local is None:
            await editor.call_lua(MODULE, "revert", path, None, how)
            return
        await editor.call_lua(MODULE, "revert", path, {
            "number": turn.number, "label": self._label(turn).label, "path": local,
            "before": change.before, "after": change.after,
            # A Claude on another host: the file here must still be what its write left.
            "check": self.paths.confines}, how)


def payload(turn: Turn, in_neovim: Callable[[str], str | None]) -> JSON:
    """A turn as review.lua shows it, in Neovim's paths (``in_neovim``; ``None``: outside the
    map, left out): each file's bytes before and after (``None``: none)."""
    changes = [(in_neovim(c.path), c) for c in turn.files.values()]
    too_big = (in_neovim(path) for path in turn.too_big.values())
    return {**turn.summary(),
            "changes": [{"path": local, "before": c.before, "after": c.after}
                        for local, c in changes if local is not None],
            "too_big": [local for local in too_big if local is not None],
            "dropped": turn.dropped, "max_files": MAX_FILES}
