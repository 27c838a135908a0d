"""Run a command (the test suite) against another Neovim version, or say it was skipped.

    python scripts/with_nvim.py 0.10 pytest -q

tox's ``nvim010`` and ``nvim012`` environments run this. The Neovim is, in this order:
``$CLAUDE_NVIM_NVIM_010`` (``_012``); the bundle at :func:`bundle` (where
``shared/tools/nvim_bundle.sh 0.10`` leaves it by default); on CI (``CI=true``, root,
``shared/`` beside the checkout) one that script builds now (about a minute, Debian packages
only). Otherwise the command is skipped, with a message saying so, and the exit status is
:data:`SKIPPED` (toxfile.py makes tox say SKIP). The command runs with ``CLAUDE_NVIM_NVIM`` set
to that Neovim.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BUILD_SCRIPT = Path(__file__).resolve().parents[1].parent / "shared" / "tools" / "nvim_bundle.sh"
SKIPPED = 77
"""The exit status when there is no such Neovim (toxfile.py's)."""


def bundle(want: str) -> Path:
    """Where a Neovim bundle of version ``want`` ("0.10") is: ``${TMPDIR:-/tmp}/nvim-bundles/
    0.10/bin/nvim``, the default of ``shared/tools/nvim_bundle.sh``. The one rule for it:
    README.md and tox.ini say the same."""
    return Path(os.environ.get("TMPDIR") or "/tmp") / "nvim-bundles" / want / "bin" / "nvim"


def version_of(nvim: str) -> str | None:
    """``nvim --version``'s version ("0.10.4"), or None when it does not run."""
    try:
        first = subprocess.run([nvim, "--version"], capture_output=True, text=True, timeout=30,
                               check=True).stdout.split("\n", 1)[0]
    except (OSError, subprocess.SubprocessError):
        return None
    return first.removeprefix("NVIM v") if first.startswith("NVIM v") else None


def find(want: str) -> tuple[str | None, str]:
    """The Neovim ``want`` ("0.10") to test with, or None and why there is none."""
    variable = "CLAUDE_NVIM_NVIM_" + want.replace(".", "")
    if given := os.environ.get(variable):
        found = version_of(given)
        if found is None or not found.startswith(want + "."):
            sys.exit(f"with_nvim: ${variable} is {given}, which is not a Neovim {want} "
                     f"(it says {found})")
        return given, ""
    if version_of(str(bundle(want))):
        return str(bundle(want)), ""
    if os.environ.get("CI") == "true" and BUILD_SCRIPT.exists() and os.geteuid() == 0:
        built = subprocess.run(["bash", str(BUILD_SCRIPT), want], stdout=subprocess.PIPE,
                               text=True, check=False)
        if built.returncode == 0:
            return built.stdout.split()[-1], ""  # it prints the path last
        return None, f"{BUILD_SCRIPT} {want} failed (exit status {built.returncode})"
    return None, (f"no ${variable} and no {bundle(want)}; build one (as root) with "
                  f"shared/tools/nvim_bundle.sh {want}, or set ${variable}")


def main() -> int:
    want, command = sys.argv[1], sys.argv[2:]
    nvim, why = find(want)
    if nvim is None:
        print(f"\nSKIPPED: the tests against Neovim {want} did not run: {why}\n", flush=True)
        return SKIPPED
    print(f"with_nvim: Neovim {version_of(nvim)} ({nvim})", flush=True)
    return subprocess.run(command, env={**os.environ, "CLAUDE_NVIM_NVIM": nvim},
                          check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
