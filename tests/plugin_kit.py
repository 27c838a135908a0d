"""The plugin's test kit: a stand-in `claude` on PATH that connects like the CLI does (no real
claude needed), and a plugin Neovim with a UI attached, the user's side. A pytest plugin of
this suite (conftest.py): its fixtures are every test file's."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from claude_nvim._errors import EditorGone
from claude_nvim._nvim.headless import headless_nvim
from claude_nvim.testing import attached_editor
from helpers import WAIT

ROOT = Path(__file__).resolve().parent.parent

# A stand-in for `claude`: connects to the server named by its environment (as claude does),
# records its pid (each one's: started.jsonl) and every @-mention it gets (each one's:
# mentions-PID.jsonl), sets its terminal's title as claude does (OSC 0: "✳ Claude Code"), and
# does what is typed into it: "title TEXT" sets the title; "prompt TEXT", "permission" (a
# permission dialog and its notification), "write PATH OLD NEW" (a file tool's edit) and "stop"
# run the hooks of its --settings as claude does (helpers.HookedClaude); "edit TEXT" runs its
# editor as claude's Ctrl+G does ($VISUAL split on spaces, +1 for nvim, on its terminal: what
# came back in edited.json); "hand over PATH" opens one more connection and hands it to the
# test listening on PATH (helpers.handed_over): the test speaks through it as this Claude;
# "size" prints its terminal's size ("size 24x80"), "flood N" N numbered lines ("fl 0000012
# xxx…") and "flood done"; "exit" ends it; losing its server does not
# (it waits, as claude does). A bracketed paste (ESC[200~ ... ESC[201~, then the line's end)
# is kept whole in pastes.jsonl, as it came, its submitting newline included.
# The tab line as the screen shows it (a UI attached).
TABLINE = """vim.cmd('redraw')
local row = {}
for col = 1, vim.o.columns do row[#row + 1] = vim.fn.screenstring(1, col) end
return table.concat(row)"""

FAKE_CLAUDE = """\
#!{python}
import json, os, pathlib, queue, subprocess, sys, threading, trio
sys.path.insert(0, {tests!r})
from claude_nvim.testing import mcp_client
from helpers import HookedClaude, hand_over
out = {out!r}
with open(out + "/started.json", "w") as f:
    json.dump({{"pid": os.getpid(), "argv": sys.argv[1:]}}, f)
def in_terminal():  # its own session, its terminal its controlling one, signals of its own
    try:
        foreground = os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        foreground = False
    status = pathlib.Path("/proc/self/status")
    ignored = (int(next(line.split()[1] for line in status.read_text().splitlines()
                        if line.startswith("SigIgn:")), 16) if status.exists() else 0)
    return {{"session_leader": os.getsid(0) == os.getpid(), "foreground": foreground,
             "parent": os.getppid(), "ignores_int": bool(ignored & (1 << 1))}}
with open(out + "/started.jsonl", "a") as f:
    f.write(json.dumps({{"pid": os.getpid(), "argv": sys.argv[1:], **in_terminal()}}) + "\\n")
def title(text):
    sys.stdout.write("\\x1b]0;" + text + "\\x07")
    sys.stdout.flush()
title("\\u2733 Claude Code")
def edit(text):
    prompt = os.path.join(out, "claude-prompt-%d.md" % os.getpid())
    with open(prompt, "w") as f:
        f.write(text)
    argv = os.environ.get("VISUAL", "vi").split(" ")
    if os.path.basename(argv[0]) in ("vi", "vim", "nvim"):
        argv.append("+1")
    code = subprocess.run(argv + [prompt]).returncode
    with open(prompt) as f, open(out + "/edited.json", "w") as result:
        json.dump({{"code": code, "text": f.read()}}, result)
lines = queue.Queue()
kept = []
def typed():
    paste = None
    for line in sys.stdin:
        if paste is not None or line.startswith("\x1b[200~"):
            paste = (paste or "") + line
            if "\x1b[201~" in paste:
                with open(out + "/pastes.jsonl", "a") as f:
                    f.write(json.dumps(paste) + "\\n")
                paste = None
        elif line.strip() == "exit":
            os._exit(0)
        elif line.startswith("hand over "):
            port = int(os.environ["CLAUDE_CODE_SSE_PORT"])
            kept.append(hand_over(port, line[len("hand over "):].strip()))
        elif line.startswith("title "):
            title(line[6:].strip())
        elif line.startswith("flood "):  # many numbered lines at once, then "flood done"
            sys.stdout.write("".join("fl %07d %s\\r\\n" % (i, "x" * 20)
                                     for i in range(int(line[6:]))) + "flood done\\r\\n")
            sys.stdout.flush()
        elif line.strip() == "size":
            size = os.get_terminal_size(0)
            sys.stdout.write("size %dx%d\\r\\n" % (size.lines, size.columns))
            sys.stdout.flush()
        elif line.startswith("edit "):
            edit(line[5:].strip())
        else:
            lines.put(line.strip())
threading.Thread(target=typed, daemon=True).start()
async def hooks(client):
    settings = json.loads(sys.argv[sys.argv.index("--settings") + 1])
    claude = HookedClaude(client, settings, os.getcwd())
    while True:
        line = await trio.to_thread.run_sync(lines.get, abandon_on_cancel=True)
        if line.startswith("prompt "):
            await claude.prompt(line[7:])
        elif line.startswith("write "):  # write PATH OLD NEW: a file tool's edit
            path, old, new = line[6:].split(" ")
            await claude.edit(pathlib.Path(path), old, new)
        elif line == "permission":
            await claude.ask_permission("Bash", {{"command": "make", "description": "build"}})
            await claude.notify("permission_prompt")
        elif line == "stop":
            await claude.stop()
connected = False
async def main():
    port = os.environ["CLAUDE_CODE_SSE_PORT"]
    lock = os.path.join(os.environ["CLAUDE_CONFIG_DIR"], "ide", port + ".lock")
    token = json.load(open(lock))["authToken"]
    async with mcp_client(int(port), token, pid=os.getpid()) as client, \\
            trio.open_nursery() as nursery:
        global connected
        connected = True
        nursery.start_soon(hooks, client)
        seen = 0
        while True:
            note = await client.next_notification("at_mentioned", after=seen, timeout=3600)
            seen = next(i for i, n in enumerate(client.notifications) if n is note) + 1
            for name in ("/mentions-%d.jsonl" % os.getpid(), "/mentions.jsonl"):
                with open(out + name, "a") as f:
                    f.write(json.dumps(note["params"]) + "\\n")
try:
    trio.run(main)
except BaseException:
    if not connected:
        raise
    # Its IDE went: claude runs on (and may reconnect), as the CLI does.
    with open(out + "/disconnected.jsonl", "a") as f:
        f.write(json.dumps({{"pid": os.getpid()}}) + "\\n")
    threading.Event().wait()
"""


def end_holders(runtime: Path) -> list[int]:
    """Kill (by pid) every Claude held under ``runtime`` (an $XDG_RUNTIME_DIR) and its holder,
    as their JSON files name them: what `claude-nvim hold` leaves running when a test's Neovim
    ends. The pids killed."""
    killed = []
    # Their server too (server.json), which would linger for them and write there meanwhile.
    for record in [*runtime.glob("claude-nvim/*/claude-*.json"),
                   *runtime.glob("claude-nvim/*/server.json")]:
        with contextlib.suppress(OSError, ValueError):
            held = json.loads(record.read_text())
            for pid in (held.get("claude"), held.get("holder"), held.get("pid")):
                if isinstance(pid, int) and pid > 1:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
    return killed


@contextlib.contextmanager
def private_runtime(monkeypatch) -> Iterator[Path]:
    """$XDG_RUNTIME_DIR, a short new directory (sockets' paths are short): the holders'
    directories go there, and what holders a test left are killed when it ends."""
    runtime = Path(tempfile.mkdtemp(prefix="run-"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    try:
        yield runtime
    finally:
        killed = end_holders(runtime) + _end_users_of(runtime)
        deadline = time.monotonic() + WAIT  # what they wrote is gone once they are
        while any(alive(pid) and not _zombie(pid) for pid in killed) \
                and time.monotonic() < deadline:
            time.sleep(0.01)
        shutil.rmtree(runtime, ignore_errors=True)


def _end_users_of(runtime: Path) -> list[int]:
    """Kill every process started with ``runtime`` as its $XDG_RUNTIME_DIR (a server that
    lingers, or is about to, writes there); the pids killed."""
    mark = f"XDG_RUNTIME_DIR={runtime}".encode()
    killed = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        pid = int(environ.parent.name)
        with contextlib.suppress(OSError):
            if pid != os.getpid() and mark in environ.read_bytes().split(b"\0"):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed


@pytest.fixture
def claude_dir(tmp_path, monkeypatch) -> Iterator[Path]:
    """A directory with the stand-in `claude`, put first on PATH (for Neovims started after),
    and a private $XDG_RUNTIME_DIR (private_runtime)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "claude"
    script.write_text(FAKE_CLAUDE.format(python=sys.executable, out=str(tmp_path),
                                         tests=str(ROOT / "tests")))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg"))
    for name in ("NVIM", "CLAUDE_CODE_SSE_PORT", "CLAUDE_NVIM_CLAUDE"):
        monkeypatch.delenv(name, raising=False)
    with private_runtime(monkeypatch):
        yield tmp_path


def plugin_args(**opts) -> tuple[str, ...]:
    """Neovim's arguments: no user config, this checkout as a plugin, set up with ``opts``
    (and the claude-nvim of this Python, whatever is on PATH)."""
    opts = {"cmd": [sys.executable, "-m", "claude_nvim"], **opts}
    return ("--clean", "--cmd", "let g:loaded_python3_provider = 0",
            "--cmd", f"set runtimepath^={ROOT}",
            "--cmd", f"lua require('claude_nvim').setup(vim.json.decode([[{json.dumps(opts)}]]))")


@contextlib.asynccontextmanager
async def plugin_user(cwd: Path, **opts):
    """A plugin Neovim (set up with ``opts``) with an 120x40 UI attached: the user's side."""
    with headless_nvim(cwd=cwd, args=plugin_args(**opts)) as (address, _process):
        async with attached_editor(address) as nvim:
            await nvim.request("nvim_ui_attach", 120, 40, {"ext_linegrid": True})
            nvim.address = address
            yield nvim


@pytest.fixture
async def user(claude_dir):
    """A plugin Neovim with an 120x40 UI attached: the user's side."""
    async with plugin_user(claude_dir) as nvim:
        yield nvim


async def claude_started(tmp_path: Path) -> dict:
    with trio.fail_after(WAIT):
        while not (tmp_path / "started.json").exists():
            await trio.sleep(0.05)
        while True:
            try:
                return json.loads((tmp_path / "started.json").read_text())
            except json.JSONDecodeError:
                await trio.sleep(0.05)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def claudes_started(tmp_path: Path, count: int) -> list[dict]:
    """The first ``count`` stand-ins started, once they all have."""
    path = tmp_path / "started.jsonl"
    with trio.fail_after(WAIT):
        # Whole lines only: a stand-in may be writing its own just now.
        while len(lines := (path.read_text() if path.exists() else "").split("\n")[:-1]) < count:
            await trio.sleep(0.05)
    return [json.loads(line) for line in lines]


@contextlib.asynccontextmanager
async def neovim(cwd: Path, **opts):
    """A plugin Neovim in ``cwd`` (made if need be) with a UI, and its process (``.process``,
    for :qa! and kill -9)."""
    cwd.mkdir(exist_ok=True)
    with headless_nvim(cwd=cwd, args=plugin_args(**opts)) as (address, process):
        try:
            async with attached_editor(address) as nvim:
                await nvim.request("nvim_ui_attach", 120, 40, {"ext_linegrid": True})
                nvim.process = process
                yield nvim
        except* EditorGone:
            if process.poll() is None:  # gone, yet not quit by the test
                raise


async def quit_neovim(nvim, how: str) -> None:
    """End the Neovim of :func:`neovim` as a user may: ``:qa!`` or ``kill -9``."""
    if how == "kill -9":
        nvim.process.kill()
    else:
        await nvim.exec_lua("vim.schedule(function() vim.cmd('qa!') end)")
    await trio.to_thread.run_sync(nvim.process.wait)
