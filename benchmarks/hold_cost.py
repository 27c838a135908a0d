"""What a held Claude costs (issue 29: `claude-nvim hold`, opts.claude.outlive).

    .venv/bin/python -m benchmarks.hold_cost [--rounds 5] [--megabytes 64]

Each round runs ``claude-nvim hold -- CMD`` in a pseudo-terminal of its own, as a Neovim
terminal would (another checkout's ``src`` first on ``PYTHONPATH`` measures that one):

* ``start``: from the command's start until the holder's JSON names the attached client
  (the client and the holder are up, the claude stand-in runs): median of the rounds;
* ``rss``: the client's and the holder's resident memory then (``/proc/PID/status``);
* ``flood``: the stand-in writes ``--megabytes`` MB as fast as it can through the holder and the
  client to the terminal, which reads it all: MB/s, and the holder's peak RSS (``VmHWM``)
  meanwhile (its ring is 1 MiB, at most 256 KiB behind the client: it should not grow with
  the flood).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def one_round(runtime: Path, project: Path, n: int, megabytes: int) -> dict[str, float]:
    flood = (f"import os,sys,time; sys.stdin.readline(); b=b'x'*65535+b'\\n'; "
             f"[os.write(1,b) for _ in range({megabytes}*16)]; os.write(1,b'END\\n'); "
             f"time.sleep(3600)")
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    master, slave = os.openpty()
    began = time.perf_counter()
    client = subprocess.Popen(
        [sys.executable, "-m", "claude_nvim", "hold", "--number", str(n), "--project",
         str(project), "--", sys.executable, "-c", flood],
        stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    record: dict = {}
    try:
        records = list(runtime.glob(f"claude-nvim/*/claude-{n}.json"))
        while not record.get("attached"):
            records = records or list(runtime.glob(f"claude-nvim/*/claude-{n}.json"))
            if records:
                with contextlib.suppress(OSError, ValueError):
                    record = json.loads(records[0].read_text())
            time.sleep(0.002)
        started = time.perf_counter() - began
        rss = {"client_mb": status_kb(client.pid, "VmRSS") / 1024,
               "holder_mb": status_kb(record["holder"], "VmRSS") / 1024}
        os.write(master, b"go\r")
        t0, got, tail = time.perf_counter(), 0, b""
        while b"END" not in tail:
            select.select([master], [], [])
            chunk = os.read(master, 1 << 16)
            got += len(chunk)
            tail = (tail + chunk)[-8:]
        seconds = time.perf_counter() - t0
        return {"start_s": started, **rss, "flood_mb_s": got / seconds / 1e6,
                "holder_peak_mb": status_kb(record["holder"], "VmHWM") / 1024}
    finally:
        for pid in (record.get("claude"), record.get("holder")):
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        os.killpg(client.pid, signal.SIGKILL)
        client.wait()
        os.close(master)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--megabytes", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hold-bench-") as tmp:
        runtime, project = Path(tmp) / "run", Path(tmp) / "project"
        runtime.mkdir(mode=0o700)
        project.mkdir()
        rounds = [one_round(runtime, project, n, args.megabytes)
                  for n in range(1, args.rounds + 1)]
    print(f"claude-nvim hold, {args.rounds} rounds (median; max in brackets):")
    for key in rounds[0]:
        values = [r[key] for r in rounds]
        print(f"  {key:16} {statistics.median(values):9.3f}   [{max(values):.3f}]")


if __name__ == "__main__":
    main()
