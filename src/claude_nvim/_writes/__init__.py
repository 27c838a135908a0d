"""Files written on Claude's host reach Neovim's buffers when Neovim runs elsewhere.

Through a shared mount (a container's bind mount) Neovim sees the writes itself (bufsync). When
its buffer is another copy (sshfs, whose cache lags; netrw's ``scp://``; oil-ssh), it cannot:
so a server for a Neovim on another host (``serve --remote``) reports each write of a file
Neovim has open, with the file's bytes, and Neovim's half (``writes.lua``) shows them. What it
reports: an accepted diff's file once the CLI has written it (close_tab), every write its watcher
sees in the directories of Neovim's files (Linux's inotify: auto and acceptEdits modes write
without a diff), and whatever calls :meth:`WritesFeature.written` (``ToolContext.written``:
the hooks' PostToolUse, once they are there).

With a path map the far side is less trusted than Neovim's host: a write it reports is shown
only for a file inside a mapped folder (normalised, no symlink leading out here); any other is
refused and changes nothing (:meth:`WritesFeature.show`, the one door).
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Mapping
from typing import Any

import trio

from .._feature import JSON, Feature, NotificationHandler
from .._nvim.editor import Editor
from .._nvim.lua import shared_module
from .._paths import OutsideMap
from .watcher import Watcher

log = logging.getLogger(__name__)

MODULE = "claude_nvim.writes"
NOTIFICATION = "claude_nvim_files"
GATHER_SECONDS = 0.05
"""A write's burst of events (and an accepted diff seen twice) is reported once."""


class WritesFeature(Feature):
    """``claude_nvim.writes``: Neovim tells which files it has open; each write of one of them
    here (``enabled``: Neovim runs elsewhere) is shown in its buffer."""

    lua = shared_module(__name__, "writes")

    def __init__(self, enabled: bool, max_file_bytes: int) -> None:
        self.enabled = enabled
        self.max_file_bytes = max_file_bytes
        self._watcher = Watcher() if enabled else None
        self._open: set[str] = set()
        """Neovim's open files, by their paths here."""
        self._due: set[str] = set()
        self._editor: Editor | None = None
        self._nursery: trio.Nursery | None = None

    def notifications(self) -> Mapping[str, NotificationHandler]:
        return {NOTIFICATION: self._files}

    def options(self, editor: Editor) -> JSON:
        return {"event": NOTIFICATION, "watch": self.enabled}

    async def start(self, editor: Editor, nursery: trio.Nursery) -> None:
        self._editor, self._nursery = editor, nursery
        await super().start(editor, nursery)
        if self._watcher is not None:
            if self._watcher.available:
                nursery.start_soon(self._watch, self._watcher)
            else:
                log.info("no file watcher here (inotify is Linux's): accepted diffs still "
                         "reach Neovim, writes in auto mode do not")

    def written(self, path: str) -> None:
        """The file at ``path`` (here, on Claude's host) was written: show it in Neovim."""
        try:
            path = self.paths.claude_path(path)
        except OutsideMap as why:
            log.warning("a write refused, nothing shown: %s", why)
            return
        if self.enabled and self._nursery is not None and path not in self._due:
            self._due.add(path)
            self._nursery.start_soon(self._report, path)

    def _files(self, args: list[Any]) -> None:
        names = args[0] if args and isinstance(args[0], list) else []
        self._open = {path for name in names
                      if (path := self.paths.to_claude(str(name))) is not None}
        if self._watcher is not None:
            self._watcher.watch_only({os.path.dirname(path) for path in self._open
                                      if path.startswith("/")})

    async def _watch(self, watcher: Watcher) -> None:
        async for path in watcher.written():
            if path in self._open:
                self.written(path)

    async def _report(self, path: str) -> None:
        await trio.sleep(GATHER_SECONDS)
        self._due.discard(path)
        data = await trio.to_thread.run_sync(self._read, path)
        if data is not None:
            await self.show(path, data)

    async def show(self, path: str, data: bytes) -> str | None:
        """Show ``data``, the bytes of Claude's file ``path`` just written, in Neovim's buffer of
        it: the one door of a reported write. With a map, a path outside it (or a symlink there
        leading out) is refused: nothing changes, the log says why, and the answer is None."""
        try:
            local = self.paths.to_neovim(self.paths.claude_path(path))
        except OutsideMap as why:
            log.warning("a write refused, nothing shown: %s", why)
            return None
        if self._editor is None or len(data) > self.max_file_bytes:
            return None
        try:
            shown: str = await self._editor.call_lua(MODULE, "written", local, data)
        except Exception as exc:  # Neovim busy or gone: normal life
            log.debug("could not show %s in Neovim: %s", path, exc)
            return None
        log.debug("%s written here: %s in Neovim", path, shown)
        return shown

    def _read(self, path: str) -> bytes | None:
        try:  # without waiting: a FIFO would hold the read until a writer came
            with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    return None
                data = f.read(self.max_file_bytes + 1)
        except OSError:
            return None  # gone again, or not ours to read
        if len(data) > self.max_file_bytes:
            log.info("%s is over the file size limit: Neovim is not sent it", path)
            return None
        return data

    def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.close()
