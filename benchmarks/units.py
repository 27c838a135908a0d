"""The base of the benchmark's units: options, results, calls in waves, waits."""

from __future__ import annotations

import argparse
import time
from typing import Any

import trio

from benchmarks.client import (
    Client,
    tool_failed,
)
from benchmarks.harness import (
    Session,
)


class Units:
    """What every unit uses: the options, the results, calls in waves, waiting in Neovim."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.quick: bool = args.quick
        self.rounds: int = args.rounds
        self.budget: float = args.budget
        self.results: dict[str, Any] = {"tools": [], "sessions": {}}
        self.started = time.perf_counter()

    def elapsed(self) -> str:
        return f"[{time.perf_counter() - self.started:6.1f} s]"

    # tools/call ------------------------------------------------------------------------------

    def tool_units(self, s: Session) -> list[tuple[str, str, dict[str, Any]]]:
        selected = str(s.selected)
        return [
            ("getCurrentSelection", "getCurrentSelection", {}),
            ("getLatestSelection", "getLatestSelection", {}),
            ("getOpenEditors", "getOpenEditors", {}),
            ("getDiagnostics(uri)", "getDiagnostics", {"uri": "file://" + selected}),
            ("getDiagnostics(all)", "getDiagnostics", {}),
            ("getWorkspaceFolders", "getWorkspaceFolders", {}),
            ("checkDocumentDirty", "checkDocumentDirty", {"filePath": selected}),
            ("closeAllDiffTabs", "closeAllDiffTabs", {}),
        ]

    async def calls(self, client: Client, tool: str, arguments: dict[str, Any],
                    concurrency: int, total: int) -> tuple[list[float], int, float, str]:
        """``total`` calls with ``concurrency`` in flight: latencies, errors, wall, last reply."""
        latencies: list[float] = []
        errors = 0
        remaining = total
        last = ""

        async def worker() -> None:
            nonlocal remaining, errors, last
            while remaining > 0:
                remaining -= 1
                sent, arrived, raw = await client.call(tool, arguments)
                latencies.append(arrived - sent)
                if tool_failed(raw):
                    errors += 1
                last = raw

        t0 = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(worker)
        return latencies, errors, time.perf_counter() - t0, last

    def call_counts(self, estimate: float, concurrency: int) -> tuple[int, int]:
        """Calls for the clean pass and the freeze pass of a unit, from one call's cost."""
        cap = 100 if self.quick else 600
        per_call = max(estimate, 1e-4)
        if concurrency == 1:
            clean = max(3, min(cap, int(self.budget / per_call)))
            return clean, max(2, min(clean, int(self.budget / 2 / per_call)))
        waves = -(-max(concurrency, min(cap * 4, int(2 * self.budget / per_call))) // concurrency)
        freeze_waves = -(-max(concurrency, min(waves * concurrency, int(
            self.budget / per_call))) // concurrency)
        return waves * concurrency, freeze_waves * concurrency

    async def settle(self, s: Session) -> None:
        """Wait until Neovim and the server are idle again: calls that timed out on the server
        may still be queued in Neovim, and their late answers still decoded by the server."""
        with trio.move_on_after(300):
            await s.driver.request("nvim_eval", "1", timeout=None)  # behind anything queued
            while True:
                before = s.server.cpu()
                await trio.sleep(0.1)
                if s.server.cpu() - before < 0.015:
                    return

    async def until(self, s: Session, lua: str, timeout: float = 30.0) -> float:
        """Poll a Lua chunk until it returns true; the time it first did."""
        with trio.fail_after(timeout):
            while not await s.driver.exec_lua(lua):
                await trio.sleep(0.001)
        return time.perf_counter()

    async def freeze_baseline(self, s: Session) -> dict[str, Any]:
        """The probe alone, nothing else running: the noise floor of the freeze column."""
        await s.probe.start()
        await trio.sleep(0.5 if self.quick else 1.0)
        return await s.probe.stop()

    # driver ----------------------------------------------------------------------------------

