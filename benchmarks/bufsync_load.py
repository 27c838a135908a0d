"""What buffers that follow their files cost Neovim under load (issue 18).

    .venv/bin/python -m benchmarks.bufsync_load [--only log,big,checkout,tell]

Each case gets a fresh headless Neovim (``--clean``, default 'undolevels' and 'undoreload') and
``claude-nvim serve --nvim <socket>`` as a separate process (put another checkout's ``src``
first on ``PYTHONPATH`` to measure it: the server installs its own Lua). While a case runs,
The freeze probe (probe.py, its own process) sends ``nvim_eval("1")`` every millisecond: its
longest round trip is the longest a keystroke waited. Memory is Neovim's RSS
(``/proc/<pid>/status``) at the end minus before; "busy" is Neovim's CPU time over the case.

* log: a 1 MB log (5,000 lines of 200 bytes) shown in a window, a line appended every 0.1 s
  for 15 s; then also hidden (in no window).
* big: a 26 MB file (9,000 lines of 2,900 bytes: under 'undoreload') shown in a window,
  appended 50 times in 10 s.
* checkout: 1,000 loaded 300-line files (one shown), all changed by one ``git checkout``;
  the longest freeze and how long until every buffer shows its new text.
* tell: ``core.tell`` of a message with a 4,000-character path on an 80-column screen.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from benchmarks.harness import (
    LOAD_BUFFERS_LUA,
    NVIM_ARGS,
    ProcWatch,
    server_command,
    stop_server,
    wait_for_lock,
)
from benchmarks.probe import Probe, probe_command
from claude_nvim._nvim import editor_for
from claude_nvim._nvim.editor import Editor
from claude_nvim._nvim.headless import headless_nvim


@dataclass
class Case:
    workdir: Path
    nvim: Editor
    watch: ProcWatch
    probe: Probe


@contextlib.asynccontextmanager
async def case(workdir: Path) -> AsyncIterator[Case]:
    """A fresh Neovim in ``workdir``, a claude-nvim server process on it, a freeze probe."""
    config = workdir / "config"
    config.mkdir()
    with headless_nvim(cwd=workdir, args=NVIM_ARGS) as (address, process):
        nvim = editor_for(address, timeout=600.0)
        async with trio.open_nursery() as nursery:
            await nursery.start(nvim.run)
            await nvim.request("nvim_ui_attach", 80, 24, {"ext_linegrid": True})
            env = {**os.environ, "CLAUDE_CONFIG_DIR": str(config)}
            env.pop("NVIM", None)
            log = workdir / "server.log"
            with open(log, "wb") as log_file:
                server = subprocess.Popen(server_command(address), cwd=workdir, env=env,
                                          stdin=subprocess.DEVNULL, stdout=log_file,
                                          stderr=subprocess.STDOUT)
            try:
                await wait_for_lock(config, server, log)
                probe = Probe(await trio.lowlevel.open_process(
                    probe_command(address, 1),
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE))
                try:
                    yield Case(workdir, nvim, ProcWatch(process.pid), probe)
                finally:
                    await probe.quit()
            finally:
                await stop_server(server)
                nursery.cancel_scope.cancel()


async def wait_until(nvim: Editor, lua: str, *args: Any, timeout: float = 120.0) -> float:
    """Seconds until the Lua expression is true."""
    t0 = time.perf_counter()
    with trio.fail_after(timeout):
        while not await nvim.exec_lua(lua, *args):
            await trio.sleep(0.01)
    return time.perf_counter() - t0


LAST_LINE_IS = """
local buf, last = vim.fn.bufnr(...), select(2, ...)
return vim.api.nvim_buf_get_lines(buf, -2, -1, false)[1] == last
"""


async def appended(c: Case, path: Path, line_bytes: int, appends: int, every: float,
                   hidden: bool) -> dict[str, Any]:
    """Append ``appends`` lines to ``path`` (open in Neovim) every ``every`` seconds."""
    await c.nvim.request("nvim_command", f"edit {path}")
    if hidden:
        await c.nvim.request("nvim_command", "set hidden | enew")
    await trio.sleep(0.5)
    rss0, cpu0 = c.watch.rss_mb(), c.watch.cpu()
    c.watch.reset_peak()
    await c.probe.start()
    t0 = time.perf_counter()
    for n in range(appends):
        with path.open("a") as f:
            f.write(f"appended {n:06} ".ljust(line_bytes - 1, "x") + "\n")
        await trio.sleep(max(0.0, t0 + (n + 1) * every - time.perf_counter()))
    last = f"appended {appends - 1:06} ".ljust(line_bytes - 1, "x")
    if hidden:
        await c.nvim.request("nvim_command", f"buffer {path}")  # shown: current now
    settle = await wait_until(c.nvim, LAST_LINE_IS, str(path), last)
    freeze = await c.probe.stop()
    return {"rss_growth_mb": c.watch.rss_mb() - rss0, "peak_growth_mb": c.watch.peak_mb() - rss0,
            "busy_s": c.watch.cpu() - cpu0, "wall_s": time.perf_counter() - t0,
            "freeze_max_ms": freeze["max"], "current_after_last_s": settle}


async def log_case(root: Path) -> dict[str, Any]:
    out = {}
    for hidden in (False, True):
        workdir = root / f"log-{hidden}"
        workdir.mkdir()
        path = workdir / "app.log"
        path.write_text("".join(f"{i:06} ".ljust(199, "x") + "\n" for i in range(5000)))
        async with case(workdir) as c:
            out["hidden" if hidden else "shown"] = await appended(c, path, 200, 150, 0.1,
                                                                  hidden)
    return out


async def big_case(root: Path, appends: int = 50) -> dict[str, Any]:
    workdir = root / "big"
    workdir.mkdir()
    path = workdir / "big.txt"
    path.write_text("".join(f"{i:06} ".ljust(2899, "x") + "\n" for i in range(9_000)))
    async with case(workdir) as c:
        return await appended(c, path, 2900, appends, 0.2, False)


# Cheap, as the probe counts it too: by buffer number (bufnr(path) for 1,000 paths: 0.8 s).
ALL_CURRENT = """
local bufs, first = ...
for _, buf in ipairs(bufs) do
  if vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1] ~= first then return false end
