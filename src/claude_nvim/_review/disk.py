"""Reading a file Claude is about to change, or has: on the server's own host, from one
descriptor, never blocking on what is not a regular file (a FIFO would hold a thread for good)."""

from __future__ import annotations

import os
import stat

MAX_PATH = 4096
"""A longer name is no file's (Linux's PATH_MAX): a hook naming one is not kept."""
CHUNK = 1 << 20
"""Bytes read at once."""


class Unreadable(Exception):
    """A file whose text is not kept: not a regular file, over the size limit, or unreadable."""


def read(path: str, limit: int) -> bytes | None:
    """The bytes of the file at ``path``, ``None`` when there is none. Raises
    :class:`Unreadable`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise Unreadable(f"{path}: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable(f"{path} is not a regular file")
        if info.st_size > limit:  # refused from its size, not read (a 200 MB Write took 1 s)
            raise Unreadable(f"{path} is over {limit} bytes")
        # Bounded reads: the file may grow while it is read; at most limit + 1 bytes are.
        chunks, total = [], 0
        while total <= limit and (chunk := os.read(fd, min(CHUNK, limit + 1 - total))):
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise Unreadable(f"{path} is over {limit} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise Unreadable(f"{path}: {exc.strerror}") from exc
    finally:
        os.close(fd)


def key(path: str) -> str:
    """What one file is known by: its real path (one file under two names is one)."""
    return os.path.realpath(path)
