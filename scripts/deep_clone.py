"""Run tests from a copy of this checkout under a deep directory, as a user's clone may be.

    python scripts/deep_clone.py [pytest arguments]

A path goes into messages (the Python the plugin runs, a file's name), and a message wider than
Neovim's command line used to stop it at a hit-enter prompt, which holds every RPC call: the
suite failed from a clone at a path of about 50 characters. This copies the checkout's files
(tracked ones, as they are now; no symlinks) to a directory of at least :data:`DEPTH`
characters, makes a venv there with the project installed (``.[test]``), and runs pytest there:
by default the tests of the Neovim plugin, the user's side and the diffs. tox's ``deep``
environment runs it. The exit status is pytest's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEPTH = 150
"""Characters in the path of the copy, at least."""
TESTS = ["tests/test_plugin.py", "tests/test_user_side.py", "tests/test_diffs.py"]


def tracked_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                            check=True).stdout
    return [name for name in listed.decode().split("\0") if name]


def copy_checkout(to: Path) -> None:
    for name in tracked_files():
        source = ROOT / name
        if source.is_symlink() or not source.is_file():  # deleted meanwhile, or a link
            continue
        (to / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, to / name)


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="claude-nvim-deep-") as tmp:
        clone = Path(tmp)
        while len(str(clone)) < DEPTH:
            clone /= "a-directory-with-a-long-name"
        clone /= "claude-nvim"
        copy_checkout(clone)
        print(f"deep_clone: {len(str(clone))} characters: {clone}", flush=True)
        venv = clone / ".venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-e",
                        ".[test]"], cwd=clone, check=True)
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        return subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", *(argv or TESTS)],
                              cwd=clone, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
