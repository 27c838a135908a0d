"""Units of tool calls: the tools per editor state, the selection's pushes, openDiff's diffs."""

from __future__ import annotations

import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

import trio

from benchmarks.client import (
    Client,
    cursor_on,
    tool_failed,
    tool_text,
)
from benchmarks.harness import (
    CONCURRENCY,
    THROTTLE_MS,
    Session,
    log,
    measured,
    median_of,
    summarize,
)
from benchmarks.units import Units
from benchmarks.workspace import (
    ACCEPT_LUA,
    DIFF_VISIBLE_LUA,
)


class ToolUnits(Units):
    async def bench_tools(self, s: Session, client: Client) -> None:
        units = self.tool_units(s)
        estimates: dict[str, float] = {}
        sizes: dict[str, int] = {}
        for label, tool, arguments in units:  # warm up, estimate, check the answers
            times = []
            for _ in range(2 if self.quick else 3):
                sent, arrived, raw = await client.call(tool, arguments)
                times.append(arrived - sent)
                if tool_failed(raw):
                    raise RuntimeError(f"{label} failed in state {s.state.name}: {raw[:500]}")
            estimates[label] = statistics.median(times)
            sizes[label] = len(raw.encode())
        per_round: dict[tuple[str, int], list[dict[str, Any]]] = {}
        notes: dict[tuple[str, int], str] = {}
        for round_index in range(self.rounds):
            log(f"{self.elapsed()} {s.state.name}: tools round {round_index + 1}/{self.rounds}")
            for label, tool, arguments in units:
                for concurrency in CONCURRENCY:
                    key = (label, concurrency)
                    queued = estimates[label] * concurrency  # seconds of work per wave
                    heavy = concurrency > 1 and queued > self.args.heavy_s
                    if heavy and (queued > self.args.max_unit_s or round_index > 0):
                        if round_index == 0:
                            notes[key] = (f"skipped: one wave would take ~{queued:.0f} s "
                                          f"(> --max-unit-s {self.args.max_unit_s:g})")
                        continue
                    row = await self.tool_unit(s, client, tool, arguments, concurrency,
                                               estimates[label], heavy)
                    if heavy:
                        notes[key] = "one wave, probe on, first round only"
                    per_round.setdefault(key, []).append(row)
        for label, _, _ in units:
            for concurrency in CONCURRENCY:
                key = (label, concurrency)
                rounds = per_round.get(key)
                self.results["tools"].append({
                    "state": s.state.name, "tool": label, "concurrency": concurrency,
                    "reply_bytes": sizes[label], "estimate_ms": estimates[label] * 1e3,
                    "note": notes.get(key, ""),
                    "median": median_of(rounds) if rounds else None, "rounds": rounds or []})

    async def tool_unit(self, s: Session, client: Client, tool: str, arguments: dict[str, Any],
                        concurrency: int, estimate: float, heavy: bool) -> dict[str, Any]:
        """One unit: a clean pass (latency, throughput, CPU), then a pass with the freeze probe.
        A heavy unit (a wave of queued calls costing seconds) is one wave with the probe on."""
        clean, freeze = self.call_counts(estimate, concurrency)
        if heavy:
            clean = concurrency
        async with measured(s, probe=heavy) as m:
            latencies, errors, wall, _ = await self.calls(
                client, tool, arguments, concurrency, clean)
        row: dict[str, Any] = summarize(latencies)
        row.update({
            "calls_per_s": len(latencies) / wall, "errors": errors,
            "server_cpu_ms_per_call": m.server_cpu * 1e3 / len(latencies),
            "nvim_cpu_ms_per_call": m.nvim_cpu * 1e3 / len(latencies),
            "client_cpu_ms_per_call": m.client_cpu * 1e3 / len(latencies),
            "server_peak_mb": m.server_peak_mb, "nvim_peak_mb": m.nvim_peak_mb,
        })
        if heavy or errors:  # every call answered in time leaves nothing behind
            await self.settle(s)
        if m.freeze is None:
            async with measured(s, probe=True) as m:
                flat, ferrors, _, _ = await self.calls(
                    client, tool, arguments, concurrency, freeze)
            row["errors"] += ferrors
            row["p50_under_probe"] = summarize(flat)["p50"]
            if ferrors:
                await self.settle(s)
        assert m.freeze is not None
        row.update({"freeze_max": m.freeze["max"], "freeze_probes": m.freeze["n"]})
        return row

    # selection_changed -----------------------------------------------------------------------

    async def selection_trial(self, s: Session, client: Client, kind: str, lines: int,
                              *, probe: bool) -> dict[str, Any]:
        """One timed selection change, from a rested normal-mode cursor on line 1."""
        window = THROTTLE_MS / 1000
        # Through a distinct position: the Lua sends nothing when the state equals the last sent.
        await s.keys("<Esc>3G")
        await trio.sleep(window + 0.02)
        await s.keys("gg")
        await trio.sleep(2 * window + 0.02)
        result: dict[str, Any] = {}
        async with measured(s, probe=probe) as m:
            if kind == "cursor":
                samples = []
                for i in range(10 if self.quick else 20):
                    key, line = ("j", 1) if i % 2 == 0 else ("k", 0)
                    after = len(client.notes)
                    t0 = time.perf_counter()
                    await s.driver.request("nvim_input", key)
                    arrived, _ = await client.wait_note(cursor_on(line), after)
                    samples.append(arrived - t0)
                    await trio.sleep(window + 0.03)
                result = summarize(samples)
            elif kind == "visual":
                if lines > 1:  # enter Visual mode first, then one move makes it `lines` long
                    after = len(client.notes)
                    await s.driver.request("nvim_input", "V")
                    await client.wait_note(lambda p: not p["selection"]["isEmpty"], after)
                    await trio.sleep(window + 0.03)
                keys = "V" if lines == 1 else f"{lines - 1}j"
                after = len(client.notes)
                t0 = time.perf_counter()
                await s.driver.request("nvim_input", keys)
                arrived, message = await client.wait_note(
                    lambda p: p["selection"]["end"]["line"] == lines - 1
                    and not p["selection"]["isEmpty"], after)
                params = message["params"]
                result = {"latency": (arrived - t0) * 1e3, "text_chars": len(params["text"]),
                          "truncated": bool(params.get("truncated"))}
            elif kind == "burst":
                moves, step, spacing = 40, 20, 0.025
                after = len(client.notes)
                await s.driver.request("nvim_input", "V")
                await client.wait_note(lambda p: not p["selection"]["isEmpty"], after)
                await trio.sleep(window + 0.03)
                after = len(client.notes)
                t0 = time.perf_counter()
                for i in range(moves):
                    await trio.sleep_until(trio.current_time() + max(
                        0.0, t0 + i * spacing - time.perf_counter()))
                    last_sent = time.perf_counter()
                    await s.driver.request("nvim_input", f"{step}j")
                final_line = moves * step
                arrived, _ = await client.wait_note(
                    lambda p: p["selection"]["end"]["line"] == final_line, after)
                await trio.sleep(3 * window)  # anything later would be extra messages
                burst = [n for n in client.notes[after:]
                         if n[1].get("method") == "selection_changed"]
                duration = last_sent - t0
                result = {"messages": len(burst), "final_latency": (arrived - last_sent) * 1e3,
                          "burst_ms": duration * 1e3,
                          "expected_messages": 1 + duration / window,
                          "bytes": sum(len(json.dumps(n[1])) for n in burst)}
        result["freeze_max"] = m.freeze["max"] if m.freeze else math.nan
        result["nvim_cpu_ms"] = m.nvim_cpu * 1e3
        result["server_cpu_ms"] = m.server_cpu * 1e3
        await s.keys("<Esc>gg")
        return result

    async def bench_selection(self, s: Session, client: Client) -> None:
        trials = [("cursor", 1), ("visual", 1), ("visual", 1_000),
                  ("visual", s.state.selected_lines), ("burst", 801)]
        trials = list(dict.fromkeys(trials))
        rows: dict[str, list[dict[str, Any]]] = {}
        for round_index in range(self.rounds):
            log(f"{self.elapsed()} {s.state.name}: selection round {round_index + 1}")
            for kind, lines in trials:
                label = {"cursor": "cursor move", "burst": "burst 40 x 20j / 25 ms"}.get(
                    kind, f"Visual {lines:,} lines")
                clean = await self.selection_trial(s, client, kind, lines, probe=False)
                frozen = await self.selection_trial(s, client, kind, lines, probe=True)
                clean["freeze_max"] = frozen["freeze_max"]
                rows.setdefault(label, []).append(clean)
        self.results["selection"] = {label: {"median": median_of(r), "rounds": r}
                                     for label, r in rows.items()}

    # openDiff --------------------------------------------------------------------------------

    async def diff_cycle(self, s: Session, client: Client, path: Path, *, probe: bool
                         ) -> dict[str, Any]:
        lines = path.read_text().splitlines()
        middle = len(lines) // 2
        lines[middle] = lines[middle].replace("compute", "compute_fast")
        lines.append("# added by Claude")
        contents = "\n".join(lines) + "\n"
        tab = f"✻ [Claude Code] {path.name} (bench) ⧉"
        arguments = {"old_file_path": str(path), "new_file_path": str(path),
                     "new_file_contents": contents, "tab_name": tab}
        reply: dict[str, Any] = {}
        result: dict[str, Any] = {}
        async with measured(s, probe=probe) as m, trio.open_nursery() as nursery:
            async def open_diff() -> None:
                reply["sent"], reply["arrived"], reply["raw"] = await client.call(
                    "openDiff", arguments)

            nursery.start_soon(open_diff)
            await trio.sleep(0)
            t0 = time.perf_counter()
            visible = await self.until(s, DIFF_VISIBLE_LUA)
            accepted_at = time.perf_counter()
            assert await s.driver.exec_lua(ACCEPT_LUA), "no proposal window to :write"
            with trio.fail_after(30):
                while "raw" not in reply:
                    await trio.sleep(0.0005)
            outcome = tool_text(reply["raw"])
            assert outcome.startswith("FILE_SAVED"), outcome[:200]
            closes: list[float] = []

            async def close() -> None:
                sent, arrived, raw = await client.call("close_tab", {"tab_name": tab})
                assert "TAB_CLOSED" in raw
                closes.append(arrived - sent)

            t_close = time.perf_counter()
            async with trio.open_nursery() as both:
                both.start_soon(close)
                both.start_soon(close)
            closed = await self.until(s, "return #vim.api.nvim_list_tabpages() == 1")
            result = {"visible": (visible - t0) * 1e3,
                      "accept_to_saved": (reply["arrived"] - accepted_at) * 1e3,
                      "close_tab_x2": max(closes) * 1e3,
                      "tab_gone": (closed - t_close) * 1e3}
        result["freeze_max"] = m.freeze["max"] if m.freeze else math.nan
        result["server_peak_mb"] = m.server_peak_mb
        result["nvim_cpu_ms"] = m.nvim_cpu * 1e3
        return result

    async def close_all_with_diff(self, s: Session, client: Client, path: Path,
                                  accept: bool) -> dict[str, Any]:
        contents = path.read_text() + "# added by Claude\n"
        tab = f"✻ [Claude Code] {path.name} (closeAll) ⧉"
        arguments = {"old_file_path": str(path), "new_file_path": str(path),
                     "new_file_contents": contents, "tab_name": tab}
        reply: dict[str, Any] = {}
        async with trio.open_nursery() as nursery:
            async def open_diff() -> None:
                reply["sent"], reply["arrived"], reply["raw"] = await client.call(
                    "openDiff", arguments)

            nursery.start_soon(open_diff)
            await self.until(s, DIFF_VISIBLE_LUA)
            if accept:
                await s.driver.exec_lua(ACCEPT_LUA)
                with trio.fail_after(30):
                    while "raw" not in reply:
                        await trio.sleep(0.0005)
            sent, arrived, raw = await client.call("closeAllDiffTabs")
            assert "CLOSED_1_DIFF_TABS" in raw, raw[:300]
            with trio.fail_after(30):
                while "raw" not in reply:
                    await trio.sleep(0.0005)
            gone = await self.until(s, "return #vim.api.nvim_list_tabpages() == 1")
        outcome = tool_text(reply["raw"])
        assert outcome.startswith("FILE_SAVED" if accept else "DIFF_REJECTED"), outcome[:100]
        return {"closeAllDiffTabs": (arrived - sent) * 1e3,
                "openDiff_answered": (reply["arrived"] - sent) * 1e3 if not accept else math.nan,
                "tab_gone": (gone - sent) * 1e3}

    async def bench_diffs(self, s: Session, client: Client) -> None:
        await s.keys("<Esc>gg")
        small_file = s.paths[1] if len(s.paths) > 1 else s.selected
        files = [("200 lines", small_file), (f"{s.state.selected_lines:,} lines", s.selected)]
        rows: dict[str, list[dict[str, Any]]] = {}
        for round_index in range(self.rounds):
            log(f"{self.elapsed()} {s.state.name}: openDiff round {round_index + 1}")
            for label, path in files:
                clean = await self.diff_cycle(s, client, path, probe=False)
                frozen = await self.diff_cycle(s, client, path, probe=True)
                clean["freeze_max"] = frozen["freeze_max"]
                rows.setdefault(f"openDiff cycle, {label}", []).append(clean)
            for accept in (False, True):
                label = "closeAllDiffTabs, " + ("accepted" if accept else "pending") + " diff"
                rows.setdefault(label, []).append(
                    await self.close_all_with_diff(s, client, small_file, accept))
        self.results["diffs"] = {label: {"median": median_of(r), "rounds": r}
                                 for label, r in rows.items()}

    # connections, big messages, memory, idle -------------------------------------------------
