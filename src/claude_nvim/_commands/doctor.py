"""``claude-nvim doctor``: check what claude-nvim needs, and say what to fix."""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio

from .. import __version__
from .. import _lockfile as lockfile
from .._errors import leaf_errors
from .._nvim import editor_for
from .._nvim.headless import find_nvim
from .._plugins import ToolRegistryError, load_tools

MIN_NVIM = (0, 10)


@dataclass
class Finding:
    ok: bool
    what: str
    fix: str = ""


def run(args: argparse.Namespace) -> int:
    findings = check(args.nvim or os.environ.get("NVIM"), neovim=not args.no_nvim)
    if args.json:
        return report_json(findings)
    return report(findings)


def check(address: str | None, neovim: bool = True) -> list[Finding]:
    """What ``serve`` and ``claude`` need, checked; ``address`` is a running Neovim's.

    ``neovim=False`` leaves Neovim out: the Neovim plugin's :checkhealth reports its own Neovim
    (which cannot answer us while it waits for this) and runs this for the rest.
    """
    return [_itself(), *(_neovim(address) if neovim else []), _claude(), *_lock_dir(),
            *_plugins()]


def _itself() -> Finding:
    """Which claude-nvim this is: the Neovim plugin's :checkhealth shows what it runs."""
    return Finding(True, f"claude-nvim {__version__}, Python {platform.python_version()} at "
                         f"{sys.executable}")


def _neovim(address: str | None) -> list[Finding]:
    """A Neovim to serve: the running one at ``address``, or one ``serve --headless`` starts."""
    try:
        nvim: str | None = find_nvim()  # as serve --headless finds it
    except FileNotFoundError:
        nvim = None
    if nvim is None and not address:
        return [Finding(False, "no Neovim found: no $NVIM (not run inside Neovim), no nvim on "
                               "PATH, no CLAUDE_NVIM_NVIM",
                        "install Neovim 0.10 or newer, or set CLAUDE_NVIM_NVIM to its path; "
                        "or run this from a Neovim :terminal, or pass --nvim ADDR")]
    findings = [_nvim_binary(nvim) if nvim else
                Finding(True, "no nvim on PATH: serve --headless cannot start one (install "
                              "Neovim, or set CLAUDE_NVIM_NVIM)")]
    if address:
        findings += _running_neovim(address)
    else:
        findings.append(Finding(True, "no running Neovim to check (no $NVIM): run this from a "
                                      "Neovim :terminal, or pass --nvim ADDR"))
    return findings


