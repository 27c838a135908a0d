"""Load: 20 clients calling at full speed while the selection changes, against `serve`.

Quick (3 s) in the normal suite; the long run is by hand:
``CLAUDE_NVIM_SOAK_SECONDS=600 pytest tests/test_soak.py -s`` prints p99 and RSS over time.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import trio

from claude_nvim.testing import McpError, attached_editor, mcp_client
from helpers import WAIT

SECONDS = float(os.environ.get("CLAUDE_NVIM_SOAK_SECONDS", "3"))
CLIENTS = 20
CALLS = [
    ("getCurrentSelection", {}), ("getLatestSelection", {}), ("getOpenEditors", {}),
    ("getDiagnostics", {}), ("getWorkspaceFolders", {}), ("closeAllDiffTabs", {}),
    ("checkDocumentDirty", {"filePath": "a.py"}), ("getDiagnostics", {"uri": "file:///x.py"}),
]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def test_soak(nvim_address, tmp_path):
    (tmp_path / "a.py").write_text("".join(f"line {i}\n" for i in range(200)))
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    server = await trio.lowlevel.open_process(
        [sys.executable, "-m", "claude_nvim", "serve", "--nvim", nvim_address,
         "--log-level", "warning"], env=env, stderr=subprocess.PIPE)
    try:
        with trio.fail_after(WAIT):
            while not list((tmp_path / "cfg").glob("ide/*.lock")):
                await trio.sleep(0.05)
        lock = next((tmp_path / "cfg").glob("ide/*.lock"))
        port, token = int(lock.stem), json.loads(lock.read_text())["authToken"]
        latencies: list[tuple[float, float]] = []  # (when, seconds)
        errors: list[str] = []
        rss: list[tuple[float, int]] = []
        start = time.monotonic()
        deadline = start + SECONDS

        async def caller(n: int) -> None:
            async with mcp_client(port, token) as client:
                for name, args in itertools.islice(itertools.cycle(CALLS), n, None):
                    if time.monotonic() > deadline:
                        return
                    t = time.monotonic()
                    try:
                        result = await client.call_tool(name, args)
                        if result.get("isError"):
                            errors.append(f"{name}: {result['content'][0]['text']}")
                    except McpError as exc:
                        errors.append(f"{name}: {exc}")
                    latencies.append((t - start, time.monotonic() - t))

        async def user(nvim) -> None:
            await nvim.request("nvim_command", "edit a.py")
            keys = itertools.cycle(["j", "j", "Vjj", "<Esc>", "k", "vl", "<Esc>", "G", "gg"])
            while time.monotonic() < deadline:
                await nvim.request("nvim_input", next(keys))
                await trio.sleep(0.01)

        async def sample() -> None:
            while time.monotonic() < deadline:
                rss.append((time.monotonic() - start, rss_kib(server.pid)))
                await trio.sleep(max(0.2, SECONDS / 20))

        async with attached_editor(nvim_address) as nvim, trio.open_nursery() as nursery:
            nursery.start_soon(user, nvim)
            nursery.start_soon(sample)
            for n in range(CLIENTS):
                nursery.start_soon(caller, n)
    finally:
        server.terminate()
        await server.wait()

    assert errors == [], errors[:5]
    assert server.returncode == 0
    buckets = max(1, min(10, int(SECONDS // 1)))
    width = SECONDS / buckets
    print(f"\nsoak: {CLIENTS} clients, {SECONDS:g} s, {len(latencies)} calls "
          f"({len(latencies) / SECONDS:.0f}/s), errors {len(errors)}")
    for b in range(buckets):
        window = [d for t, d in latencies if b * width <= t < (b + 1) * width]
        sizes = [kib for t, kib in rss if b * width <= t < (b + 1) * width]
        if len(window) > 1:
            p99 = statistics.quantiles(window, n=100)[98] * 1000
            print(f"  {b * width:6.0f}s  calls {len(window):6d}  p50 "
                  f"{statistics.median(window) * 1000:6.2f} ms  p99 {p99:6.2f} ms  "
                  f"rss {max(sizes, default=0) / 1024:5.1f} MiB")
    assert len(latencies) > CLIENTS
    if SECONDS >= 60:  # no growth: the last tenth's RSS within 10 MiB of the second tenth's
        tenth = SECONDS / 10
        second = [kib for t, kib in rss if tenth <= t < 2 * tenth]
        last = [kib for t, kib in rss if t >= 9 * tenth]
        assert max(last) - max(second) < 10 * 1024, (second, last)
