"""The lock file that tells ``claude`` where we listen (docs/protocol.md §3)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

IDE_NAME = "Neovim"


def lock_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """``$CLAUDE_CONFIG_DIR/ide`` when that is set and non-empty, else ``~/.claude/ide``."""
    base = environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")
    return Path(base) / "ide"


def lock_content(pid: int, folders: list[str], token: str) -> dict[str, Any]:
    return {
        "pid": pid,
        "workspaceFolders": folders,
        "ideName": IDE_NAME,
        "transport": "ws",
        "authToken": token,
    }


def write_lock(directory: Path, port: int, content: Mapping[str, Any]) -> Path:
    """Write ``<directory>/<port>.lock`` atomically: private directory, private file.

    The file holds a credential, so the directory is made (or set back to) 0700 and the file
    is born 0600; it appears whole, through ``rename``.
    """
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    path = directory / f"{port}.lock"
    tmp = directory / f".{port}.lock.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(dict(content), f, separators=(",", ":"))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def remove_lock(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _port_refuses(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return False
    except OSError:
        return True


def remove_stale_locks(directory: Path, nvim_pid: int) -> list[Path]:
    """Delete locks a crashed server of this same Neovim left behind.

    Only files naming Neovim, this Neovim's pid, and a port that refuses connections: the CLI
    keeps those (their pid is alive), and nothing else is ours to touch.
    """
    removed = []
    for path in directory.glob("*.lock"):
        try:
            content = json.loads(path.read_text(encoding="utf-8"))
            port = int(path.stem)
        except (OSError, ValueError):
            continue
        if (isinstance(content, dict) and content.get("ideName") == IDE_NAME
                and content.get("pid") == nvim_pid and _port_refuses(port)):
            remove_lock(path)
            removed.append(path)
    return removed


def find_server(cwd: str, environ: Mapping[str, str] = os.environ) -> tuple[int, str]:
    """The port and token of the claude-nvim server to use from ``cwd``, as ``claude`` picks.

    ``$CLAUDE_CODE_SSE_PORT`` (set in Neovim's terminals) names it; otherwise the one live
    Neovim lock whose workspace folders hold ``cwd``. Raises ``LookupError`` saying why not.
    """
    directory = lock_dir(environ)
    if port := environ.get("CLAUDE_CODE_SSE_PORT"):
        try:
            content = json.loads((directory / f"{port}.lock").read_text(encoding="utf-8"))
            return int(port), str(content["authToken"])
        except (OSError, ValueError, KeyError) as exc:
            raise LookupError(f"no claude-nvim server on port {port} (CLAUDE_CODE_SSE_PORT): "
                              f"cannot read its lock file in {directory}: {exc}") from None
    found = []
    for path in directory.glob("*.lock"):
        try:
            content = json.loads(path.read_text(encoding="utf-8"))
            port_number, token = int(path.stem), str(content["authToken"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        folders = content.get("workspaceFolders") or []
        if (content.get("ideName") == IDE_NAME and pid_alive(int(content.get("pid", 0)))
                and any(cwd == f or cwd.startswith(f.rstrip("/") + "/") for f in folders)):
            found.append((port_number, token))
    if len(found) == 1:
        return found[0]
    if not found:
        raise LookupError(f"no claude-nvim server is running for {cwd}: start one in Neovim "
                          "(:terminal claude-nvim serve)")
    ports = ", ".join(str(p) for p, _ in sorted(found))
    raise LookupError(f"several claude-nvim servers serve {cwd} (ports {ports}): "
                      "set CLAUDE_CODE_SSE_PORT to choose one")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
