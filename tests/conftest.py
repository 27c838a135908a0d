from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["claude_nvim.testing"]


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A named pipe. A Neovim stuck opening it (no writer ever comes; not even SIGTERM ends
    that) is let go at teardown: request it after ``nvim`` so that it is torn down first."""
    path = tmp_path / "pipe.py"
    os.mkfifo(path)
    yield path
    with contextlib.suppress(OSError):  # ENXIO: no one is reading it, as it should be
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


@pytest.fixture
def one_mb_file_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Servers started from now on refuse to open files over 1 MB: use it before ``app``,
    as ``@pytest.mark.usefixtures("one_mb_file_limit")``."""
    monkeypatch.setenv("CLAUDE_NVIM_MAX_FILE_MB", "1")


@pytest.fixture
def big_file(tmp_path: Path) -> Path:
    """A 1.5 MB text file (40,000 lines of 40 bytes)."""
    path = tmp_path / "big.txt"
    path.write_text("".join(f"line {i:>8} {'x' * 25}\n" for i in range(40_000)))
    return path