def _nvim_binary(nvim: str) -> Finding:
    fix = "install Neovim 0.10 or newer, or set CLAUDE_NVIM_NVIM to its path"
    try:
        out = subprocess.run([nvim, "--version"], capture_output=True, text=True, timeout=20,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Finding(False, f"`{nvim} --version` failed: {exc}", fix)
    found = re.match(r"NVIM v(\d+)\.(\d+)\.(\d+)", out.stdout)
    if found is None:
        return Finding(False, f"`{nvim} --version` names no Neovim version: "
                              f"{(out.stdout or out.stderr)[:80]!r}", fix)
    return _version_finding(tuple(int(n) for n in found.groups()), f"nvim at {nvim}")


def _version_finding(version: tuple[int, ...], where: str) -> Finding:
    good = version[:2] >= MIN_NVIM
    return Finding(good, f"Neovim {'.'.join(map(str, version))}, {where}",
                   "" if good else "claude-nvim needs Neovim 0.10 or newer")


def _running_neovim(address: str) -> list[Finding]:

    async def version() -> list[Any]:
        editor = editor_for(address)
        async with trio.open_nursery() as nursery:
            with trio.fail_after(3):
                await nursery.start(editor.run)
                found: list[Any] = await editor.exec_lua(RUNNING_LUA)
            nursery.cancel_scope.cancel()
        return found

    try:
        major, minor, patch, port, clients = trio.run(version)
    except BaseException as exc:
        return [Finding(False, f"Neovim at {address} is not reachable ({leaf_errors(exc)[0]})",
                        "check the address: `:echo v:servername` in Neovim shows it")]
    served = (f"a claude-nvim server runs for it on port {port}, {clients} Claude(s) connected"
              if port else "no claude-nvim server runs for it yet (:ClaudeNvim or "
                           "`claude-nvim claude` in its terminal starts one)")
    return [_version_finding((major, minor, patch), f"running at {address}"),
            Finding(True, served)]


RUNNING_LUA = """
local v, core = vim.version(), package.loaded['claude_nvim.core']
local info = type(core) == 'table' and core.live_server and core.live_server()
local port = info and tonumber(info.port)
return { v.major, v.minor, v.patch, port or vim.NIL, port and info.clients or 0 }
"""
"""A running Neovim's version and its server (``core.live_server``, the one test of a live
server)."""


def _claude() -> Finding:
    claude = shutil.which(os.environ.get("CLAUDE_NVIM_CLAUDE", "claude"))
    if claude is None:
        return Finding(False, "`claude` is not on PATH",
                       "install Claude Code: npm install -g @anthropic-ai/claude-code")
    try:
        out = subprocess.run([claude, "--version"], capture_output=True, text=True, timeout=20,
                             stdin=subprocess.DEVNULL)
        version = out.stdout.strip() or out.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Finding(False, f"`{claude} --version` failed: {exc}", "reinstall Claude Code")
    return Finding(True, f"claude {version} at {claude}")


def _lock_dir() -> list[Finding]:
    directory = lockfile.lock_dir()
    nearest = directory  # the directory, or the ancestor of it a server's mkdir starts from
    try:
        while not nearest.exists():
            nearest = nearest.parent
        if not nearest.is_dir():
            raise NotADirectoryError(f"{nearest} is not a directory")
        # Write access as the server will use it: a real file, made and removed.
        fd, probe = tempfile.mkstemp(prefix=".claude-nvim-doctor-", dir=nearest)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return [Finding(False, f"lock directory {directory} is not writable ({exc})",
                        f"make {directory} a directory you can write, or set "
                        "CLAUDE_CONFIG_DIR (for claude too) to another")]
    if nearest != directory:
        return [Finding(True, f"lock directory {directory} does not exist yet; it can be "
                              f"made ({nearest} is writable)")]
    try:
        lockfile.check_directory(directory)
    except lockfile.UnsafeLockDirectory as exc:
        what, fix = str(exc).split(": ", 1)
        return [Finding(False, what, fix)]
    findings = []
    mode = stat.S_IMODE(directory.stat().st_mode)
    findings.append(Finding(mode & 0o077 == 0, f"lock directory {directory} has mode {mode:o}",
                            "" if mode & 0o077 == 0 else f"chmod 700 {directory}"))
    for path in sorted(directory.glob("*.lock")):
        info = path.lstat()  # a lock may be anything (a dangling symlink): never follow it
        mode = stat.S_IMODE(info.st_mode)
        if stat.S_ISREG(info.st_mode) and mode & 0o077:
            findings.append(Finding(False, f"lock file {path} is readable by others ({mode:o})",
                                    f"chmod 600 {path}"))
    return findings


def _plugins() -> list[Finding]:
    try:
        loaded = load_tools()
    except ToolRegistryError as exc:
        return [Finding(False, str(exc), "pip install claude-nvim (or -e . in a checkout)")]
    findings = [Finding(True, f"{len(loaded.tools)} tools from "
                              f"{len({t.plugin for t in loaded.tools.values()})} plugins")]
    for broken in loaded.broken:
        findings.append(Finding(False, f"plugin {broken.name} ({broken.distribution or '?'}) "
                                       f"failed to load: {broken.error}",
                                "fix or uninstall that package, or --disable it"))
    return findings


def report(findings: list[Finding], out: Callable[[str], None] = print) -> int:
    for finding in findings:
        out(f"{'ok ' if finding.ok else 'FIX'}  {finding.what}")
        if finding.fix and not finding.ok:
            out(f"     -> {finding.fix}")
    return 0 if all(f.ok for f in findings) else 1


def report_json(findings: list[Finding], out: Callable[[str], None] = print) -> int:
    """``doctor --json``: the findings for programs (the Neovim plugin's :checkhealth)."""
    ok = all(f.ok for f in findings)
    out(json.dumps({"ok": ok, "checks": [
        {"ok": f.ok, "what": f.what, "fix": f.fix} for f in findings]}))
    return 0 if ok else 1
