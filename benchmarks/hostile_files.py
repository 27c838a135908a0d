"""How long a hostile file freezes Neovim, and how much memory it costs it (issue 11).

    .venv/bin/python -m benchmarks.hostile_files [--size-mb 200] [--fifo-cap 10]

Each case gets a fresh headless Neovim (``--clean``) and an in-process claude-nvim server, and
makes one tool call naming a FIFO or a big file (``--size-mb``, over the default 50 MB limit).
While it runs, a second RPC client sends ``nvim_eval("1")`` every 10 ms: its longest round
trip is how long Neovim was frozen. Memory is Neovim's RSS (``/proc/<pid>/status``) after the
call minus before it, and its peak (VmHWM) minus the RSS before. A Neovim stuck opening the
FIFO is let go after ``--fifo-cap`` seconds (by opening it for writing): without that it would
stay frozen for good, so that figure is a lower bound.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from claude_nvim._nvim.headless import headless_nvim
from claude_nvim.testing import attached_editor, mcp_client, running_app

MIB = 2**20


def status_mb(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(key)


def let_go(fifo: Path) -> None:
    """Open the FIFO for writing (and close it): a reader stuck in open() gets EOF."""
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


async def run_case(tool: str, endpoint: str, arguments: dict[str, Any], fifo: Path | None,
                   fifo_cap: float, workdir: Path) -> dict[str, Any]:
    args = ("--clean", "--cmd", "let g:loaded_python3_provider = 0")
    with headless_nvim(cwd=workdir, args=args) as (address, process):
        async with running_app(address, lock_directory=workdir / "ide") as app, \
                mcp_client(app.port, app.token, path=endpoint) as client, \
                attached_editor(address) as probe:
            await probe.request("nvim_eval", "1")
            rss_before = status_mb(process.pid, "VmRSS")
            worst, done = 0.0, trio.Event()

            async def probing() -> None:
                nonlocal worst
                while not done.is_set():
                    sent = time.perf_counter()
                    await probe.request("nvim_eval", "1", timeout=None)
                    worst = max(worst, time.perf_counter() - sent)
                    await trio.sleep(0.01)

            async def unblocking() -> None:
                if fifo is not None:
                    await trio.sleep(fifo_cap)
                    let_go(fifo)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(probing)
                nursery.start_soon(unblocking)
                started = time.perf_counter()
                result = await client.call_tool(tool, arguments)
                call_s = time.perf_counter() - started
                sent = time.perf_counter()
                await probe.request("nvim_eval", "1", timeout=None)  # Neovim is free again
                worst = max(worst, time.perf_counter() - sent)
                done.set()
                nursery.cancel_scope.cancel()
            return {
                "answer": result["content"][0]["text"][:110],
                "call_s": call_s,
                "frozen_s": worst,
                "rss_grown_mb": status_mb(process.pid, "VmRSS") - rss_before,
                "peak_grown_mb": status_mb(process.pid, "VmHWM") - rss_before,
            }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--fifo-cap", type=float, default=10.0)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        workdir = Path(tmp)
        fifo = workdir / "pipe.py"
        os.mkfifo(fifo)
        big = workdir / "big.txt"
        line = b"x" * 99 + b"\n"
        with big.open("wb") as out:
            for _ in range(options.size_mb):
                out.write(line * (MIB // len(line)))
        size = f"{big.stat().st_size / MIB:.0f} MB file"
        cases = [
            ("openFile", "/", {"filePath": str(fifo), "makeFrontmost": False}, "FIFO"),
            ("openFile", "/", {"filePath": str(big), "makeFrontmost": False}, size),
            ("lspDocumentSymbols", "/mcp", {"filePath": str(fifo)}, "FIFO"),
            ("lspDocumentSymbols", "/mcp", {"filePath": str(big)}, size),
        ]
        print(f"{'tool':<20} {'file':<12} {'call s':>7} {'frozen s':>9} {'RSS +MB':>8} "
              f"{'peak +MB':>9}  answer")
        for tool, endpoint, arguments, what in cases:
            row = await run_case(tool, endpoint, arguments, fifo if what == "FIFO" else None,
                                 options.fifo_cap, workdir)
            print(f"{tool:<20} {what:<12} {row['call_s']:>7.3f} {row['frozen_s']:>9.3f} "
                  f"{row['rss_grown_mb']:>8.1f} {row['peak_grown_mb']:>9.1f}  {row['answer']}",
                  flush=True)


if __name__ == "__main__":
    trio.run(main)
