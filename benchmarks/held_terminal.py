"""A held Claude's terminal in Neovim: a keystroke's echo, a flood, and Neovim meanwhile.

    .venv/bin/python -m benchmarks.held_terminal [--before REV] [--rounds 5] [--megabytes 8]

`:ClaudeNvim` with the defaults (the Claude held) in a headless Neovim, claude a stand-in that
echoes what is typed (its pty's echo) and, at ``flood N``, writes N MiB of lines at once.
For claude-nvim at REV (exported from git) and now:

* ``echo``: a key typed (``terminal.input``, or a chansend to the terminal's job before it
  existed) until its echo is in the terminal's buffer, measured inside Neovim (a 1 ms timer);
  median of 50;
* ``flood``: MiB/s from ``flood`` typed until its last line is in the buffer;
* ``probe``: the freeze probe's round trips to Neovim during the flood: the longest, and how
  many took over 50 ms (a keystroke waits that long);
* ``procs``: the processes under Neovim with the Claude running (the server's among them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

from benchmarks.activation import Variant, neovim
from benchmarks.anchor import descendants, user_home
from benchmarks.harness import ROOT, exported
from benchmarks.probe import Probe, probe_command

STAND_IN = r"""
import os, sys
for line in sys.stdin:
    if line.startswith("flood "):
        row = b"x" * 78 + b"\r\n"
        block = row * (65536 // len(row))
        for _ in range(int(line.split()[1]) * 1048576 // len(block)):
            os.write(1, block)
        os.write(1, b"flood done\r\n")
"""

# Type `key` into the current Claude; `done(ms)` once its echo is in the buffer.
ECHO = """
local key, timeout = ...
local terminal = require('claude_nvim.terminal')
local info = terminal.info()
local before = table.concat(vim.api.nvim_buf_get_lines(info.buf, 0, -1, false))
local start = vim.uv.hrtime()
if terminal.input then terminal.input(key) else vim.fn.chansend(info.job, key) end
local timer = vim.uv.new_timer()
vim.g.bench_echo = nil
timer:start(1, 1, vim.schedule_wrap(function()
  local now = table.concat(vim.api.nvim_buf_get_lines(info.buf, 0, -1, false))
  local waited = (vim.uv.hrtime() - start) / 1e6
  if now ~= before or waited > timeout then
    timer:stop()
    timer:close()
    vim.g.bench_echo = waited
  end
end))
"""

SHOWN = """local info = require('claude_nvim.terminal').info()
return info and table.concat(vim.api.nvim_buf_get_lines(info.buf, 0, -1, false), '\\n')
  :find(..., 1, true) ~= nil"""


def variants(before: Path) -> list[Variant]:
    """Each with its Python package first on $PYTHONPATH (set at its round): its command is
    `python -m claude_nvim`, which the plugin knows for the install's Python (a wrapper, as
    `env`, would make it take the path for an unknown one)."""
    opts = json.dumps({"cmd": [sys.executable, "-m", "claude_nvim"]})
    setup = f"require('claude_nvim').setup(vim.json.decode([[{opts}]]))"
    return [Variant("claude-nvim now", ROOT, setup, "ClaudeNvim", "return true"),
            Variant("claude-nvim before", before, setup, "ClaudeNvim", "return true")]


async def until(driver: Any, lua: str, *args: Any, timeout: float = 60) -> Any:
    with trio.fail_after(timeout):
        while not (value := await driver.exec_lua(lua, *args)):
            await trio.sleep(0.01)
    return value


async def one_round(variant: Variant, megabytes: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="claude-nvim-held-") as tmp:
        root = Path(tmp)
        stand_in = root / "echo-claude"
        stand_in.write_text(f"#!{sys.executable} -S\n{STAND_IN}")
        stand_in.chmod(0o755)
        runtime = root / "run"
        runtime.mkdir(mode=0o700)
        with user_home(root, XDG_RUNTIME_DIR=str(runtime),
                       PYTHONPATH=str(variant.runtime / "src")):
            os.environ["CLAUDE_NVIM_CLAUDE"] = str(stand_in)  # (user_home clears it first)
            async with neovim(variant, root, f"+{variant.command}") as (driver, pid):
                try:
                    return await measure(driver, pid, megabytes, runtime)
                finally:
                    await driver.exec_lua("require('claude_nvim.terminal').stop(true)")
                    # (the holders outlive Neovim: they end with their claudes)


async def measure(driver: Any, pid: int, megabytes: int, runtime: Path) -> dict[str, Any]:
    await until(driver, "local i = require('claude_nvim.terminal').info() return i and i.job")
    await until(driver, "return vim.b[require('claude_nvim.terminal').info().buf]"
                        ".claude_nvim_pid ~= nil")
    # The terminal as it is once claude is up: attached to its holder (the stand-in never
    # connects; a Claude connecting is what makes the holder take over).
    await driver.exec_lua("vim.api.nvim_exec_autocmds('User', {pattern = 'ClaudeNvimConnected'})")
    with trio.fail_after(60):
        while not any(json.loads(record.read_text()).get("attached")
                      for record in runtime.glob("claude-nvim/*/claude-1.json")):
            await trio.sleep(0.01)
    echoes = []
    for n in range(50):
        await driver.exec_lua(ECHO, "abcdefghij"[n % 10], 5000)
        echoes.append(await until(driver, "return vim.g.bench_echo"))
    processes = len(descendants(pid))
    address = await driver.exec_lua("return vim.v.servername")
    probe = Probe(await trio.lowlevel.open_process(probe_command(address, 5),
                                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE))
    try:
        await probe.start()
        started = trio.current_time()
        await driver.exec_lua("local t = require('claude_nvim.terminal') "
                              "local keys = '\\rflood " + str(megabytes) + "\\r' "
                              "if t.input then t.input(keys) else "
                              "vim.fn.chansend(t.info().job, keys) end")
        await until(driver, SHOWN, "flood done", timeout=600)
        seconds = trio.current_time() - started
        stats = await probe.stop()
    finally:
        await probe.quit()
    return {"echo_ms": statistics.median(echoes), "flood_mib_s": megabytes / seconds,
            "probe_max_ms": stats["max"], "probe_over_50ms": stats["over_50ms"],
            "processes": processes}


async def run(found: list[Variant], rounds: int, megabytes: int) -> dict[str, dict[str, Any]]:
    results: dict[str, list[dict[str, Any]]] = {v.name: [] for v in found}
    for n in range(rounds):
        for variant in found:
            results[variant.name].append(await one_round(variant, megabytes))
        print(f"round {n + 1}/{rounds}: " + ", ".join(
            f"{name} {rows[-1]['echo_ms']:.1f} ms echo" for name, rows in results.items()),
            flush=True)
    return {name: {key: statistics.median(row[key] for row in rows) for key in rows[0]}
            for name, rows in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="main", help="the claude-nvim to compare with (git)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--megabytes", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="claude-nvim-before-") as tmp:
        before = exported(args.before, Path(tmp))
        results = trio.run(run, variants(before), args.rounds, args.megabytes)
    print(f"a held Claude's terminal, median of {args.rounds} rounds "
          f"({args.megabytes} MiB flood):")
    print(f"{'':20} {'echo ms':>8} {'MiB/s':>7} {'probe max ms':>12} {'over 50 ms':>10} "
          f"{'procs':>5}")
    for name, row in results.items():
        print(f"{name:20} {row['echo_ms']:8.2f} {row['flood_mib_s']:7.1f} "
              f"{row['probe_max_ms']:12.1f} {row['probe_over_50ms']:10g} {row['processes']:5g}")
    print(json.dumps(results))


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
