"""The per-project directory: where what outlives a Neovim in a project keeps its files.

``<root>/<key>``: the root is ``$XDG_RUNTIME_DIR/claude-nvim`` when that is a directory, else
``${TMPDIR:-/tmp}/claude-nvim-<uid>``; the key is the first 16 hex digits of the sha256 of the
project's real path (Neovim's working directory). Both are ours alone, 0700: a root that is a
symlink, another user's, or open to the group or others is refused (someone could put a socket
there that a Neovim then attaches to). ``lua/claude_nvim/project.lua`` computes the same path.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path


class UnsafeDirectory(OSError):
    """A directory that is not this user's alone."""


def root() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "claude-nvim"
    return Path(os.environ.get("TMPDIR") or "/tmp") / f"claude-nvim-{os.getuid()}"


def key(cwd: str) -> str:
    return hashlib.sha256(os.path.realpath(cwd).encode()).hexdigest()[:16]


def project_dir(cwd: str) -> Path:
    """The directory of the project at ``cwd``, made (0700) if need be; UnsafeDirectory if it
    or its root is not this user's alone."""
    top = root()
    _own_dir(top)
    directory = top / key(cwd)
    _own_dir(directory)
    return directory


def remove_if_empty(directory: Path) -> None:
    """The project's ``directory``, then its root, each removed if nothing is left in it: what
    the last one out (a holder, a lingering server) does. One about to be used again is made
    again by whoever uses it."""
    with contextlib.suppress(OSError):
        directory.rmdir()
        directory.parent.rmdir()


def _own_dir(path: Path) -> None:
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeDirectory(f"{path} is not a directory (a symlink?)")
    if info.st_uid != os.getuid():
        raise UnsafeDirectory(f"{path} belongs to uid {info.st_uid}, not to us")
    if info.st_mode & 0o077:
        raise UnsafeDirectory(f"{path} is open to others (mode {info.st_mode & 0o777:o})")


def write_record(path: Path, record: Mapping[str, object]) -> None:
    """``record`` as JSON in ``path``, 0600, whole or not at all: a new file of a random name
    beside it (never one planted there) renamed onto ``path``. The project directory's records
    and the lock file (``_lockfile.write_lock``) are written so."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(dict(record), out, separators=(",", ":"))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
