"""A soak of the real flows: Neovim's memory and longest freeze, minute by minute (issue 18).

    .venv/bin/python -m benchmarks.soak_real_flows [--seconds 600] [--claudes 3]

A headless Neovim with a UI attached (80x24) holds 1,000 loaded 300-line files of a git
repository and a log file shown in a window; ``claude-nvim serve`` runs as its own process
(another checkout's ``src`` first on ``PYTHONPATH`` measures that one). Meanwhile:

* a program appends a line to the log 10 times a second;
* ``--claudes`` stand-in Claudes (WebSocket clients like the CLI: initialize,
  ``ide_connected``, tools/list) each propose a diff of a random file every few seconds; the
  user accepts (``:w`` in the proposal; the stand-in then writes the file and sends
  ``close_tab``, as the CLI does) or rejects (``:ClaudeNvimDiffDeny``) it; each also calls
  getOpenEditors, getDiagnostics and getCurrentSelection about once a second;
* every ``--checkout-every`` seconds, ``git checkout -f`` switches the 1,000 files between two
  branches under the loaded buffers.

The freeze probe (probe.py, its own process) sends ``nvim_eval("1")`` every 2 ms throughout. Each
``--report-every`` seconds (a minute) one line: Neovim's and the server's RSS, the longest
freeze in that period and how many round trips took over 50 ms, and what the flows did. At the
end: whether every buffer shows its file.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import trio

from benchmarks.client import Client, connect, tool_text
from benchmarks.harness import (
    LOAD_BUFFERS_LUA,
    NVIM_ARGS,
    ProcWatch,
    server_command,
    stop_server,
    wait_for_lock,
)
from benchmarks.probe import Probe, probe_command
from benchmarks.workspace import ACCEPT_LUA, DIFF_VISIBLE_LUA
from claude_nvim._nvim import editor_for
from claude_nvim._nvim.editor import Editor
from claude_nvim._nvim.headless import headless_nvim

FILES, LINES = 1000, 300


@dataclass
class Counts:
    accepted: int = 0
    rejected: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    checkouts: int = 0
    log_lines: int = 0
    problems: list[str] = field(default_factory=list)


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=s", "-c", "user.email=s@s", *args], cwd=repo,
                   check=True, capture_output=True)


def make_repo(repo: Path) -> list[Path]:
    paths = [repo / f"d{i % 20}" / f"f{i:04}.py" for i in range(FILES)]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"old_{i} = {i}  # line {i}\n" for i in range(LINES)))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "old")
    git(repo, "checkout", "-q", "-b", "other")
    for path in paths:
        path.write_text("".join(f"new_{i} = {i}  # line {i}\n" for i in range(LINES)))
    git(repo, "commit", "-q", "-am", "new")
    git(repo, "checkout", "-q", "main")
    return paths


# Every buffer shows its file (by buffer number: bufnr(path) for 1,000 paths costs 0.8 s).
STALE = """
local stale = {}
for _, buf in ipairs(...) do
  local name = vim.api.nvim_buf_get_name(buf)
  local f = io.open(name, 'rb')
  local text = f and f:read('*a') or ''
  if f then f:close() end
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  if table.concat(lines, '\\n') .. '\\n' ~= text then stale[#stale + 1] = name end
end
return stale
"""


async def propose(client: Client, arguments: dict[str, str], reply: dict[str, str]) -> None:
    """openDiff, as the CLI calls it: the answer comes when the user has decided."""
    reply["raw"] = (await client.call("openDiff", arguments))[2]


async def until(nvim: Editor, lua: str, timeout: float = 30.0) -> None:
    with trio.fail_after(timeout):
        while not await nvim.exec_lua(lua):
            await trio.sleep(0.005)


class Soak:
    def __init__(self, args: argparse.Namespace, nvim: Editor, paths: list[Path], log: Path,
                 repo: Path) -> None:
        self.args, self.nvim, self.paths, self.log, self.repo = args, nvim, paths, log, repo
        self.counts = Counts()
        self.user = trio.Lock()  # one diff in front of the user at a time
        self.rng = random.Random(18)
        self.deadline = time.monotonic() + args.seconds

    def running(self) -> bool:
        return time.monotonic() < self.deadline

    async def log_writer(self) -> None:
        while self.running():
            with self.log.open("a") as f:
                f.write(f"{time.time():.3f} request handled in 12 ms, status 200\n")
            self.counts.log_lines += 1
            await trio.sleep(0.1)

    async def diffs(self, client: Client, number: int) -> None:
        await trio.sleep(number * 1.3)
        while self.running():
            path = self.rng.choice(self.paths)
            contents = path.read_text() + f"# added by Claude {number}\n"
            tab = f"✻ [Claude Code] {path.name} ({number}) ⧉"
            accept = self.rng.random() < 0.7
            async with self.user:
                reply: dict[str, str] = {}
                arguments = {"old_file_path": str(path), "new_file_path": str(path),
                             "new_file_contents": contents, "tab_name": tab}
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(propose, client, arguments, reply)
                    await until(self.nvim, DIFF_VISIBLE_LUA)
                    await trio.sleep(0.3)  # the user reads it
                    if accept:
                        await self.nvim.exec_lua(ACCEPT_LUA)
                    else:
                        await self.nvim.request("nvim_command", "ClaudeNvimDiffDeny")
                outcome = tool_text(reply["raw"])
                if accept and outcome.startswith("FILE_SAVED"):
                    path.write_text(contents)  # the CLI writes the file, then closes the tab
                    await client.call("close_tab", {"tab_name": tab})
                    self.counts.accepted += 1
                elif not accept and outcome.startswith("DIFF_REJECTED"):
                    self.counts.rejected += 1
                else:
                    self.counts.problems.append(f"openDiff {path.name}: {outcome[:80]}")
            await trio.sleep(self.args.diff_every)

    async def tools(self, client: Client) -> None:
        calls = [("getOpenEditors", {}), ("getCurrentSelection", {}),
                 ("getDiagnostics", {"uri": self.log.as_uri()})]
        while self.running():
            name, arguments = self.rng.choice(calls)
            raw = (await client.call(name, arguments))[2]
            self.counts.tool_calls += 1
            if '"isError":true' in raw or '"error"' in raw[:60]:
                self.counts.tool_errors += 1
            await trio.sleep(self.rng.uniform(0.5, 1.5))

    async def checkouts(self) -> None:
        branches = ["other", "main"]
        await trio.sleep(min(15.0, self.args.checkout_every))
        while self.running():
            branch = branches[self.counts.checkouts % 2]
            await trio.to_thread.run_sync(git, self.repo, "checkout", "-q", "-f", branch)
            self.counts.checkouts += 1
            await trio.sleep(self.args.checkout_every)


async def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="claude-nvim-soak-") as tmp:
        root = Path(tmp)
        repo = root / "repo"
        paths = make_repo(repo)
        log = root / "app.log"
        log.write_text("".join(f"{i} started\n" for i in range(1000)))
        config = root / "config"
        config.mkdir()
        with headless_nvim(cwd=repo, args=NVIM_ARGS) as (address, process):
            nvim = editor_for(address, timeout=600.0)
            async with trio.open_nursery() as nursery:
                await nursery.start(nvim.run)
                await nvim.request("nvim_ui_attach", 80, 24, {"ext_linegrid": True})
                bufs = await nvim.exec_lua(LOAD_BUFFERS_LUA, [str(p) for p in paths], timeout=600)
                await nvim.request("nvim_command", f"set hidden | edit {paths[0]}")
                await nvim.request("nvim_command", f"split {log} | wincmd p")
                bufs.append(await nvim.exec_lua("return vim.fn.bufnr(...)", str(log)))
                env = {**os.environ, "CLAUDE_CONFIG_DIR": str(config)}
                env.pop("NVIM", None)
                server_log = root / "server.log"
                with open(server_log, "wb") as out:
                    server = subprocess.Popen(server_command(address), cwd=repo, env=env,
                                              stdin=subprocess.DEVNULL, stdout=out,
                                              stderr=subprocess.STDOUT)
                try:
                    port, token = await wait_for_lock(config, server, server_log)
                    probe = Probe(await trio.lowlevel.open_process(
                        probe_command(address, 2),
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE))
                    try:
                        return await soak(args, nvim, paths, bufs, log, repo, port, token,
                                          probe, ProcWatch(process.pid), ProcWatch(server.pid))
                    finally:
                        await probe.quit()
                finally:
                    await stop_server(server)
                    nursery.cancel_scope.cancel()
    return 1


async def soak(args: argparse.Namespace, nvim: Editor, paths: list[Path], bufs: list[int],
               log: Path, repo: Path, port: int, token: str, probe: Probe,
               nvim_watch: ProcWatch, server_watch: ProcWatch) -> int:
    s = Soak(args, nvim, paths, log, repo)
    print(f"{'t s':>5} {'nvim MB':>8} {'server MB':>9} {'freeze ms':>9} {'>50ms':>5} "
          f"{'accepted':>8} {'rejected':>8} {'calls':>6} {'checkouts':>9} {'log lines':>9}",
          flush=True)
    start, rss0 = time.monotonic(), nvim_watch.rss_mb()
    worst = 0.0
    async with trio.open_nursery() as flows:
        clients = [await flows.start(client_task, port, token) for _ in range(args.claudes)]
        for number, client in enumerate(clients):
            flows.start_soon(s.diffs, client, number)
            flows.start_soon(s.tools, client)
        flows.start_soon(s.log_writer)
        flows.start_soon(s.checkouts)
        await probe.start()
        while s.running():
            await trio.sleep(max(0.0, min(args.report_every, s.deadline - time.monotonic())))
            freeze = await probe.stop()
            await probe.start()
            worst = max(worst, freeze["max"])
            c = s.counts
            print(f"{time.monotonic() - start:5.0f} {nvim_watch.rss_mb():8.1f} "
                  f"{server_watch.rss_mb():9.1f} {freeze['max']:9.1f} {freeze['over_50ms']:5} "
                  f"{c.accepted:8} {c.rejected:8} {c.tool_calls:6} {c.checkouts:9} "
                  f"{c.log_lines:9}", flush=True)
        await probe.stop()
        flows.cancel_scope.cancel()
    await trio.sleep(1.5)  # the last writes are followed (hidden buffers: within a second)
    stale = await nvim.exec_lua(STALE, bufs, timeout=120)
    print(json.dumps({"seconds": args.seconds, "nvim_rss_growth_mb": nvim_watch.rss_mb() - rss0,
                      "longest_freeze_ms": worst, "stale_buffers": len(stale),
                      "tool_errors": s.counts.tool_errors, "problems": s.counts.problems[:5]}))
    return 0 if not stale and not s.counts.problems else 1


async def client_task(port: int, token: str,
                      task_status: trio.TaskStatus[Client] = trio.TASK_STATUS_IGNORED) -> None:
    async with connect(port, token) as client:
        task_status.started(client)
        await trio.sleep_forever()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--claudes", type=int, default=3)
    parser.add_argument("--diff-every", type=float, default=4.0,
                        help="seconds each Claude waits between its diffs")
    parser.add_argument("--checkout-every", type=float, default=30.0)
    parser.add_argument("--report-every", type=float, default=60.0)
    result: int = trio.run(run, parser.parse_args())
    return result


if __name__ == "__main__":
    sys.exit(main())
