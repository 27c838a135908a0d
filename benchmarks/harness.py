"""The harness every benchmark script shares: a ``claude-nvim serve`` process on a headless
Neovim (:func:`session`), the lock file, the processes' RSS and CPU, medians, the log."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from benchmarks.probe import Probe, percentile, probe_command
from benchmarks.workspace import (
    BUILD_LUA,
    State,
    make_workspace,
)
from claude_nvim._nvim import editor_for
from claude_nvim._nvim.editor import Editor
from claude_nvim._nvim.headless import headless_nvim

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MIB = 2**20
THROTTLE_MS = 50  # claude_nvim.selection.WINDOW_MS; read from the module when it is there
with contextlib.suppress(ImportError):
    from claude_nvim._selection import WINDOW_MS as THROTTLE_MS  # noqa: F401 (read by others)

NVIM_ARGS = ("--clean", "--cmd", "let g:loaded_python3_provider = 0")
CONCURRENCY = (1, 8, 64)
ROOT = Path(__file__).resolve().parent.parent


def exported(rev: str, into: Path) -> Path:
    """claude-nvim at git ``rev``, written into ``into``; its bytecode and this tree's compiled
    (an install has its bytecode: without it, with $PYTHONDONTWRITEBYTECODE, every server
    start compiled 50 modules first)."""
    into.mkdir(exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    for tree in (into, ROOT):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "src")],
                       check=True, stdout=subprocess.DEVNULL)
    return into


def summarize(seconds: Sequence[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {"n": len(ordered), "p50": percentile(ordered, 0.5) * 1e3,
            "p90": percentile(ordered, 0.9) * 1e3, "p99": percentile(ordered, 0.99) * 1e3,
            "max": (ordered[-1] * 1e3) if ordered else math.nan}


def median_of(rounds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per-field median over rounds (numbers only; other fields from the first round)."""
    out: dict[str, Any] = {}
    for key in rounds[0]:
        values = [r[key] for r in rounds if key in r]
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
                   and not math.isnan(v)]
        if numbers and len(numbers) == len(values):
            out[key] = statistics.median(numbers)
        elif all(isinstance(v, bool) for v in values):
            out[key] = all(values)
        else:
            out[key] = values[0]
    return out


# ---------------------------------------------------------------------------------------------
# Processes: /proc readings and the freeze probe


class ProcWatch:
    """CPU time and memory of one process, from /proc (all its threads)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def cpu(self) -> float:
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def _status(self, key: str) -> float:
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
        return math.nan

    def rss_mb(self) -> float:
        return self._status("VmRSS")

    def peak_mb(self) -> float:
        return self._status("VmHWM")

    def reset_peak(self) -> None:
        """Start a new VmHWM period (Linux >= 4.0)."""
        with contextlib.suppress(OSError), open(f"/proc/{self.pid}/clear_refs", "w") as f:
            f.write("5")

    def switches(self) -> int:
        """Context switches of all threads: each one is a wake-up."""
        total = 0
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            with contextlib.suppress(OSError):
                for line in (task / "status").read_text().splitlines():
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        return total


@dataclass
class Session:
    state: State
    workspace: Path
    selected: Path
    paths: list[Path]
    address: str
    driver: Editor
    server: ProcWatch
    nvim: ProcWatch
    port: int
    token: str
    probe: Probe
    server_log: Path
    startup: dict[str, float] = field(default_factory=dict)

    async def keys(self, keys: str) -> None:
        """Type ``keys`` in Neovim and wait until they are consumed."""
        await self.driver.request("nvim_input", keys)
        await self.driver.request("nvim_eval", "1")

    async def mode(self) -> str:
        mode: str = (await self.driver.request("nvim_get_mode"))["mode"]
        return mode


async def stop_server(server: subprocess.Popen[bytes]) -> None:
    """Stop a ``claude-nvim serve`` process: SIGTERM, 5 s to exit, then SIGKILL."""
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        with trio.move_on_after(5):
            while server.poll() is None:
                await trio.sleep(0.02)
        if server.poll() is None:
            server.kill()
    server.wait()


LOAD_BUFFERS_LUA = """
local bufs = {}
for i, path in ipairs(...) do
  bufs[i] = vim.fn.bufadd(path)
  vim.fn.bufload(bufs[i])
