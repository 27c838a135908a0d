"""What the remote agent costs a tool call: the same server (``claude-nvim remote --serve``,
its far side run here through ``--via env``), called directly on its port here and through the
agent's port "there" (the agent, its stdin and stdout, the frames).

    .venv/bin/python benchmarks/remote_relay.py [--calls N]

Prints the round trip of ``getWorkspaceFolders`` (one Neovim RPC) and of a large answer
(``getDiagnostics`` of a file with 5000 diagnostics), p50 and p95, both ways.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import connect, percentile, stop_server

from claude_nvim._nvim.headless import headless_nvim
from claude_nvim.testing import attached_editor

DIAGNOSTICS = """
local buf = vim.fn.bufadd(select(1, ...)); vim.fn.bufload(buf)
local items = {}
for i = 0, 4999 do
  items[#items + 1] = { lnum = i, col = 0, message = ('x'):rep(100), severity = 1 }
end
vim.diagnostic.set(vim.api.nvim_create_namespace('bench'), buf, items)
"""


async def timed(port: int, token: str, calls: int, name: str, args: dict) -> list[float]:
    async with connect(port, token) as client:
        await client.call(name, args)  # warm
        took = []
        for _ in range(calls):
            sent, arrived, _raw = await client.call(name, args)
            took.append((arrived - sent) * 1000)
    return sorted(took)


async def main(calls: int) -> None:
    with tempfile.TemporaryDirectory(prefix="remote-relay-") as tmp:
        root = Path(tmp)
        ws, config = root / "ws", root / "config"
        ws.mkdir()
        (ws / "a.py").write_text("".join(f"line {i}\n" for i in range(5000)))
        with headless_nvim(cwd=ws) as (address, _process):
            async with attached_editor(address) as nvim:
                await nvim.exec_lua(DIAGNOSTICS, str(ws / "a.py"), timeout=120)
            log = root / "launcher.log"
            with open(log, "wb") as out:
                server = subprocess.Popen(
                    [sys.executable, "-m", "claude_nvim", "remote", "--serve", "--via", "env",
                     "--remote-claude", "sh", "--nvim", address, str(ws)],
                    env={**os.environ, "CLAUDE_CONFIG_DIR": str(config)}, stderr=out)
            try:
                with trio.fail_after(60):
                    while not (found := re.search(rb"ws://127.0.0.1:(\d+)", log.read_bytes())):
                        await trio.sleep(0.05)
                    while not (locks := list((config / "ide").glob("*.lock"))):
                        await trio.sleep(0.05)
                here = int(found[1])
                lock = json.loads(locks[0].read_text())
                there, token = int(locks[0].stem), lock["authToken"]
                rows = []
                for label, name, args, n in (
                        ("getWorkspaceFolders", "getWorkspaceFolders", {}, calls),
                        ("getDiagnostics, ~0.7 MB", "getDiagnostics",
                         {"uri": f"file://{ws}/a.py"}, max(calls // 10, 5))):
                    took: dict[str, list[float]] = {"direct": [], "through the agent": []}
                    # Alternated, four rounds each: neither way gets a warmer Neovim.
                    for way, port in (("through the agent", there), ("direct", here)) * 4:
                        took[way] += await timed(port, token, n // 4 or 1, name, args)
                    for way, all_took in took.items():
                        ordered = sorted(all_took)
                        rows.append((label, way, percentile(ordered, 0.5),
                                     percentile(ordered, 0.95)))
                print(f"{'call':<26}{'way':<20}{'p50 ms':>8}{'p95 ms':>8}")
                for label, way, p50, p95 in rows:
                    print(f"{label:<26}{way:<20}{p50:>8.2f}{p95:>8.2f}")
            finally:
                with contextlib.suppress(Exception):
                    await stop_server(server)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    trio.run(main, parser.parse_args().calls)
