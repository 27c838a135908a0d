"""`nvim +ClaudeNvim` to a connected Claude, and what a Neovim that never opens Claude costs:
claude-nvim before and after socket activation (lua/claude_nvim/activate.lua) beside
coder/claudecode.nvim, in one run.

The stand-in claude (standin_claude.py with $STANDIN_DELAY) takes the real CLI's start-up,
about a second, then reads the newest lock file in its config directory and connects; the
figure is from Neovim's launch to its `initialize` answered (and `ide_connected` sent). Each
plugin is set up as a new user would, its terminal's command being the stand-in: claude-nvim
"after" with its defaults (opts.claude.outlive: the Claude under a `claude-nvim hold` holder),
and once more with outlive=false (claude straight in the terminal), which shows what the holder
costs.

    python -m benchmarks.activation --claudecode DIR [--before REV] [--rounds 5]

DIR is a checkout of claudecode.nvim (e.g. `git --git-dir=<its git dir> archive HEAD | tar -x
-C DIR`); REV is the claude-nvim to compare with (default main), exported from this
repository's git into a temporary directory for the run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from benchmarks.anchor import connected_after, descendants, user_home
from benchmarks.harness import NVIM_ARGS, ROOT, ProcWatch, exported, log
from claude_nvim._nvim import editor_for
from claude_nvim._nvim.editor import Editor
from claude_nvim._nvim.headless import headless_nvim

STARTUP_SECONDS = 1.0
"""The stand-in's start-up before it looks for its IDE: the real CLI's, about a second."""


@dataclass(frozen=True)
class Variant:
    name: str
    runtime: Path
    setup: str  # Lua, run with --cmd once the plugin is on 'runtimepath'
    command: str
    settled: str  # Lua: true once what the plugin does at start-up is done


def variants(before: Path, claudecode: Path | None, stand_in: str) -> list[Variant]:
    def ours(name: str, root: Path, cmd: list[str], settled: str, **more: Any) -> Variant:
        opts = json.dumps({"cmd": cmd, **more})
        return Variant(name, root, f"require('claude_nvim').setup(vim.json.decode([[{opts}]]))",
                       "ClaudeNvim", settled)

    python = [sys.executable, "-m", "claude_nvim"]
    # Before socket activation, the server started once a UI was up: settled when it is ready.
    found = [ours("claude-nvim before", before, ["env", f"PYTHONPATH={before / 'src'}", *python],
                  "if require('claude_nvim').config.start_server == 'first_use' then "
                  "return true end "
                  "local s = vim.g.claude_nvim_server; return s ~= nil and s.claude ~= nil"),
             ours("claude-nvim after", ROOT, python, "return true"),  # the default: held
             ours("after, outlive=false", ROOT, python, "return true",
                  claude={"outlive": False})]
    if claudecode is not None:
        found.append(Variant(
            "claudecode.nvim", claudecode,
            f"require('claudecode').setup({{ terminal_cmd = {json.dumps(stand_in)}, "
            "terminal = { provider = 'native' } })", "ClaudeCode", "return true"))
    return found


@contextlib.asynccontextmanager
async def neovim(variant: Variant, root: Path, *extra: str, ui: bool = False
                 ) -> AsyncIterator[tuple[Editor, int]]:
    """A Neovim with ``variant`` set up (a UI attached if ``ui``); everything it started is
    killed by pid at the end."""
    args = (*NVIM_ARGS, "--cmd", f"set runtimepath^={variant.runtime}",
            "--cmd", f"lua {variant.setup}", *extra)
    with headless_nvim(cwd=root / "work", args=args) as (address, process):
        driver = editor_for(address)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(driver.run)
                if ui:
                    await driver.request("nvim_ui_attach", 160, 45, {"ext_linegrid": True})
                try:
                    yield driver, process.pid
                finally:
                    left = descendants(process.pid)
                    nursery.cancel_scope.cancel()
        finally:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5)
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


async def connect_seconds(variant: Variant) -> float:
    """`nvim +Command` launched to the stand-in's initialize answered."""
    with tempfile.TemporaryDirectory(prefix="claude-nvim-activation-") as tmp:
        root = Path(tmp)
        with user_home(root, STANDIN_DELAY=str(STARTUP_SECONDS)) as out:
            launched = time.time()
            async with neovim(variant, root, f"+{variant.command}"):
                return await connected_after(out, 1, launched, timeout=60)


async def idle_cost(variant: Variant) -> tuple[int, float]:
    """A Neovim with a UI that never opens Claude, once its start-up is done: the processes
    under it and the RSS of it and them (MB)."""
    with tempfile.TemporaryDirectory(prefix="claude-nvim-activation-") as tmp:
        root = Path(tmp)
        with user_home(root, STANDIN_DELAY=str(STARTUP_SECONDS)):
            async with neovim(variant, root, ui=True) as (driver, pid):
                with trio.fail_after(60):
                    while not await driver.exec_lua(
                            "return vim.v.vim_did_enter == 1 and (function() "
                            + variant.settled + " end)()"):
                        await trio.sleep(0.05)
                    await driver.exec_lua("vim.schedule(function() vim.g.bench_after = 1 end)")
                    while not await driver.exec_lua("return vim.g.bench_after"):
                        await trio.sleep(0.05)
                children = descendants(pid)
                return len(children), sum(ProcWatch(p).rss_mb() for p in [pid, *children])


async def run(found: list[Variant], rounds: int) -> dict[str, dict[str, Any]]:
    connects: dict[str, list[float]] = {v.name: [] for v in found}
    idle: dict[str, list[tuple[int, float]]] = {v.name: [] for v in found}
    for index in range(rounds):  # the variants in turn: the machine's load falls on each alike
        for variant in found:
            log(f"round {index + 1}/{rounds}: {variant.name}")
            connects[variant.name].append(await connect_seconds(variant))
            idle[variant.name].append(await idle_cost(variant))
    return {name: {"connect_ms": statistics.median(connects[name]) * 1e3,
                   "connect_ms_all": [round(s * 1e3) for s in connects[name]],
                   "idle_processes": statistics.median(n for n, _ in idle[name]),
                   "idle_rss_mb": statistics.median(mb for _, mb in idle[name])}
            for name in connects}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--claudecode", type=Path, help="a checkout of coder/claudecode.nvim")
    parser.add_argument("--before", default="main", help="the claude-nvim to compare with (git)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="claude-nvim-before-") as tmp:
        before = exported(args.before, Path(tmp))
        found = variants(before, args.claudecode, "claude")  # PATH's: the stand-in
        results = trio.run(run, found, args.rounds)
    print(f"nvim +ClaudeNvim -> connected (stand-in claude: {STARTUP_SECONDS:g} s start-up, "
          f"newest lock), median of {args.rounds}; a Neovim that never opens Claude:")
    print(f"{'':22} {'connect ms':>10} {'idle procs':>10} {'idle RSS MB':>11}   all connects")
    for name, row in results.items():
        print(f"{name:22} {row['connect_ms']:10.0f} {row['idle_processes']:10g} "
              f"{row['idle_rss_mb']:11.1f}   {row['connect_ms_all']}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
