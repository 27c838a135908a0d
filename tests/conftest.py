from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from helpers import Processes, attach_ui

pytest_plugins = ["claude_nvim.testing", "pytester", "plugin_kit", "leftovers"]


@pytest.fixture(autouse=True)
def _no_lua_errors(no_lua_errors):
    """Every test fails on an error of Lua in Neovim that only the server's log would show
    (claude_nvim.testing's no_lua_errors); ``@pytest.mark.lua_errors`` where it is the point."""


@pytest.fixture
async def processes() -> AsyncIterator[Processes]:
    """Start a process of the test's own: ``await processes.start(command, **options)``; it
    and what it starts end with the test, pass or fail (helpers.Processes)."""
    started = Processes()
    try:
        yield started
    finally:
        await started.end()


@pytest.fixture
def model(model_client):
    """A client of the model endpoint (claude_nvim.testing's model_client)."""
    return model_client


@pytest.fixture
def ui_size() -> tuple[int, int]:
    """The columns and lines of ``ui``: a small terminal, where messages are wide."""
    return 80, 24


@pytest.fixture
async def ui(nvim, ui_size):
    """``nvim`` with a UI attached, as a user's terminal (helpers.attach_ui): prompts and
    focus behave for real."""
    await attach_ui(nvim, *ui_size)
    return nvim


@pytest.fixture
def plant_bogus_locks():
    """Plant, in a lock directory, files that no reader may hang on, crash on or trust; each
    would name ``folder`` and ``pid`` if it were believed. Returns their paths."""
    def plant(directory: Path, *, folder: Path, pid: int) -> list[Path]:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        lock = {"pid": pid, "workspaceFolders": [str(folder)], "ideName": "Neovim",
                "transport": "ws", "authToken": "planted"}
        os.mkfifo(directory / "fifo.lock")  # opening it waits for a writer
        (directory / "1.lock").symlink_to("/dev/zero")  # endless
        elsewhere = directory.parent / "elsewhere.json"
        elsewhere.write_text(json.dumps(lock))
        (directory / "2.lock").symlink_to(elsewhere)
        malformed = {"3": {**lock, "pid": "abc"}, "4": {**lock, "workspaceFolders": [1, 2]},
                     "5": {k: v for k, v in lock.items() if k != "pid"}, "6": {**lock, "pid": 0},
                     "7": {**lock, "pid": 2**40}}
        for port, content in malformed.items():
            (directory / f"{port}.lock").write_text(json.dumps(content))
        (directory / "8.lock").write_text(" " * 2**21 + json.dumps(lock))  # too big to be one
        planted = [directory / name for name in ("fifo.lock", *(f"{n}.lock" for n in range(1, 9)))]
        if os.geteuid() == 0:  # someone else's
            planted.append(directory / "9.lock")
            planted[-1].write_text(json.dumps(lock))
            os.chown(planted[-1], 65534, 65534)
        return planted
    return plant


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


@pytest.fixture
def servers() -> Iterator[set[int]]:
    """The servers' pids a test saw: killed (SIGKILL) at its end, pass or fail."""
    seen: set[int] = set()
    yield seen
    for pid in seen:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
