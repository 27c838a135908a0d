"""``claude-nvim doctor``: check what claude-nvim needs, and say what to fix."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

import trio

from . import lockfile
from .editor import editor_for
from .plugins import ToolRegistryError, load_tools

MIN_NVIM = (0, 10)


@dataclass
class Finding:
    ok: bool
    what: str
    fix: str = ""


def check(address: str | None) -> list[Finding]:
    return [*_neovim(address), _claude(), *_lock_dir(), *_plugins()]


def _neovim(address: str | None) -> list[Finding]:
    if not address:
        return [Finding(True, "not run inside Neovim (no $NVIM): the Neovim check is skipped",
                        "run `claude-nvim doctor` from a Neovim :terminal, or pass --nvim ADDR")]

    async def version() -> list[int]:
        editor = editor_for(address)
        async with trio.open_nursery() as nursery:
            with trio.fail_after(3):
                await nursery.start(editor.run)
                found: list[int] = await editor.exec_lua(
                    "local v = vim.version(); return {v.major, v.minor, v.patch}")
            nursery.cancel_scope.cancel()
        return found

    try:
        major, minor, patch = trio.run(version)
    except BaseException as exc:
        return [Finding(False, f"Neovim at {address} is not reachable ({_leaf(exc)})",
                        "check the address: `:echo v:servername` in Neovim shows it")]
    good = (major, minor) >= MIN_NVIM
    return [Finding(good, f"Neovim {major}.{minor}.{patch} at {address}",
                    "" if good else "claude-nvim needs Neovim 0.10 or newer")]


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
    if not directory.exists():
        return [Finding(True, f"lock directory {directory} does not exist yet (made on start)")]
    findings = []
    mode = stat.S_IMODE(directory.stat().st_mode)
    findings.append(Finding(mode & 0o077 == 0, f"lock directory {directory} has mode {mode:o}",
                            "" if mode & 0o077 == 0 else f"chmod 700 {directory}"))
    for path in sorted(directory.glob("*.lock")):
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
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


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def report(findings: list[Finding], out: Callable[[str], None] = print) -> int:
    for finding in findings:
        out(f"{'ok ' if finding.ok else 'FIX'}  {finding.what}")
        if finding.fix and not finding.ok:
            out(f"     -> {finding.fix}")
    return 0 if all(f.ok for f in findings) else 1
