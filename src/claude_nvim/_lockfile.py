"""The lock file that tells ``claude`` where we listen (docs/protocol.md §3).

The lock directory is shared with every IDE and with anything else that can write there, so
what we read from it is checked before it is believed: the directory must be a real directory
of this user's, a lock is read only from a regular file of this user's, of sane size, without
following a symlink or waiting on a FIFO (:func:`read_locks`), and a lock's port gets no token
before the server there proves it is the one that wrote it (:func:`proves_token`).
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import json
import logging
import os
import secrets
import socket
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._project import write_record
from ._wire.constants import CHALLENGE_HEADER, PROOF_HEADER, proof

log = logging.getLogger(__name__)

IDE_NAME = "Neovim"
START_ONE = "start one in Neovim (:terminal claude-nvim serve)"
MAX_LOCK_BYTES = 2**20
"""Ours are a few hundred bytes; a bigger file is not a lock (and /dev/zero never ends)."""


class UnsafeLockDirectory(OSError):
    """The lock directory is a symlink, not a directory, or someone else's."""


@dataclass(frozen=True)
class Lock:
    """A well-formed claude-nvim lock: ``ideName`` "Neovim" (or "Neovim · project"), every
    field of the right type."""

    path: Path
    port: int
    pid: int
    folders: tuple[str, ...]
    token: str
    name: str = IDE_NAME


def lock_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """``$CLAUDE_CONFIG_DIR/ide`` when that is set and non-empty, else ``~/.claude/ide``."""
    base = environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")
    return Path(base) / "ide"


def lock_content(pid: int, folders: list[str], token: str,
                 name: str = IDE_NAME) -> dict[str, Any]:
    return {
        "pid": pid,
        "workspaceFolders": folders,
        "ideName": name,
        "transport": "ws",
        "authToken": token,
    }


def ide_name(folders: list[str], directory: Path, port: int) -> str:
    """How claude's ``/ide`` lists this Neovim: "Neovim · <project>", the project being the
    first workspace folder (Neovim's cwd). ``/ide`` cannot tell apart two entries of one name
    and one folder (two Neovims on one project): with another live lock of that name in
    ``directory``, the name takes the lowest number free, "Neovim · project (2)"."""
    project = os.path.basename(folders[0].rstrip("/")) if folders else ""
    base = f"{IDE_NAME} · {project}" if project else IDE_NAME
    try:
        taken = {lock.name for lock in read_locks(directory)
                 if lock.port != port and pid_alive(lock.pid)}
    except OSError:  # the lock cannot be written there either: that says why
        taken = set()
    name, number = base, 1
    while name in taken:
        number += 1
        name = f"{base} ({number})"
    return name


_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)  # POSIX only, as are symlink tricks and FIFOs
_NO_WAIT = getattr(os, "O_NONBLOCK", 0)
_MY_UID = os.geteuid() if hasattr(os, "geteuid") else None


def check_directory(directory: Path) -> None:
    """Raise :class:`UnsafeLockDirectory` unless ``directory`` is a directory of this user's:
    through a symlink, ``chmod`` and new files would land in its target.

    By path: whoever could swap it between this and its use can write its parent, your
    ``CLAUDE_CONFIG_DIR``. ``FileNotFoundError`` if there is none.
    """
    info = os.lstat(directory)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        what = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a directory"
    elif _MY_UID is not None and info.st_uid != _MY_UID:
        what = f"owned by uid {info.st_uid}, not by you"
    else:
        return
    raise UnsafeLockDirectory(
        f"the lock directory {directory} is {what}: remove it (claude-nvim makes a private one) "
        "or set CLAUDE_CONFIG_DIR to a directory of yours")


def private_directory(directory: Path) -> None:
    """Make ``directory``, or check it (:class:`UnsafeLockDirectory`) and set it back to 0700."""
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=0o700, parents=True)
    check_directory(directory)
    os.chmod(directory, 0o700)


def write_private(directory: Path, name: str, text: str) -> Path:
    """Write ``text`` to a new file ``directory/name``, born 0600, in a private ``directory``
    (:func:`private_directory`). The file is never one that was there before: no planted file
    or symlink gets the secret.
    """
    private_directory(directory)
    path = directory / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    return path


def write_lock(directory: Path, port: int, content: Mapping[str, Any]) -> Path:
    """Write ``<directory>/<port>.lock`` atomically: private directory, private file.

    The file holds a credential, so the directory is made (or set back to) 0700 and the file
    is born 0600; it appears whole, through ``rename`` (:func:`_project.write_record`).
    """
    private_directory(directory)
    path = directory / f"{port}.lock"
    write_record(path, content)
    return path


