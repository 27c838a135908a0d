"""`nvim +ClaudeNvim` to connected, with the real claude CLI, beside claudecode.nvim.

From Neovim's launch to the ``MCP server "ide": Successfully connected`` line of claude's debug
log, the variants taking turns, each launch in a fresh Neovim, its processes killed and
claude's session records removed after it (they pile up and slow claude's start). claude runs
offline with the environment `real_claude_client.sh` gives it: run that once with
``--self-test --tool none --out OUT`` and pass OUT; run this inside a loopback-only network
namespace, as that tool does (``unshare -n``, with ``ip link set lo up``)::

    unshare -n sh -c 'ip link set lo up; python -m benchmarks.real_cli --rcc OUT \\
        --claudecode DIR [--before REV] [--rounds 15]'

Printed per variant: the median connection (and every figure), the median of the differences
from claudecode.nvim in the same round (the level moves by 100 ms and more between runs on a
shared machine; a round's variants run within seconds), when claude's own start began (its
wrapper) and wrote its first log line, and the CPU each process had used when claude
connected. claude's binary and HOME are the self-test's; nothing here goes past 127.0.0.1.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.harness import CLOCK_TICKS, ROOT, exported

CONNECTED = 'MCP server "ide": Successfully connected'
PASSED_ON = ("CLAUDE_CODE_SSE_PORT", "ENABLE_IDE_INTEGRATION", "FORCE_CODE_TERMINAL", "VISUAL",
             "EDITOR", "CLAUDE_NVIM_USER_EDITOR", "CLAUDE_NVIM_HOLDER", "BENCH_MARK")
"""What the editor gives claude in its environment; the rest is the self-test's."""


@dataclass
class Variant:
    name: str
    runtime: Path
    setup: str
    command: str
    connects: list[float] = field(default_factory=list)
    wrapper: list[float] = field(default_factory=list)
    first_line: list[float] = field(default_factory=list)
    cpu: dict[str, list[float]] = field(default_factory=dict)


def self_test(rcc: Path) -> tuple[Path, str]:
    """The self-test's project (the directory its claude trusts) and claude's line."""
    lines = (rcc / "run-claude.sh").read_text().splitlines()
    project = next(shlex.split(ln)[1] for ln in lines if ln.startswith("cd "))
    return Path(project), next(ln for ln in lines if ln.startswith("env -i "))


def claude_wrapper(line: str, into: Path) -> Path:
    """A `claude` that runs the self-test's binary with the self-test's environment (its
    ``line``) plus what the editor passes on; it notes when it started, beside its log."""
    words = shlex.split(line)[2:]
    at = next(i for i, w in enumerate(words) if "=" not in w)
    env = [w for w in words[:at] if w.split("=", 1)[0] not in PASSED_ON]
    binary = words[at]
    script = into / "claude"
    script.write_text(
        "#!/bin/bash\n"
        'date +%s.%N > "$BENCH_DEBUG.start"\n'
        "pass=()\n"
        f"for v in {' '.join(PASSED_ON)}; do\n"
        '  [ -n "${!v+x}" ] && pass+=("$v=${!v}")\n'
        "done\n"
        f'exec env -i {shlex.join(env)} "${{pass[@]}}" {shlex.quote(binary)} '
        '--debug-file "$BENCH_DEBUG" "$@"\n')
    script.chmod(0o755)
    return script


def variants(before: Path | None, claudecode: Path | None, claude: Path) -> list[Variant]:
    python = [sys.executable, "-m", "claude_nvim"]

    def ours(name: str, root: Path, **claude_opts: object) -> Variant:
        cmd = python if root == ROOT else [str(command_of(root))]
        opts = json.dumps({"cmd": cmd, "claude": claude_opts} if claude_opts else {"cmd": cmd})
        return Variant(name, root, f"require('claude_nvim').setup(vim.json.decode([[{opts}]]))",
                       "ClaudeNvim")

    found = [ours("claude-nvim before", before)] if before else []
    found += [ours("claude-nvim, default (held)", ROOT),
              ours("claude-nvim, outlive=false", ROOT, outlive=False)]
    if claudecode is not None:
        found.append(Variant("claudecode.nvim", claudecode,
                             f"require('claudecode').setup({{ terminal_cmd = '{claude}', "
                             "terminal = { provider = 'native' } })", "ClaudeCode"))
    return found


def command_of(root: Path) -> Path:
    """A ``claude-nvim`` command running the claude-nvim at ``root``, as an install's script
    (its Python named on its first line, which the plugin starts held Claudes with: an
    ``env PYTHONPATH=…`` prefix would send the plugin the slower way)."""
    script = root / "claude-nvim"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(root / 'src')!r})\n"
                      "from claude_nvim._cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    return script


def stamp(line: str) -> float:
    return datetime.datetime.fromisoformat(line.split(" ", 1)[0].rstrip("Z")).replace(
        tzinfo=datetime.UTC).timestamp()


def marked(mark: str) -> list[int]:
    """The processes of one launch: they all have ``BENCH_MARK`` in their environment."""
    found = []
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if entry.isdigit() and f"BENCH_MARK={mark}".encode() in Path(
                    f"/proc/{entry}/environ").read_bytes():
                found.append(int(entry))
    return found


