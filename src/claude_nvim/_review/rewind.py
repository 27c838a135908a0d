"""Rewind: take back every change of Claude's turns N..last (``rewind.lua``: :ClaudeNvimRewind).

The review keeps each turn's files as they were before it and after (:mod:`.turns`); a rewind
of turns N..last is their combined change: each file as it was before the first of them that
changed it, and as the last of them left it. Neovim shows it first as a review (the review's
tab), then puts the files back (``rewind.lua``: never a buffer with unsaved changes, a file
Claude made deleted only if it still holds what Claude wrote).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._feature import JSON, Feature, NotificationHandler
from .._nvim.editor import Editor
from .._nvim.lua import shared_module
from . import ReviewFeature, payload
from .turns import FileChange, Turn

MODULE = "claude_nvim.rewind"
REQUEST = "claude_nvim_rewind"
"""Lua -> server: (number or nil, apply): rewind turns number..last; apply: without preview."""


def combined(turns: list[Turn]) -> Turn:
    """One turn of the changes of ``turns`` (oldest first): each file's before from the first
    that changed it, its after from the last. A file changed and changed back is left out; one
    whose text a turn could not keep is only named (``too_big``)."""
    first, last = turns[0], turns[-1]
    label = (f"turn {first.number}" if first is last
             else f"turns {first.number}-{last.number}")
    turn = Turn(None, label, number=first.number, open=False)
    for each in turns:
        for key, change in each.files.items():
            if key in turn.too_big:
                continue
            if key in turn.files:
                turn.files[key].after = change.after
            else:
                turn.files[key] = FileChange(change.path, change.before, change.after)
        for key, path in each.too_big.items():
            turn.files.pop(key, None)
            turn.too_big[key] = path
    for key in [k for k, f in turn.files.items() if f.before == f.after]:
        del turn.files[key]
    return turn


class RewindFeature(Feature):
    """``claude_nvim.rewind``: :ClaudeNvimRewind, over the review's turns."""

    lua = shared_module(__package__ or "", "rewind")

    def __init__(self, review: ReviewFeature) -> None:
        self.review = review

    def notifications(self) -> Mapping[str, NotificationHandler]:
        return {REQUEST: self._request}

    def options(self, editor: Editor) -> JSON:
        return {"request": REQUEST}

    def _request(self, args: list[Any]) -> None:
        number, apply = [*args, None, None][:2]
        if self.nursery is not None:
            self.nursery.start_soon(self._rewind, number if isinstance(number, int) else None,
                                     apply is True)

    async def _rewind(self, number: int | None, apply: bool) -> None:
        editor = self.editor
        if editor is None:
            return
        kept = list(self.review.turns)
        if not kept:
            await editor.call_lua(MODULE, "refuse", "nothing to rewind: no change of Claude's "
                                  "was recorded yet")
            return
        if number is None:
            number = kept[-1].number
        if not any(t.number == number for t in kept):
            await editor.call_lua(MODULE, "refuse", f"no turn {number} to rewind (kept: "
                                  f"{kept[0].number}-{kept[-1].number})")
            return
        turns = [t for t in kept if t.number is not None and number is not None
                 and t.number >= number]
        working = [t for t in turns if t.open]
        if working:
            await editor.call_lua(MODULE, "refuse", f"turn {working[0].number} is still going: "
                                  "rewind once Claude is done")
            return
        turn = combined(turns)
        await editor.call_lua(MODULE, "apply" if apply else "preview",
                              payload(turn, self.review.in_neovim))
        if not apply:  # shown as a review
            self.review.reviewed(turns, turn.number)
