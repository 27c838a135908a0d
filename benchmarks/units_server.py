"""Units of the server's own work: connections, inbound floods, reloads, hooks, the review."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import trio

from benchmarks.client import (
    AUTH_HEADER,
    Client,
    connect,
    cursor_on,
    tool_failed,
)
from benchmarks.harness import (
    MIB,
    ROOT,
    Session,
    log,
    measured,
    median_of,
    summarize,
)
from benchmarks.probe import percentile
from benchmarks.units import Units
from benchmarks.workspace import (
    RECORD_RELOADS_LUA,
    RELOADED_LUA,
    SIGNED_LUA,
    code_line,
)
from benchmarks.wsclient import TEXT, Closed, frame
from benchmarks.wsclient import connect as ws_connect
from claude_nvim._hooks import claude_settings

sys.path.insert(0, str(ROOT / "tests"))
from helpers import (
    inotify_watches,  # the tests count them the same way
    interpolate,  # claude's interpolation of a hook's input, as the tests do
)


class ServerUnits(Units):
    async def bench_connections(self, s: Session) -> None:
        setups: list[dict[str, float]] = []
        for round_index in range(self.rounds):
            log(f"{self.elapsed()} connections round {round_index + 1}")
            handshakes, readies = [], []
            for _ in range(10 if self.quick else 20):
                t0 = time.perf_counter()
                async with connect(s.port, s.token, initialize=False) as client:
                    t1 = time.perf_counter()
                    await client.initialize()
                    t2 = time.perf_counter()
                handshakes.append(t1 - t0)
                readies.append(t2 - t0)
            row = {"handshake_p50": summarize(handshakes)["p50"],
                   "ready_p50": summarize(readies)["p50"], "ready_max": summarize(readies)["max"]}
            row.update(await self.twenty_clients(s))
            setups.append(row)
        self.results["connections"] = {"median": median_of(setups), "rounds": setups}

    async def twenty_clients(self, s: Session) -> dict[str, float]:
        ready: list[float] = []
        clients: list[Client] = []
        all_connected, finished = trio.Event(), trio.Event()
        s.server.reset_peak()
        t0 = time.perf_counter()

        async def one() -> None:
            async with connect(s.port, s.token) as client:
                ready.append(time.perf_counter() - t0)
                clients.append(client)
                if len(clients) == 20:
                    all_connected.set()
                await finished.wait()

        async with trio.open_nursery() as nursery:
            for _ in range(20):
                nursery.start_soon(one)
            with trio.fail_after(60):
                await all_connected.wait()
            all_ready = time.perf_counter() - t0
            await trio.sleep(1.0)  # past the first-push delay: every client gets pushes now
            await s.keys("<Esc>gg")
            await trio.sleep(0.2)
            afters = [len(c.notes) for c in clients]
            t_move = time.perf_counter()
            await s.driver.request("nvim_input", "j")
            arrivals = await self._all_notified(clients, afters, 1)
            await trio.sleep(0.2)
            rss = s.server.rss_mb()
            idle_seconds = 1.0 if self.quick else 3.0
            cpu0, nvim0 = s.server.cpu(), s.nvim.cpu()
            sw0, nsw0 = s.server.switches(), s.nvim.switches()
            await trio.sleep(idle_seconds)
            idle = {"idle_server_cpu_ms_per_s": (s.server.cpu() - cpu0) * 1e3 / idle_seconds,
                    "idle_server_wakeups_per_s": (s.server.switches() - sw0) / idle_seconds,
                    "idle_nvim_cpu_ms_per_s": (s.nvim.cpu() - nvim0) * 1e3 / idle_seconds,
                    "idle_nvim_wakeups_per_s": (s.nvim.switches() - nsw0) / idle_seconds}
            await s.keys("<Esc>gg")
            finished.set()
        return {"twenty_all_ready": all_ready * 1e3,
                "twenty_ready_p50": summarize(ready)["p50"],
                "twenty_fanout_last": (max(arrivals) - t_move) * 1e3,
                "twenty_server_rss_mb": rss, "twenty_server_peak_mb": s.server.peak_mb(),
                **idle}

    async def _all_notified(self, clients: list[Client], afters: list[int], line: int
                            ) -> list[float]:
        arrivals: list[float] = []

        async def wait(client: Client, after: int) -> None:
            arrived, _ = await client.wait_note(cursor_on(line), after)
            arrivals.append(arrived)

        async with trio.open_nursery() as nursery:
            for client, after in zip(clients, afters, strict=True):
                nursery.start_soon(wait, client, after)
        return arrivals

    async def bench_inbound(self, s: Session) -> None:
        line = json.dumps(code_line(1) + '  "quoted"\n')[1:-1]
        rows: list[dict[str, Any]] = []
        for round_index in range(self.rounds):
            log(f"{self.elapsed()} 16 MiB inbound round {round_index + 1}")
            async with connect(s.port, s.token) as client:
                request_id = client.next_id()
                head = ('{"jsonrpc":"2.0","id":' + str(request_id) + ',"method":"tools/call",'
                        '"params":{"name":"getWorkspaceFolders","_meta":{"progressToken":1},'
                        '"arguments":{"padding":"')
                tail = '"}}}'
                body_size = 16 * MIB - len(head) - len(tail)
                padding = (line * (body_size // len(line) + 1))[:body_size]
                text = head + padding + tail
                data = text.encode()
                assert len(data) == 16 * MIB
                prepared = frame(TEXT, data)
                del data
                base = s.server.rss_mb()
                s.server.reset_peak()
                async with measured(s, probe=True) as m:
                    sent, arrived, raw = await client.request_raw(request_id, prepared)
                assert not tool_failed(raw), raw[:300]
                rows.append({"handled": (arrived - sent) * 1e3, "server_rss_before_mb": base,
                             "server_peak_mb": m.server_peak_mb,
                             "freeze_max": m.freeze["max"] if m.freeze else math.nan})
            del text, padding, prepared
        over = await self.over_limit(s)
        self.results["inbound"] = {"16MiB": {"median": median_of(rows), "rounds": rows},
                                   "over_limit": over}

    async def over_limit(self, s: Session) -> dict[str, Any]:
        size = 96 * MIB
        log(f"{self.elapsed()} over-limit message ({size // MIB} MiB)")
        text = '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"p":"' + "x" * size + '"}}'
        prepared = frame(TEXT, text.encode())
        base = s.server.rss_mb()
        s.server.reset_peak()
        code: int | None = None
        send_completed = False
        ws = await ws_connect(s.port, headers=[(AUTH_HEADER, s.token)])
        t0 = time.perf_counter()
        try:
            with trio.fail_after(60):
                with contextlib.suppress(Closed, OSError):
                    await ws.send_frame(prepared)
                    send_completed = True
                async for _ in ws.messages():
                    pass
            closed = time.perf_counter() - t0
            code = ws.closed.code if ws.closed is not None else None
        finally:
            await ws.aclose()
        del prepared
        async with connect(s.port, s.token) as bystander:
            alive = json.loads((await bystander.request("ping"))[2]).get("result") == {}
        return {"bytes": len(text), "close_code": code, "closed_after_ms": closed * 1e3,
                "client_finished_sending": send_completed,
                "server_rss_before_mb": base, "server_peak_mb": s.server.peak_mb(),
                "server_still_serves": alive}

    async def reload_trial(self, s: Session, path: Path, lines: int, how: str, trial: int
                           ) -> float:
        """Write ``path`` behind Neovim's back (``how``: in place or by rename); seconds from
        the end of the write to the end of the buffer's reload (Neovim's clock, the same
        CLOCK_MONOTONIC)."""
        text = "".join(code_line(i) + "\n" for i in range(lines - 1)) + f"# trial {trial}\n"
        if how == "rename":
            temporary = path.with_name(f".{path.name}.tmp")
            temporary.write_text(text, encoding="utf-8")
            os.replace(temporary, path)
        else:
            path.write_text(text, encoding="utf-8")
        written = time.monotonic_ns()
        with trio.fail_after(30):
            while True:
                reloaded = await s.driver.exec_lua(RELOADED_LUA, str(path), f"# trial {trial}")
                if reloaded:
                    return max(0, reloaded - written) / 1e9
                await trio.sleep(0.005)

    async def bench_bufsync(self, s: Session) -> None:
        await s.keys("<Esc>gg")
        await s.driver.exec_lua(RECORD_RELOADS_LUA)
        trials = 5 if self.quick else 20
        small, big = s.paths[-1], s.selected
        big_lines = max(s.state.selected_lines, s.state.other_lines)
        rows: dict[str, Any] = {}
        for label, path, lines, how in (
                (f"{s.state.other_lines}-line file, written in place", small,
                 s.state.other_lines, "in place"),
                (f"{s.state.other_lines}-line file, replaced by rename", small,
                 s.state.other_lines, "rename"),
                (f"{big_lines:,}-line file, written in place", big, big_lines, "in place")):
            log(f"{self.elapsed()} reload: {label}")
            latencies = []
            for probe in (False, True):  # latency without the probe's load, then the freeze
                async with measured(s, probe=probe) as m:
                    for trial in range(trials if not probe else max(2, trials // 4)):
                        latency = await self.reload_trial(s, path, lines, how, trial)
                        if not probe:
                            latencies.append(latency)
                        await trio.sleep(0.05)  # one write at a time, as Claude's edits come
                if not probe:
                    nvim_cpu_ms = m.nvim_cpu * 1e3 / trials
            ordered = sorted(latencies)
            rows[label] = {"n": len(ordered), "p50": percentile(ordered, 0.5) * 1e3,
                           "p95": percentile(ordered, 0.95) * 1e3, "max": ordered[-1] * 1e3,
                           "freeze_max": m.freeze["max"] if m.freeze else math.nan,
                           "nvim_cpu_ms": nvim_cpu_ms}
        await self.settle(s)
        # Neovim writes swap files once 'updatetime' after the last change (the reloads):
        # once, not a cost of being idle.
        await trio.sleep(await s.driver.request("nvim_get_option_value", "updatetime", {})
                         / 1000 + 0.5)
        idle_seconds = 2.0 if self.quick else 5.0
        log(f"{self.elapsed()} idle with {s.state.buffers:,} watched buffers, {idle_seconds} s")
        cpu0, nvim0 = s.server.cpu(), s.nvim.cpu()
        sw0, nsw0 = s.server.switches(), s.nvim.switches()
        await trio.sleep(idle_seconds)
        idle = {"buffers": s.state.buffers, "inotify_watches": inotify_watches(s.nvim.pid),
                "nvim_cpu_ms_per_s": (s.nvim.cpu() - nvim0) * 1e3 / idle_seconds,
                "nvim_wakeups_per_s": (s.nvim.switches() - nsw0) / idle_seconds,
                "server_cpu_ms_per_s": (s.server.cpu() - cpu0) * 1e3 / idle_seconds,
                "server_wakeups_per_s": (s.server.switches() - sw0) / idle_seconds}
        self.results["bufsync"] = {"reload": rows, "idle": idle}

    # claude's hooks --------------------------------------------------------------------------

    async def hook_turn(self, client: Client, paths: list[Path], turn: int,
                        latencies: dict[str, list[float]]) -> None:
        """One turn of claude's hooks as claude-nvim's --settings make them (each its own
        tools/call): the prompt, then for each file a Read and an Edit (the file written between
        PreToolUse and PostToolUse, as claude does: bufsync reloads its buffer), then Stop."""
        settings = claude_settings()["hooks"]
        base = {"session_id": "bench-session", "cwd": str(paths[0].parent),
                "prompt_id": f"turn-{turn}", "permission_mode": "acceptEdits"}

        async def hook(label: str, name: str, **event: Any) -> None:
            event = {**base, "hook_event_name": name, **event}
            for group in settings[name]:
                matcher = group.get("matcher")
                if matcher and not re.fullmatch(matcher, event.get("tool_name", "")):
                    continue
                for spec in group["hooks"]:
                    sent, arrived, raw = await client.call(spec["tool"],
                                                           interpolate(spec["input"], event))
                    if tool_failed(raw):
                        raise RuntimeError(f"hook {label} failed: {raw[:300]}")
                    latencies.setdefault(label, []).append(arrived - sent)

        await hook("UserPromptSubmit", "UserPromptSubmit", prompt=f"Change {len(paths)} files.")
        for i, path in enumerate(paths):
            read = {"tool_name": "Read", "tool_input": {"file_path": str(path)},
                    "tool_use_id": f"toolu_r{turn}_{i}"}
            await hook("PostToolUse (Read)", "PostToolUse", **read,
                       tool_response={"type": "text"})
            edit = {"tool_name": "Edit", "tool_use_id": f"toolu_e{turn}_{i}",
                    "tool_input": {"file_path": str(path), "old_string": "x",
                                   "new_string": "y", "replace_all": False}}
            await hook("PreToolUse (Edit)", "PreToolUse", **edit)
            with open(path, "a", encoding="utf-8") as f:
                f.write(f"# turn {turn}\n")
            await hook("PostToolUse (Edit)", "PostToolUse", **edit,
                       tool_response={"filePath": str(path)})
        await hook("Stop", "Stop", stop_hook_active=False, last_assistant_message="Done.")

    async def bench_hooks(self, s: Session, client: Client) -> None:
        """claude's hooks: each hook's round trip (claude waits for it on every tool call),
        and the editor's longest freeze while turns of them run (bufsync reloading too)."""
        paths = s.paths[:20] if self.quick else s.paths[:100]
        rows: list[dict[str, Any]] = []
        for round_index in range(self.rounds):
            log(f"{self.elapsed()} {s.state.name}: hooks round {round_index + 1}, "
                f"{len(paths)} files a turn")
            latencies: dict[str, list[float]] = {}
            async with measured(s, probe=False) as m:
                for turn in range(2):
                    await self.hook_turn(client, paths, round_index * 10 + turn, latencies)
            row: dict[str, Any] = {}
            for label, values in latencies.items():
                for key, value in summarize(values).items():
                    row[f"{label}: {key}"] = value
            calls = sum(len(v) for v in latencies.values())
            row["server_cpu_ms_per_hook"] = m.server_cpu * 1e3 / calls
            row["nvim_cpu_ms_per_hook"] = m.nvim_cpu * 1e3 / calls
            row["server_peak_mb"] = m.server_peak_mb
            await self.settle(s)
            async with measured(s, probe=True) as m:
                await self.hook_turn(client, paths, round_index * 10 + 9, {})
                # Until the turn is recorded and its signs are in the buffers (after Stop).
                await self.until(s, SIGNED_LUA.replace("PATH", json.dumps(str(paths[-1]))))
            assert m.freeze is not None
            row["freeze_max"] = m.freeze["max"]
            await self.settle(s)
            # The review of that turn: :ClaudeNvimReview -> its tab and quickfix list shown.
            row["review_ms"] = await self.review_turn(s, len(paths)) * 1e3
            await self.settle(s)
            async with measured(s, probe=True) as m:
                await self.review_turn(s, len(paths))
            assert m.freeze is not None
            row["review_freeze_max"] = m.freeze["max"]
            row["review_nvim_cpu_ms"] = m.nvim_cpu * 1e3
            row["review_server_cpu_ms"] = m.server_cpu * 1e3
            await self.settle(s)
            rows.append(row)
        self.results["hooks"] = {"files": len(paths), "median": median_of(rows),
                                 "rounds": rows}

    async def review_turn(self, s: Session, files: int) -> float:
        """Seconds from :ClaudeNvimReview to its tab and its quickfix list (one entry per hunk:
        one per file here) shown; the tab is closed after."""
        t0 = time.perf_counter()
        await s.driver.request("nvim_command", "ClaudeNvimReview")
        shown = await self.until(s, f"return #vim.fn.getqflist() == {files} "
                                    "and #vim.api.nvim_list_tabpages() == 2")
        await s.driver.request("nvim_command", "tabclose")
        return shown - t0