end
return bufs
"""
"""Load each of the paths given into a buffer; their numbers, in order."""


async def wait_for_lock(config_dir: Path, server: subprocess.Popen[bytes], log: Path,
                        timeout: float = 30.0) -> tuple[int, str]:
    with trio.fail_after(timeout):
        while True:
            for lock in (config_dir / "ide").glob("*.lock"):
                with contextlib.suppress(OSError, ValueError):
                    content = json.loads(lock.read_text())
                    return int(lock.stem), str(content["authToken"])
            if server.poll() is not None:
                raise RuntimeError(f"claude-nvim serve exited with {server.returncode}:\n"
                                   + log.read_text()[-3000:])
            await trio.sleep(0.01)


def server_command(address: str) -> list[str]:
    script = Path(sys.executable).parent / "claude-nvim"
    base = [str(script)] if script.exists() else [sys.executable, "-m", "claude_nvim"]
    return [*base, "--log-level", "warning", "serve", "--nvim", address]


@contextlib.asynccontextmanager
async def session(state: State, args: argparse.Namespace) -> AsyncIterator[Session]:
    with tempfile.TemporaryDirectory(prefix="claude-nvim-bench-") as tmp:
        root = Path(tmp)
        workspace = root / "workspace"
        workspace.mkdir()
        config_dir = root / "config"
        config_dir.mkdir()
        selected, paths = make_workspace(workspace, state)
        with headless_nvim(cwd=workspace, args=NVIM_ARGS) as (address, nvim_process):
            driver = editor_for(address, timeout=600.0)
            async with trio.open_nursery() as nursery:
                await nursery.start(driver.run)
                t0 = time.perf_counter()
                counts = await driver.exec_lua(BUILD_LUA, [str(p) for p in paths],
                                               state.diagnostics)
                built = time.perf_counter() - t0
                log_path = root / "server.log"
                env = {**os.environ, "CLAUDE_CONFIG_DIR": str(config_dir)}
                env.pop("NVIM", None)
                env.pop("CLAUDE_CODE_SSE_PORT", None)
                with open(log_path, "wb") as log_file:
                    t0 = time.perf_counter()
                    server = subprocess.Popen(server_command(address), cwd=workspace, env=env,
                                              stdin=subprocess.DEVNULL, stdout=log_file,
                                              stderr=subprocess.STDOUT)
                try:
                    port, token = await wait_for_lock(config_dir, server, log_path)
                    started = time.perf_counter() - t0
                    probe_process = await trio.lowlevel.open_process(
                        probe_command(address, args.probe_gap_ms),
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                    probe = Probe(probe_process)
                    try:
                        s = Session(state, workspace, selected, paths, address, driver,
                                    ProcWatch(server.pid), ProcWatch(nvim_process.pid), port,
                                    token, probe, log_path)
                        s.startup = {"build_s": built, "server_start_s": started,
                                     "diagnostics": counts[0], "buffers": counts[1],
                                     "server_rss_mb": s.server.rss_mb(),
                                     "nvim_rss_mb": s.nvim.rss_mb()}
                        yield s
                    finally:
                        await probe.quit()
                finally:
                    await stop_server(server)
                    nursery.cancel_scope.cancel()


async def select_all(s: Session) -> None:
    """A linewise Visual selection of the whole selected region, also the latest selection."""
    n = s.state.selected_lines
    move = f"{n - 1}j" if n > 1 else ""
    await s.keys(f"<Esc>ggV{move}<Esc>gv")
    mode = await s.mode()
    assert mode == "V", f"expected linewise Visual mode, got {mode!r}"


# ---------------------------------------------------------------------------------------------
# The benchmark


@dataclass
class Measured:
    wall: float = 0.0
    server_cpu: float = 0.0
    nvim_cpu: float = 0.0
    client_cpu: float = 0.0
    server_peak_mb: float = 0.0
    nvim_peak_mb: float = 0.0
    freeze: dict[str, Any] | None = None


@contextlib.asynccontextmanager
async def measured(s: Session, *, probe: bool) -> AsyncIterator[Measured]:
    m = Measured()
    s.server.reset_peak()
    s.nvim.reset_peak()
    server_cpu, nvim_cpu, client_cpu = s.server.cpu(), s.nvim.cpu(), time.process_time()
    if probe:
        await s.probe.start()
    # This process's full collections (up to 11 ms, with the run's results in memory) would
    # count as the server's latency: keep what exists now out of them while measuring.
    gc.freeze()
    t0 = time.perf_counter()
    try:
        yield m
    finally:
        m.wall = time.perf_counter() - t0
        gc.unfreeze()
        if probe:
            m.freeze = await s.probe.stop()
        m.server_cpu = s.server.cpu() - server_cpu
        m.nvim_cpu = s.nvim.cpu() - nvim_cpu
        m.client_cpu = time.process_time() - client_cpu
        m.server_peak_mb = s.server.peak_mb()
        m.nvim_peak_mb = s.nvim.peak_mb()


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


