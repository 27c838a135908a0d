"""A terminal's window size, read and set: what the launch, the holder and the client share
(built-in modules only: the launch loads it before claude starts)."""

from __future__ import annotations

import fcntl
import struct
import termios


def window(fd: int) -> tuple[int, int]:
    """The rows and columns of the terminal at ``fd`` (24x80 if it is none)."""
    try:
        rows, cols, _, _ = struct.unpack(
            "HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
    except OSError:
        return 24, 80
    return rows or 24, cols or 80


def set_window(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
