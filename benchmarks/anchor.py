"""The anchor comparison: the Neovim plugin's :ClaudeNvim to a connected Claude, beside
coder/claudecode.nvim's, with a stand-in Claude."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from benchmarks.harness import (
    NVIM_ARGS,
    ROOT,
    ProcWatch,
    log,
    median_of,
)
from benchmarks.units import Units
from claude_nvim._nvim import editor_for
from claude_nvim._nvim.editor import Editor
from claude_nvim._nvim.headless import headless_nvim

STAND_IN = Path(__file__).resolve().parent / "standin_claude.py"


@dataclass(frozen=True)
class Plugin:
    """A Neovim plugin that starts Claude: how to set it up and which command opens it."""

    name: str
    runtime: Path
    setup: str  # Lua run at start-up, after the plugin is on 'runtimepath'
    command: str
    another: str | None = None  # the command for one more Claude, if the plugin has one


def plugins_to_compare(claudecode: str | None) -> list[Plugin]:
    script = Path(sys.executable).parent / "claude-nvim"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "claude_nvim"]
    ours = Plugin("claude-nvim", ROOT, "require('claude_nvim').setup(vim.json.decode([["
                  + json.dumps({"cmd": cmd}) + "]]))", "ClaudeNvim", "ClaudeNvimNew")
    if not claudecode:
        return [ours]
    return [ours, Plugin("claudecode.nvim", Path(claudecode),
                         "require('claudecode').setup({ terminal = { provider = 'native' } })",
                         "ClaudeCode")]


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                parent = int(stat.rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def processes_of(nvim_pid: int, stand_in: Path) -> dict[str, list[int]]:
    """Neovim's descendants that are claude-nvim's (its Python processes) and the stand-ins."""
    out: dict[str, list[int]] = {"claude-nvim": [], "claude": []}
    for pid in descendants(nvim_pid):
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if str(stand_in).encode() in cmdline:
                out["claude"].append(pid)
            elif any(b"claude_nvim" in arg or arg.endswith(b"/claude-nvim") for arg in cmdline):
                out["claude-nvim"].append(pid)
    return out


async def connected_after(out: Path, count: int, since: float, timeout: float = 20.0) -> float:
    """Seconds from ``since`` (wall clock) until ``count`` stand-ins had sent ide_connected."""
    with trio.fail_after(timeout):
        while True:
            text = out.read_text() if out.exists() else ""
            lines = text[:text.rfind("\n") + 1].splitlines()  # whole lines: one may be half written
            if len(lines) >= count:
                return json.loads(lines[count - 1])["connected"] - since
            await trio.sleep(0.005)


@contextlib.contextmanager
def user_home(root: Path, **env: str) -> Iterator[Path]:
    """A stand-in ``claude`` first on PATH, a config directory of the run's, ``env`` set (the
    stand-in's, e.g. STANDIN_DELAY); yields the stand-ins' record. The environment is put back
    after."""
    bin_dir = root / "bin"
    bin_dir.mkdir()
    claude = bin_dir / "claude"
    claude.write_text(f"#!{sys.executable} -S\n" + STAND_IN.read_text())
    claude.chmod(0o755)
    (root / "work").mkdir()
    out = root / "connected.jsonl"
    saved = dict(os.environ)
    os.environ.update(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                      CLAUDE_CONFIG_DIR=str(root / "config"), STANDIN_OUT=str(out), **env)
    for name in ("NVIM", "CLAUDE_CODE_SSE_PORT", "CLAUDE_NVIM_CLAUDE"):
        os.environ.pop(name, None)
    try:
        yield out
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.asynccontextmanager
async def plugin_neovim(plugin: Plugin, root: Path) -> AsyncIterator[tuple[Editor, int, Path]]:
    """A Neovim with ``plugin`` and a 160x45 UI attached (as a user's), a stand-in ``claude``
    first on its PATH; yields the driver, Neovim's pid and the stand-ins' record."""
    with user_home(root) as out:
        args = (*NVIM_ARGS, "--cmd", f"set runtimepath^={plugin.runtime}",
                "--cmd", f"lua {plugin.setup}")
        with headless_nvim(cwd=root / "work", args=args) as (address, process):
            driver = editor_for(address)
            async with trio.open_nursery() as nursery:
                await nursery.start(driver.run)
                await driver.request("nvim_ui_attach", 160, 45, {"ext_linegrid": True})
                try:
                    yield driver, process.pid, out
                finally:
                    left = descendants(process.pid)
                    nursery.cancel_scope.cancel()
            process.terminate()  # Neovim stops its jobs
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5)
            for pid in left:  # what did not go with it
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


class PluginBench:
    """`:ClaudeNvim` (and claudecode.nvim's `:ClaudeCode`) to the stand-in's ide_connected."""

    def __init__(self, bench: Units, claudecode: str | None) -> None:
        self.bench = bench
        self.plugins = plugins_to_compare(claudecode)

    async def trial(self, plugin: Plugin, settle: float) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="claude-nvim-bench-") as tmp:
            root = Path(tmp)
            async with plugin_neovim(plugin, root) as (driver, nvim_pid, out):
                await trio.sleep(settle)
                idle = processes_of(nvim_pid, root / "bin" / "claude")["claude-nvim"]
                before = {"processes_0": len(idle),
                          "rss_0_mb": sum(ProcWatch(pid).rss_mb() for pid in idle)}
                started = time.time()
                await driver.request("nvim_command", plugin.command)
                row: dict[str, Any] = {"connect_ms": await connected_after(out, 1, started) * 1e3,
                                       **before}
                if plugin.another is not None and settle > 0:
                    for count in (2, 3):
                        await driver.request("nvim_input", "<C-\\><C-n>")
                        await driver.request("nvim_command", plugin.another)
                        await connected_after(out, count, started)
                    ours = processes_of(nvim_pid, root / "bin" / "claude")["claude-nvim"]
                    row["processes_3"] = len(ours)
                    row["rss_3_mb"] = sum(ProcWatch(pid).rss_mb() for pid in ours)
                return row

    async def run(self) -> None:
        rounds = max(3, self.bench.rounds * 2)
        results: dict[str, Any] = {}
        for plugin in self.plugins:
            for settle, label in ((1.0, "Neovim up 1 s"), (0.0, "at once")):
                trials = []
                for index in range(rounds):
                    log(f"{self.bench.elapsed()} {plugin.name}: :{plugin.command}, {label}, "
                        f"{index + 1}/{rounds}")
                    trials.append(await self.trial(plugin, settle))
                results[f"{plugin.name}, {label}"] = {"median": median_of(trials),
                                                      "rounds": trials}
        self.bench.results["plugin"] = results


# ---------------------------------------------------------------------------------------------
# Report