end
return true
"""


def git(workdir: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", *args], cwd=workdir,
                   check=True, capture_output=True)


async def checkout_case(root: Path) -> dict[str, Any]:
    workdir = root / "checkout"
    repo = workdir / "repo"
    paths = [repo / f"d{i % 10}" / f"f{i:04}.py" for i in range(1000)]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"old_{i} = {i}  # line {i}\n" for i in range(300)))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "old")
    git(repo, "checkout", "-q", "-b", "other")
    for path in paths:
        path.write_text("".join(f"new_{i} = {i}  # line {i}\n" for i in range(300)))
    git(repo, "commit", "-q", "-am", "new")
    git(repo, "checkout", "-q", "main")
    async with case(workdir) as c:
        bufs = await c.nvim.exec_lua(LOAD_BUFFERS_LUA, [str(p) for p in paths], timeout=300)
        await c.nvim.request("nvim_command", f"edit {paths[0]}")
        await trio.sleep(1.0)
        rss0, cpu0 = c.watch.rss_mb(), c.watch.cpu()
        await c.probe.start()
        t0 = time.perf_counter()
        git(repo, "checkout", "-q", "other")
        checkout_s = time.perf_counter() - t0
        shown = await wait_until(c.nvim, LAST_LINE_IS, str(paths[0]),
                                 "new_299 = 299  # line 299")
        everything = await wait_until(c.nvim, ALL_CURRENT, bufs, "new_0 = 0  # line 0",
                                      timeout=300)
        await trio.sleep(0.5)
        freeze = await c.probe.stop()
        return {"git_checkout_s": checkout_s, "shown_current_after_s": shown,
                "all_current_after_s": everything, "freeze_max_ms": freeze["max"],
                "freezes_over_50ms": freeze["over_50ms"], "busy_s": c.watch.cpu() - cpu0,
                "rss_growth_mb": c.watch.rss_mb() - rss0}


TELL = """
local t0 = vim.uv.hrtime()
package.loaded['claude_nvim.core'].tell(...)
return (vim.uv.hrtime() - t0) / 1e6
"""


async def tell_case(root: Path) -> dict[str, Any]:
    workdir = root / "tell"
    workdir.mkdir()
    async with case(workdir) as c:
        said = "Claude's edit of " + "/very/long/path" * 267 + " is not shown"
        out = {}
        for options in ("", "set shortmess-=T"):
            if options:
                await c.nvim.request("nvim_command", options)
            out[options or "default"] = await c.nvim.exec_lua(TELL, said, "WARN")
        return {f"{k}_ms": v for k, v in out.items()}


CASES = {"log": log_case, "big": big_case, "checkout": checkout_case, "tell": tell_case}


def show(name: str, result: dict[str, Any], indent: str = "") -> None:
    print(f"{indent}{name}:")
    for key, value in result.items():
        if isinstance(value, dict):
            show(key, value, indent + "  ")
        else:
            print(f"{indent}  {key:24} {value:10.3f}" if isinstance(value, float)
                  else f"{indent}  {key:24} {value:>10}")


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="claude-nvim-bufsync-") as tmp:
        for name in args.only.split(","):
            result = await CASES[name](Path(tmp))
            show(name, result)
            sys.stdout.flush()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(CASES),
                        help="comma-separated cases: " + ",".join(CASES))
    trio.run(main, parser.parse_args())