def cpu_by_role(pids: list[int]) -> dict[str, float]:
    """CPU milliseconds per process role: nvim, claude, server, holder (and its client)."""
    roles: dict[str, float] = {}
    for pid in pids:
        with contextlib.suppress(OSError, ValueError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            role = stat[stat.index("(") + 1:stat.rindex(")")]
            if b"serve" in argv:
                role = "server"
            elif b"hold" in argv or any(b"_hold.launch" in a for a in argv):
                role = "holder+client"
            ms = (int(fields[11]) + int(fields[12])) * 1000 / CLOCK_TICKS
            roles[role] = roles.get(role, 0.0) + ms
    return roles


def launch(variant: Variant, nvim: str, claude: Path, home: Path, project: Path, n: int) -> None:
    with tempfile.TemporaryDirectory(prefix="real-cli-") as tmp:
        runtime = Path(tmp) / "run"
        runtime.mkdir(mode=0o700)
        debug = Path(tmp) / "debug.log"
        mark = f"{os.getpid()}-{n}"
        env = {**os.environ, "CLAUDE_CONFIG_DIR": str(home / ".claude"),
               "XDG_RUNTIME_DIR": str(runtime), "BENCH_DEBUG": str(debug),
               "BENCH_MARK": mark, "CLAUDE_NVIM_CLAUDE": str(claude)}
        started = time.time()
        nvim_process = subprocess.Popen(
            [nvim, "--clean", "--headless", "-i", "NONE", "-n", "--cmd",
             f"set rtp^={variant.runtime}", "--cmd", f"lua {variant.setup}", "-c",
             variant.command], cwd=project, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        connected = first = None
        deadline = time.time() + 30
        while connected is None and time.time() < deadline:
            time.sleep(0.01)
            with contextlib.suppress(OSError):
                lines = debug.read_text().splitlines()
                if lines and first is None:
                    first = stamp(lines[0]) - started
                connected = next((stamp(ln) - started for ln in lines if CONNECTED in ln), None)
        pids = marked(mark)
        if connected is not None and first is not None:
            variant.connects.append(connected * 1000)
            variant.first_line.append(first * 1000)
            with contextlib.suppress(OSError, ValueError):
                at = float(Path(f"{debug}.start").read_text()) - started
                variant.wrapper.append(at * 1000)
            for role, ms in cpu_by_role(pids).items():
                variant.cpu.setdefault(role, []).append(ms)
        else:  # NaN: the rounds stay paired
            variant.connects.append(float("nan"))
            print(f"{variant.name}: not connected in 30 s", file=sys.stderr)
        # Everything it started: holders and lingering servers left Neovim's process group.
        while pids := [nvim_process.pid, *marked(mark)] if nvim_process.poll() is None \
                else marked(mark):
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            nvim_process.poll()
            time.sleep(0.02)
        nvim_process.wait()
    for leftover in ("sessions", "ide", "projects"):
        shutil.rmtree(home / ".claude" / leftover, ignore_errors=True)
    shutil.rmtree("/tmp/cc-socks", ignore_errors=True)


def report(found: list[Variant]) -> None:
    base = found[-1]
    for v in found:
        connects = [c for c in v.connects if c == c]
        if not connects:
            continue
        line = (f"{v.name:28} {statistics.median(connects):6.0f} ms  "
                f"(claude's start {statistics.median(v.wrapper or [0]):4.0f}, "
                f"first log line {statistics.median(v.first_line):4.0f})")
        pairs = [a - b for a, b in zip(v.connects, base.connects, strict=True) if a == a and b == b]
        if v is not base and pairs:
            line += (f"  {statistics.median(pairs):+5.0f} ms from {base.name} "
                     f"(earlier in {sum(p <= 0 for p in pairs)}/{len(pairs)})")
        print(line)
        print(f"{'':28} all {sorted(round(c) for c in connects)}")
        print(f"{'':28} CPU ms when connected: " + ", ".join(
            f"{role} {statistics.median(ms):.0f}" for role, ms in sorted(v.cpu.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rcc", type=Path, required=True,
                        help="the --out directory of real_claude_client.sh --self-test (with "
                             "--cwd PROJECT: claude trusts it, and Neovim starts there)")
    parser.add_argument("--claudecode", type=Path, help="a checkout of coder/claudecode.nvim")
    parser.add_argument("--before", help="a claude-nvim to compare with (git revision)")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    nvim = shutil.which("nvim", path=str(Path(sys.executable).parent)) or "nvim"
    with tempfile.TemporaryDirectory(prefix="real-cli-bench-") as tmp:
        work = Path(tmp)
        project, line = self_test(args.rcc)
        claude = claude_wrapper(line, work)
        before = exported(args.before, work / "before") if args.before else None
        found = variants(before, args.claudecode, claude)
        for n in range(args.rounds):
            for variant in found:
                launch(variant, nvim, claude, args.rcc / "home", project, n)
                time.sleep(1.5)  # what claude left behind settles
            print(f"round {n + 1}/{args.rounds}: " + ", ".join(
                f"{v.name} {v.connects[-1]:.0f}" for v in found if v.connects), flush=True)
    report(found)


if __name__ == "__main__":
    main()
