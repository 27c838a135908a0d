"""claude-nvim benchmark: speed and memory against a real Neovim, over real WebSockets.

One command::

    .venv/bin/python -m benchmarks.bench [--quick] [--rounds N] [--json out.json]

It starts a headless Neovim per editor state, runs ``claude-nvim serve --nvim <socket>`` as a
separate process (its RSS and CPU are read from ``/proc/<pid>``), reads the lock file from a
temporary ``CLAUDE_CONFIG_DIR`` and talks to the server the way the ``claude`` CLI does
(subprotocol ``mcp``, the auth header, initialize, ``notifications/initialized``, ``tools/list``,
``tools/call`` with ``_meta.progressToken``). A second RPC client drives Neovim like a user; a
third one, in its own process, is the "keystroke": it sends ``nvim_eval("1")`` in a tight loop
while a unit runs, and its longest round trip is how long the editor froze.

Latency and throughput come from a pass without that probe; the freeze from a second pass of
the same unit with the probe running (a tight loop costs a core, which would skew latency on a
2-core machine). Every unit runs ``--rounds`` times and medians of the per-round figures are
reported. Compare rows of one run: the machine is shared and noisy.

The package's rooms: ``harness`` (the server process, the session, medians), ``client`` (the
MCP client), ``probe`` (the freeze probe), ``workspace`` (the editor states), ``units`` with
``units_tools`` and ``units_server`` (what is measured), ``anchor`` (beside claudecode.nvim),
``report`` (tables and goal rows). Other scripts import the harness.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

if not __package__:  # run as a file, or imported as ``bench`` by a script beside it
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.anchor import PluginBench
from benchmarks.client import Client, connect, tool_text
from benchmarks.harness import (
    LOAD_BUFFERS_LUA,
    THROTTLE_MS,
    ProcWatch,
    log,
    select_all,
    server_command,
    session,
    stop_server,
    wait_for_lock,
)
from benchmarks.probe import Probe, probe_main
from benchmarks.report import nvim_version, report, targets
from benchmarks.units_server import ServerUnits
from benchmarks.units_tools import ToolUnits
from benchmarks.workspace import ACCEPT_LUA, DIFF_VISIBLE_LUA, QUICK_STATES, STATES

__all__ = [  # what scripts beside it import from ``bench``
    "ACCEPT_LUA", "DIFF_VISIBLE_LUA", "LOAD_BUFFERS_LUA", "Client", "Probe", "ProcWatch",
    "connect", "server_command", "stop_server", "tool_text", "wait_for_lock",
]


class Bench(ToolUnits, ServerUnits):
    """Every unit, run per editor state."""

    async def run(self) -> None:
        states = QUICK_STATES if self.quick else STATES
        wanted = self.args.states.split(",") if self.args.states else list(states)
        sections = set(self.args.only.split(",")) if self.args.only else {
            "tools", "selection", "diffs", "connections", "inbound", "bufsync", "plugin",
            "hooks"}
        if "plugin" in sections:
            await PluginBench(self, self.args.claudecode).run()
            if sections == {"plugin"}:
                wanted = []
        for name in wanted:
            state = states[name]
            log(f"{self.elapsed()} state {name}: building {state}")
            async with session(state, self.args) as s:
                log(f"{self.elapsed()} {name}: built in {s.startup['build_s']:.1f} s, server "
                    f"up in {s.startup['server_start_s'] * 1e3:.0f} ms")
                info: dict[str, Any] = {"state": state.__dict__, **s.startup}
                self.results["sessions"][name] = info
                info["freeze_baseline"] = await self.freeze_baseline(s)
                async with connect(s.port, s.token) as client:
                    await select_all(s)
                    if "tools" in sections:
                        await self.bench_tools(s, client)
                    if (name == "medium" or len(wanted) == 1) and "hooks" in sections:
                        await self.bench_hooks(s, client)
                    if name == "large" or len(wanted) == 1:
                        await trio.sleep(0.6)  # the first selection push comes 0.5 s in
                        if "selection" in sections:
                            await self.bench_selection(s, client)
                        if "diffs" in sections:
                            await self.bench_diffs(s, client)
                if (name == "large" or len(wanted) == 1) and "bufsync" in sections:
                    await self.bench_bufsync(s)
                if name == "small" or len(wanted) == 1:
                    await s.keys("<Esc>gg")
                    if "connections" in sections:
                        await self.bench_connections(s)
                    if "inbound" in sections:
                        await self.bench_inbound(s)
                info["server_rss_end_mb"] = s.server.rss_mb()
                info["server_peak_total_mb"] = s.server.peak_mb()
                info["nvim_rss_end_mb"] = s.nvim.rss_mb()
        self.results["wall_s"] = time.perf_counter() - self.started




def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="a reduced run (< 1 minute): 1 round, fewer calls, 100 buffers in "
                             "the large state (its 100,000-line selection is kept)")
    parser.add_argument("--rounds", type=int, help="rounds per unit (default 3, quick 1)")
    parser.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    parser.add_argument("--states", help="comma-separated subset of small,medium,large")
    parser.add_argument("--only", help="comma-separated subset of "
                                       "tools,selection,diffs,connections,inbound,bufsync,plugin,"
                                       "hooks")
    parser.add_argument("--claudecode", metavar="DIR",
                        default=os.environ.get("CLAUDE_NVIM_BENCH_CLAUDECODE"),
                        help="a checkout of coder/claudecode.nvim, measured beside the plugin "
                             "(default: $CLAUDE_NVIM_BENCH_CLAUDECODE)")
    parser.add_argument("--budget", type=float,
                        help="seconds aimed at per unit and pass (default 0.6, quick 0.15)")
    parser.add_argument("--heavy-s", type=float,
                        help="a unit whose wave of queued calls costs more than this many "
                             "seconds runs once, as one wave with the probe on (default 4, "
                             "quick 1)")
    parser.add_argument("--max-unit-s", type=float,
                        help="skip a unit whose single wave would take longer than this "
                             "(default 60, quick 1)")
    parser.add_argument("--probe-gap-ms", type=float, default=0.0,
                        help="pause between the freeze probe's round trips (default 0: a "
                             "tight loop)")
    parser.add_argument("--probe", metavar="ADDR", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe:
        probe_main(args.probe, args.probe_gap_ms / 1000)
        return 0
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.budget = args.budget or (0.15 if args.quick else 0.6)
    args.heavy_s = args.heavy_s or (1.0 if args.quick else 4.0)
    args.max_unit_s = args.max_unit_s or (1.0 if args.quick else 60.0)
    bench = Bench(args)
    load = os.getloadavg()
    bench.results["meta"] = {
        "mode": "quick" if args.quick else "full", "rounds": args.rounds,
        "cpus": os.cpu_count(), "load_before": f"{load[0]:.2f}",
        "nvim": nvim_version(), "python": platform.python_version(),
        "platform": platform.platform(), "argv": sys.argv[1:],
        "throttle_ms": THROTTLE_MS, "probe_gap_ms": args.probe_gap_ms,
    }
    trio.run(bench.run)
    bench.results["meta"]["load_after"] = f"{os.getloadavg()[0]:.2f}"
    bench.results["targets"] = targets(bench.results)
    print(report(bench.results))
    if args.json:
        Path(args.json).write_text(json.dumps(bench.results, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
