"""Reading a file Claude is about to change, or has: on the server's own host, from one
descriptor, never blocking on what is not a regular file (a FIFO would hold a thread for good)."""

from __future__ import annotations

import os
import stat


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
        chunks, total = [], 0
        while chunk := os.read(fd, max(info.st_size - total, 0) + 65536):
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
