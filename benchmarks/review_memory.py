"""What Claude's hooks cost the server and Neovim (issue 27): the review's memory and answer
time, and the states pushed to Neovim during a flood of hooks.

    .venv/bin/python benchmarks/review_memory.py [--rows write,prompts,names,flood]

Each row runs its own ``claude-nvim serve`` process against a headless Neovim (another
checkout's ``src`` first on ``PYTHONPATH`` measures that one), driven by a client that sends
the ``claude_nvim_hook`` calls claude's hooks make:

* ``write``: a Write of a 200 MB file (PreToolUse): the hook's answer time and the server's
  RSS after it (and its peak);
* ``prompts``: 8 turns with a 16 MB prompt each (each changes a small file): the server's RSS
  growth;
* ``names``: one turn whose 20,000 PreToolUse hooks each name another 3 KB path: RSS growth;
* ``flood``: hooks alternating waiting and working for 5 s as fast as the server answers them:
  the state pushes that reach Neovim (``claude_nvim.hooks.update`` calls) and Neovim's worst
  answer to a probe meanwhile.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from claude_nvim._nvim import editor_for
from claude_nvim._nvim.editor import Editor
from claude_nvim._nvim.headless import headless_nvim

sys.path.insert(0, str(Path(__file__).parent))
from bench import NVIM_ARGS, Client, ProcWatch, connect, server_command, stop_server, wait_for_lock

MIB = 2**20
HOOK = "claude_nvim_hook"
COUNT_UPDATES = """
local hooks = require('claude_nvim.hooks')
local update = hooks.update
_G.bench_updates = 0
hooks.update = function(...) _G.bench_updates = _G.bench_updates + 1; return update(...) end
"""


@dataclass
class Served:
    root: Path
    nvim: Editor
    server: ProcWatch
    client: Client


@asynccontextmanager
async def served() -> AsyncIterator[Served]:
    """A headless Neovim, a ``claude-nvim serve`` on it and a client like the CLI."""
    with tempfile.TemporaryDirectory(prefix="claude-nvim-bench-") as tmp:
        root = Path(tmp)
        (root / "config").mkdir()
        with headless_nvim(cwd=root, args=NVIM_ARGS) as (address, _):
            nvim = editor_for(address, timeout=600.0)
            async with trio.open_nursery() as nursery:
                await nursery.start(nvim.run)
                env = {**os.environ, "CLAUDE_CONFIG_DIR": str(root / "config")}
                env.pop("NVIM", None)
                log = root / "server.log"
                with open(log, "wb") as out:
                    server = subprocess.Popen(server_command(address), cwd=root, env=env,
                                              stdin=subprocess.DEVNULL, stdout=out,
                                              stderr=subprocess.STDOUT)
                try:
                    port, token = await wait_for_lock(root / "config", server, log)
                    async with connect(port, token) as client:
                        # The Claude listens once ide_connected is handled: its entry is there.
                        with trio.fail_after(30):
                            while not await nvim.exec_lua(
                                    "return #((vim.g.claude_nvim_server or {}).claudes"
                                    " or {}) > 0"):
                                await trio.sleep(0.05)
                        yield Served(root, nvim, ProcWatch(server.pid), client)
                finally:
                    await stop_server(server)
                    nursery.cancel_scope.cancel()


async def hook(client: Client, event: str, **fields: str) -> float:
    """One hook's call; its answer time in seconds."""
    sent, arrived, raw = await client.call(HOOK, {"event": event, "session": "bench", **fields})
    if '"isError":true' in raw or '"error"' in raw[:60]:
        raise RuntimeError(f"{event}: {raw[:300]}")
    return arrived - sent


async def settled_rss(watch: ProcWatch) -> float:
    await trio.sleep(0.5)  # the server frees what a hook's read held
    return watch.rss_mb()


async def row_write(out: dict[str, Any]) -> None:
    async with served() as s:
        big = s.root / "big.bin"
        with big.open("wb") as f:
            f.truncate(200 * MIB)  # sparse: read as 200 MB of zeros, no disk
        await hook(s.client, "UserPromptSubmit", prompt="Write it.")
        before = await settled_rss(s.server)
        s.server.reset_peak()
        answer = await hook(s.client, "PreToolUse", tool="Write", file=str(big),
                            tool_use="t1")
        out.update(write_answer_s=answer, write_rss_growth_mb=await settled_rss(s.server) - before,
                   write_peak_growth_mb=s.server.peak_mb() - before)


async def row_prompts(out: dict[str, Any]) -> None:
    async with served() as s:
        small = s.root / "small.txt"
        small.write_text("one\n")
        prompt = "x" * (16 * MIB)
        before = await settled_rss(s.server)
        for i in range(8):
            await hook(s.client, "UserPromptSubmit", prompt=prompt[:-1] + str(i))
            await hook(s.client, "PreToolUse", tool="Write", file=str(small), tool_use=f"t{i}")
            small.write_text(f"turn {i}\n")
            await hook(s.client, "PostToolUse", tool="Write", file=str(small), tool_use=f"t{i}")
            await hook(s.client, "Stop")
        del prompt
        gc.collect()
        out["prompts_rss_growth_mb"] = await settled_rss(s.server) - before


async def row_names(out: dict[str, Any], count: int = 20_000, workers: int = 8) -> None:
    async with served() as s:
        await hook(s.client, "UserPromptSubmit", prompt="Touch them all.")
        before = await settled_rss(s.server)
        stem = str(s.root / ("d" * 3000))
        numbers = iter(range(count))

        async def send() -> None:
            for n in numbers:
                await hook(s.client, "PreToolUse", tool="Write", file=f"{stem}/{n}",
                           tool_use=f"t{n}")

        t0 = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(workers):
                nursery.start_soon(send)
        out["names_s"] = time.perf_counter() - t0
        out["names_rss_growth_mb"] = await settled_rss(s.server) - before


async def row_flood(out: dict[str, Any], seconds: float = 5.0) -> None:
    async with served() as s:
        await s.nvim.exec_lua(COUNT_UPDATES)
        await hook(s.client, "UserPromptSubmit", prompt="Go.")
        worst, hooks = 0.0, 0
        deadline = time.perf_counter() + seconds

        async def probe() -> None:
            nonlocal worst
            while time.perf_counter() < deadline + 1:
                t0 = time.perf_counter()
                await s.nvim.request("nvim_eval", "1")
                worst = max(worst, time.perf_counter() - t0)
                await trio.sleep(0.002)

        async def flood() -> None:
            nonlocal hooks
            while time.perf_counter() < deadline:
                await hook(s.client, "PermissionRequest")
                await hook(s.client, "PostToolUse", tool="Bash", tool_use=f"t{hooks}")
                hooks += 2

        async with trio.open_nursery() as nursery:
            nursery.start_soon(probe)
            for _ in range(4):
                nursery.start_soon(flood)
        updates = await s.nvim.exec_lua("return _G.bench_updates")
        out.update(flood_hooks=hooks, flood_updates=updates, flood_nvim_worst_ms=worst * 1000)


ROWS = {"write": row_write, "prompts": row_prompts, "names": row_names, "flood": row_flood}


async def main_async(rows: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in rows:
        await ROWS[name](out)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v
                          for k, v in out.items()}), file=sys.stderr, flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default=",".join(ROWS))
    args = parser.parse_args()
    out = trio.run(main_async, args.rows.split(","))
    print(f"server: PYTHONPATH={os.environ.get('PYTHONPATH', '')!r}")
    for key, value in out.items():
        print(f"{key:24} {value:10.3f}" if isinstance(value, float) else f"{key:24} {value:10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
