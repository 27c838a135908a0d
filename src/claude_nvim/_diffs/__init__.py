"""Diff review, shared by openDiff, close_tab, closeAllDiffTabs and the diff commands.

The server keeps a :class:`DiffRegistry` of the diffs it opened; its Lua half
(``diffs.lua``) shows each as a tab (target file | editable proposal) and reports the
user's verdict exactly once.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import trio

from .._feature import JSON, Feature, NotificationHandler
from .._nvim.editor import Editor
from .._nvim.lua import shared_module

MODULE = "claude_nvim.diffs"
NOTIFICATION = "claude_nvim_diff"

Status = Literal["pending", "accepted", "rejected"]

@dataclass
class Diff:
    """One proposed change under review, owned by the connection that opened it."""

    id: int
    tab_name: str
    owner: int
    contents: str
    status: Status = "pending"
    text: str | None = None
    """The accepted text, with the user's edits."""
    path: str = ""
    """The file, as the CLI named it (Claude's path)."""
    done: trio.Event = field(default_factory=trio.Event)


class DiffRegistry:
    def __init__(self) -> None:
        self._diffs: dict[int, Diff] = {}
        self._ids = itertools.count(1)

    def open(self, tab_name: str, owner: int, contents: str) -> Diff:
        """Register a new pending diff; an older pending one with the same name is rejected."""
        for old in self._diffs.values():
            if old.tab_name == tab_name and old.status == "pending":
                self.settle(old.id, "rejected")
        diff = Diff(next(self._ids), tab_name, owner, contents)
        self._diffs[diff.id] = diff
        return diff

    def settle(self, diff_id: int, status: Status, result: Any = None) -> None:
        """Record the verdict on a pending diff (from Neovim, a tool, or a disconnect)."""
        diff = self._diffs.get(diff_id)
        if diff is None or diff.status != "pending":
            return
        diff.status = status
        if status == "accepted":
            diff.text = _accepted_text(diff.contents, result)
        # An accepted diff stays until close_tab: it keeps no megabytes, whose freeing then
        # would hold up the answer.
        diff.contents = ""
        diff.done.set()

    def find(self, tab_name: str) -> Diff | None:
        matches = [d for d in self._diffs.values() if d.tab_name == tab_name]
        return matches[-1] if matches else None

    def pending(self) -> list[Diff]:
        return [d for d in self._diffs.values() if d.status == "pending"]

    def owned_by(self, owner: int) -> list[Diff]:
        return [d for d in self._diffs.values() if d.owner == owner]

    def forget(self, diff_id: int) -> None:
        self._diffs.pop(diff_id, None)


def _newline(contents: str) -> str:
    """CRLF when every line ends so; mixed files keep their ``\r`` in the lines."""
    crlf = contents.count("\r\n")
    return "\r\n" if crlf and crlf == contents.count("\n") else "\n"


def split_lines(contents: str) -> list[str]:
    """Buffer lines for ``contents``; CRLF files show without ``^M``."""
    lines = contents.split(_newline(contents))
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


def _accepted_text(contents: str, result: Any) -> str:
    """The final text: the proposal byte for byte unless the user edited it."""
    if not isinstance(result, dict) or not result.get("edited"):
        return contents
    newline = _newline(contents)
    text = newline.join(str(line) for line in result.get("lines") or [])
    return text + newline if contents.endswith("\n") else text


class DiffsFeature(Feature):
    """``claude_nvim.diffs``: the diff tabs openDiff opens; the user's verdicts settle them in
    ``registry``, and a client's diffs close when it goes."""

    lua = shared_module(__name__, "diffs")

    def __init__(self, registry: DiffRegistry) -> None:
        self.registry = registry

    def notifications(self) -> Mapping[str, NotificationHandler]:
        return {NOTIFICATION: self._settle}

    def options(self, editor: Editor) -> JSON:
        return {"event": NOTIFICATION}

    def _settle(self, args: list[Any]) -> None:
        diff_id, status, result = [*args, None, None, None][:3]
        if isinstance(diff_id, int) and status in ("accepted", "rejected"):
            self.registry.settle(diff_id, status, result)

    async def disconnected(self, editor: Editor, client_id: int) -> None:
        # Pending diffs were rejected and closed when their calls were cancelled; accepted
        # ones still wait for a close_tab that will never come.
        for diff in self.registry.owned_by(client_id):
            await forget_and_close(editor, self.registry, diff)


async def forget_and_close(editor: Editor, registry: DiffRegistry, diff: Diff, *,
                           wait: bool = True) -> None:
    """Forget ``diff`` and close its tab in Neovim (the target's buffer follows what the CLI
    writes to it, as every buffer does: bufsync). ``wait``: for Neovim, 2 s at most, even when
    cancelled; else the close is sent and this returns at once."""
    registry.forget(diff.id)
    if not wait:
        editor.call_lua_soon(MODULE, "close", diff.id)
        return
    with trio.move_on_after(2, shield=True), contextlib.suppress(Exception):
        await editor.call_lua(MODULE, "close", diff.id, timeout=2)


async def dismiss(editor: Editor, registry: DiffRegistry, diff: Diff) -> None:
    """What the CLI's close_tab and closeAllDiffTabs do to one of its diffs: a pending one is
    rejected (openDiff's handler then closes it); an accepted one is closed in the background
    (the CLI waits on their answer; its write lands meanwhile)."""
    if diff.status == "pending":
        registry.settle(diff.id, "rejected")
    else:
        await forget_and_close(editor, registry, diff, wait=False)
