"""A private OpenSSH server for the remote tests, from Debian's packages: nothing is installed.

    python scripts/sshd_bundle.py [DIR]     prints the path of an sshd that runs

The tests of ``claude-nvim remote`` need a real ``sshd``. With none on the machine
(``/usr/sbin/sshd``), this takes Debian's ``openssh-server`` and the one library it needs that
a machine with the ssh client may lack (``libwrap0``) with ``apt-get download``, unpacks them
with ``dpkg-deb -x`` into DIR (default ``${TMPDIR:-/tmp}/claude-nvim-sshd``) and writes
``DIR/sshd``, which runs the unpacked sshd with the unpacked libraries (``LD_LIBRARY_PATH``:
sshd starts again by its own path for each connection, so a loader trick would not do; the
sessions it starts get an environment of their own). Built once (a few seconds), then reused.
Needs apt (Debian, Ubuntu) and root, as a fresh CI machine has; when the download fails it runs
``apt-get update`` once and tries again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGES = ("openssh-server", "libwrap0")
WRAPPER = """#!/bin/sh
# OpenSSH's sshd from Debian's packages, unpacked by scripts/sshd_bundle.py.
root=$(dirname -- "$(readlink -f -- "$0")")/root
lib=$root/usr/lib/x86_64-linux-gnu
LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec "$root/usr/sbin/sshd" "$@"
"""


def default_directory() -> Path:
    return Path(os.environ.get("TMPDIR") or "/tmp") / "claude-nvim-sshd"


def runs(sshd: Path) -> bool:
    """Whether ``sshd -V`` runs (it prints its version on stderr and exits 0 or 1)."""
    try:
        done = subprocess.run([str(sshd), "-V"], capture_output=True, text=True, timeout=30,
                              check=False)
    except OSError:
        return False
    return "OpenSSH" in done.stderr


def build(directory: Path) -> Path:
    """``directory/sshd``, built if need be. Raises ``RuntimeError`` saying why it cannot."""
    wrapper = directory / "sshd"
    if runs(wrapper):
        return wrapper
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise RuntimeError("no apt-get and dpkg-deb here (not Debian or Ubuntu)")
    if os.geteuid() != 0:
        raise RuntimeError("apt-get download needs root here")
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o755)  # the test's second user runs it
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # pytest-xdist's workers build it once
        if runs(wrapper):
            return wrapper
        with tempfile.TemporaryDirectory(dir=directory) as tmp:
            if not _download(Path(tmp)):
                subprocess.run(["apt-get", "update", "-qq"], check=False,
                               stdout=subprocess.DEVNULL, stderr=sys.stderr)
                if not _download(Path(tmp)):
                    raise RuntimeError(f"apt-get download {' '.join(PACKAGES)} failed")
            root = directory / "root"
            shutil.rmtree(root, ignore_errors=True)
            for deb in sorted(Path(tmp).glob("*.deb")):
                subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
        root.chmod(0o755)
        wrapper.write_text(WRAPPER)
        wrapper.chmod(0o755)
    if not runs(wrapper):
        raise RuntimeError(f"{wrapper} does not run (a library missing?)")
    return wrapper


def _download(where: Path) -> bool:
    # apt drops to its _apt user to download, which cannot write to a private directory.
    with contextlib.suppress(OSError):
        where.chmod(0o777)
    done = subprocess.run(["apt-get", "download", "-q", *PACKAGES], cwd=where, check=False,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return done.returncode == 0 and len(list(where.glob("*.deb"))) == len(PACKAGES)


def main() -> int:
    directory = Path(sys.argv[1]) if len(sys.argv) > 1 else default_directory()
    try:
        print(build(directory))
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        print(f"sshd_bundle: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