def remove_lock(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def read_locks(directory: Path) -> list[Lock]:
    """The claude-nvim locks in ``directory``; none if it does not exist.

    Raises :class:`UnsafeLockDirectory`. Anything that is not a well-formed lock in a regular
    file of this user's, of at most :data:`MAX_LOCK_BYTES`, is skipped (logged at debug level):
    it is opened without following a symlink and without blocking (a FIFO would wait forever
    for a writer), and checked on the open file.
    """
    try:
        check_directory(directory)
    except FileNotFoundError:
        return []
    locks = (_read_lock(path) for path in sorted(directory.glob("*.lock")))
    return [lock for lock in locks if lock is not None]


def _read_lock(path: Path) -> Lock | None:
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | _NO_FOLLOW | _NO_WAIT), "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode) or (_MY_UID is not None and info.st_uid != _MY_UID):
                log.debug("skipped %s: not a regular file of this user's", path)
                return None
            data = f.read(MAX_LOCK_BYTES + 1)  # not st_size: the file may be growing
    except OSError as exc:  # ELOOP: a symlink
        log.debug("skipped %s: %s", path, exc)
        return None
    if len(data) > MAX_LOCK_BYTES:
        log.debug("skipped %s: over %d bytes", path, MAX_LOCK_BYTES)
        return None
    try:
        content = json.loads(data)
    except ValueError:
        log.debug("skipped %s: not JSON", path)
        return None
    name = content.get("ideName") if isinstance(content, dict) else None
    if not isinstance(name, str) or not (name == IDE_NAME or name.startswith(f"{IDE_NAME} · ")):
        return None  # another IDE's
    pid, folders, token = (content.get(k) for k in ("pid", "workspaceFolders", "authToken"))
    port = int(path.stem) if path.stem.isascii() and path.stem.isdigit() else 0
    if (not 0 < port < 65536 or type(pid) is not int or pid <= 0 or not isinstance(folders, list)
            or not all(isinstance(f, str) for f in folders)
            or not isinstance(token, str) or not token):
        log.debug("skipped %s: a malformed lock (port, pid, workspaceFolders or authToken)", path)
        return None
    return Lock(path, port, pid, tuple(folders), token, name)


def proves_token(port: int, token: str, timeout: float = 2.0) -> bool:
    """Whether what listens on 127.0.0.1:``port`` proves it is the server holding ``token``.

    A lock can outlive its server (a server killed with SIGKILL leaves a lock whose pid,
    Neovim's, is alive), and whatever listens on that port next must not get the token or the
    traffic. So before the token is sent anywhere, the port is asked, without it: a WebSocket
    upgrade with a random challenge, which a claude-nvim server refuses with HMAC-SHA256(token,
    challenge) (:func:`._wire.constants.proof`). Only a holder of the token can answer; an
    old answer is worthless for a new challenge. Proof of identity, not of the future: the
    server may still die between this and the real connection.
    """
    challenge = secrets.token_hex(16).encode()
    request = b"\r\n".join([
        b"GET / HTTP/1.1", b"Host: 127.0.0.1:%d" % port, b"Upgrade: websocket",
        b"Connection: Upgrade", b"Sec-WebSocket-Version: 13",
        b"Sec-WebSocket-Key: " + base64.b64encode(secrets.token_bytes(16)),
        CHALLENGE_HEADER + b": " + challenge, b"", b""])
    deadline = time.monotonic() + timeout
    answer = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(request)
            while b"\r\n\r\n" not in answer and len(answer) < 16384:
                s.settimeout(max(deadline - time.monotonic(), 0.001))
                if not (chunk := s.recv(4096)):
                    break
                answer += chunk
    except OSError:  # refused, reset, timed out
        return False
    expected = proof(token, challenge)
    for line in answer.partition(b"\r\n\r\n")[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == PROOF_HEADER and hmac.compare_digest(value.strip(), expected):
            return True
    return False


def remove_stale_locks(directory: Path, nvim_pid: int) -> list[Path]:
    """Delete locks a crashed server of this same Neovim left behind.

    Only locks naming Neovim and this Neovim's pid, whose port does not prove it holds their
    token (:func:`proves_token`): the CLI keeps those (their pid is alive), and nothing else is
    ours to touch.
    """
    removed = []
    for lock in read_locks(directory):
        if lock.pid == nvim_pid and not proves_token(lock.port, lock.token, timeout=1.0):
            remove_lock(lock.path)
            removed.append(lock.path)
    return removed


def find_server(cwd: str, environ: Mapping[str, str] = os.environ) -> tuple[int, str]:
    """The port and token of the claude-nvim server to use from ``cwd``, as ``claude`` picks.

    ``$CLAUDE_CODE_SSE_PORT`` (set in Neovim's terminals) names it; otherwise the one live
    Neovim lock whose workspace folders hold ``cwd``. Live: its pid is alive and its server
    proves it holds the lock's token (:func:`proves_token`). Raises ``LookupError`` saying why
    not.
    """
    directory = lock_dir(environ)
    try:
        locks = read_locks(directory)
    except OSError as exc:  # UnsafeLockDirectory among them
        raise LookupError(str(exc)) from None
    if port := environ.get("CLAUDE_CODE_SSE_PORT"):
        named = [lock for lock in locks if str(lock.port) == port]
        if not named:
            raise LookupError(f"no claude-nvim server on port {port} (CLAUDE_CODE_SSE_PORT): "
                              f"no readable claude-nvim lock file for it in {directory}")
        if not _live(named[0]):
            raise LookupError(f"no claude-nvim server on port {port} (CLAUDE_CODE_SSE_PORT): "
                              f"nothing there proves it wrote {named[0].path}; "
                              f"is it still running? {START_ONE}")
        return named[0].port, named[0].token
    found = [(lock.port, lock.token) for lock in locks
             if any(cwd == f or cwd.startswith(f.rstrip("/") + "/") for f in lock.folders)
             and _live(lock)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise LookupError(f"no claude-nvim server is running for {cwd}: {START_ONE}")
    ports = ", ".join(str(p) for p, _ in sorted(found))
    raise LookupError(f"several claude-nvim servers serve {cwd} (ports {ports}): "
                      "set CLAUDE_CODE_SSE_PORT to choose one")


def _live(lock: Lock) -> bool:
    return pid_alive(lock.pid) and proves_token(lock.port, lock.token)


def pid_alive(pid: int) -> bool:
    if pid <= 0:  # 0 and -1 would signal our own process group, or every process
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True
