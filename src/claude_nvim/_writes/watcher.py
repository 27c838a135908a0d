"""Which files are written in some directories, from Linux's inotify (no dependency: libc
through ctypes); elsewhere :attr:`Watcher.available` is False and it watches nothing."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import struct
import sys
from collections.abc import AsyncIterator, Iterable

import trio

log = logging.getLogger(__name__)

IN_CLOSE_WRITE, IN_MOVED_TO, IN_Q_OVERFLOW, IN_IGNORED = 0x8, 0x80, 0x4000, 0x8000
IN_NONBLOCK, IN_CLOEXEC = 0o4000, 0o2000000
WRITTEN = IN_CLOSE_WRITE | IN_MOVED_TO
"""A file written and closed, or one renamed into place (an atomic save)."""
HEADER = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)


class Watcher:
    """The directories to watch (:meth:`watch_only`) and the files written in them
    (:meth:`written`). One inotify descriptor, one watch per directory; nothing when idle."""

    def __init__(self) -> None:
        self._fd = -1
        self._libc: ctypes.CDLL | None = None
        self._by_directory: dict[str, int] = {}
        self._by_watch: dict[int, str] = {}
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):
                libc = ctypes.CDLL(None, use_errno=True)
                fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
                if fd >= 0:
                    self._libc, self._fd = libc, fd

    @property
    def available(self) -> bool:
        return self._fd >= 0

    def watch_only(self, directories: Iterable[str]) -> None:
        """Watch these directories, and no others."""
        if self._libc is None:
            return
        wanted = set(directories)
        for directory in set(self._by_directory) - wanted:
            watch = self._by_directory.pop(directory)
            self._by_watch.pop(watch, None)
            self._libc.inotify_rm_watch(self._fd, watch)
        for directory in wanted - set(self._by_directory):
            watch = self._libc.inotify_add_watch(self._fd, os.fsencode(directory), WRITTEN)
            if watch < 0:  # gone, or not ours to read: nothing to see there
                log.debug("cannot watch %s: %s", directory, os.strerror(ctypes.get_errno()))
                continue
            self._by_directory[directory] = watch
            self._by_watch[watch] = directory

    async def written(self) -> AsyncIterator[str]:
        """The paths of the files written in the watched directories, as they are."""
        if self._fd < 0:
            return
        while True:
            await trio.lowlevel.wait_readable(self._fd)
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                continue
            at = 0
            while at + HEADER.size <= len(data):
                watch, mask, _cookie, size = HEADER.unpack_from(data, at)
                name = data[at + HEADER.size:at + HEADER.size + size].rstrip(b"\0")
                at += HEADER.size + size
                if mask & IN_Q_OVERFLOW:
                    log.warning("too many file events at once: some writes were not seen")
                elif mask & IN_IGNORED:  # the directory went away
                    directory = self._by_watch.pop(watch, None)
                    if directory is not None:
                        self._by_directory.pop(directory, None)
                elif mask & WRITTEN and name and watch in self._by_watch:
                    yield os.path.join(self._by_watch[watch], os.fsdecode(name))

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError, RuntimeError):  # RuntimeError: outside trio
                trio.lowlevel.notify_closing(self._fd)
            os.close(self._fd)
            self._fd = -1
        self._by_directory.clear()
        self._by_watch.clear()
