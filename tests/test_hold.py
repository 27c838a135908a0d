"""Claudes that outlive Neovim: the project's directory (Python and Lua agree, a root that is
not ours alone is refused), the holder's wire, and ``claude-nvim hold`` in a real terminal."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from claude_nvim._claudes.processes import parent_pid
from claude_nvim._hold import launch
from claude_nvim._hold import protocol as p
from claude_nvim._nvim.headless import find_nvim
from claude_nvim._project import UnsafeDirectory, project_dir
from helpers import WAIT, eventually
from plugin_kit import (
    claudes_started,
    end_holders,
    neovim,
    private_runtime,
    quit_neovim,
)

ROOT = Path(__file__).resolve().parent.parent


def lua_project_dir(cwd: Path, env: dict[str, str]) -> str:
    """What lua/claude_nvim/project.lua says, in a real Neovim: the path, or 'nil: why'."""
    script = ("local dir, why = require('claude_nvim.project').dir(_G.arg[1]) "
              "io.stdout:write(dir or ('nil: ' .. why))")
    chunk = cwd.parent / "project.lua"
    chunk.write_text(script)
    done = subprocess.run(
        [find_nvim(), "--clean", "--headless", "--cmd", f"set rtp^={ROOT}",
         "-l", str(chunk), str(cwd)], capture_output=True, text=True, env=env, timeout=60,
        check=False)
    return done.stdout or done.stderr


@pytest.fixture
def runtime(tmp_path, monkeypatch) -> Path:
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    return run


def test_python_and_lua_agree_on_the_project_directory(tmp_path, runtime, monkeypatch):
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(project)
    made = project_dir(str(link))  # the real path is what counts
    assert made.parent == runtime / "claude-nvim"
    assert made == project_dir(str(project)) != project_dir(str(project / "sub"))
    assert lua_project_dir(link, dict(os.environ)) == str(made)
    assert (made.stat().st_mode & 0o777, made.parent.stat().st_mode & 0o777) == (0o700, 0o700)
    # Without XDG_RUNTIME_DIR: $TMPDIR/claude-nvim-<uid>, the same in both.
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    fallback = project_dir(str(project))
    assert fallback.parent == tmp_path / f"claude-nvim-{os.getuid()}"
    assert lua_project_dir(project, dict(os.environ)) == str(fallback)


def test_luas_sha256_is_hashlibs(tmp_path):
    """The project key is hashed in Lua (claude_nvim.sha256) and in Python: every length
    around the 64-byte blocks' padding, every byte value (NUL, non-UTF-8) included."""
    chunk = tmp_path / "sha.lua"
    chunk.write_text("""
        local sha256 = require('claude_nvim.sha256')
        for n = 0, 300 do
          local bytes = {}
          for i = 0, n - 1 do bytes[#bytes + 1] = string.char((i * 7 + n) % 256) end
          io.stdout:write(sha256(table.concat(bytes)), '\\n')
        end""")
    done = subprocess.run([find_nvim(), "--clean", "--headless", "--cmd", f"set rtp^={ROOT}",
                           "-l", str(chunk)], capture_output=True, text=True, timeout=60,
                          check=True)
    assert done.stdout.splitlines() == [
        hashlib.sha256(bytes((i * 7 + n) % 256 for i in range(n))).hexdigest()
        for n in range(301)]


def test_the_launch_names_the_record_where_the_holder_writes_it(tmp_path, runtime,
                                                              monkeypatch):
    """claude's $CLAUDE_NVIM_HOLDER is computed before the holder loads _project (claude
    starts first): the same file, with and without XDG_RUNTIME_DIR."""
    project = tmp_path / "project"
    project.mkdir()
    def agree() -> bool:
        return launch.record_path(str(project), 3) == str(project_dir(str(project))
                                                          / "claude-3.json")
    assert agree()
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert agree()


@pytest.mark.parametrize("how", ["symlink", "group bits", "other owner"])
def test_a_root_that_is_not_ours_alone_is_refused(tmp_path, runtime, how):
    root = runtime / "claude-nvim"
    if how == "symlink":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir(mode=0o700)
        root.symlink_to(elsewhere)
    else:
        root.mkdir(mode=0o700)
        if how == "group bits":
            root.chmod(0o770)
        elif os.getuid() != 0:
            pytest.skip("only root can give a directory to another user")
        else:
            os.chown(root, 12345, 12345)
    with pytest.raises(UnsafeDirectory):
        project_dir(str(tmp_path))
    assert lua_project_dir(tmp_path, dict(os.environ)).startswith("nil: ")
    assert list(root.iterdir()) == []  # nothing made in it


def test_frames_come_out_as_they_went_in_whatever_the_cuts():
    stream = p.frame(p.ATTACH, p.window(40, 120)) + p.frame(p.INPUT, b"hi") + p.frame(p.STOP)
    for cut in range(len(stream) + 1):
        reader = p.Reader()
        got = reader.feed(stream[:cut]) + reader.feed(stream[cut:])
        assert got == [(p.ATTACH, p.window(40, 120)), (p.INPUT, b"hi"), (p.STOP, b"")]
    assert p.read_window(got[0][1]) == (40, 120)
    with pytest.raises(p.ProtocolError):
        p.Reader().feed(b"Z\0\0\0\0")
    with pytest.raises(p.ProtocolError):
        p.Reader(limit=10).feed(p.frame(p.INPUT, b"x" * 11))


def test_an_attach_carries_its_neovims_address_bounded():
    assert p.read_attach(p.attach(40, 120, "/run/user/1/nvim.7.0")) == (
        (40, 120), "/run/user/1/nvim.7.0")
    assert p.read_attach(p.window(40, 120)) == ((40, 120), None)  # an older client's
    for nvim in (None, "", "x" * (p.MAX_ADDRESS + 1), "/tmp/\udcff"):  # none, or not sent
        assert p.attach(24, 80, nvim) == p.window(24, 80)
    assert p.read_attach(p.attach(24, 80, "é" * (p.MAX_ADDRESS // 2)))[1] == "é" * 2048
    for bad in (p.window(24, 80) + b"x" * (p.MAX_ADDRESS + 1), p.window(24, 80) + b"\xff",
                b"\0\1"):
        with pytest.raises(p.ProtocolError):
            p.read_attach(bad)


def test_the_ring_keeps_the_last_bytes_and_no_more():
    ring = p.Ring(10)
    for chunk in (b"0123", b"4567", b"89ab", b"", b"cdefghijklmnop"):
        ring.write(chunk)
    assert ring.contents() == b"ghijklmnop"
    ring.write(b"q")
    assert ring.contents() == b"hijklmnopq"
    assert sum(map(len, ring._chunks)) == 10


# Claudes in real terminals of real headless Neovims, through `claude-nvim hold`.

def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def until(condition, what: str) -> None:
    with trio.fail_after(WAIT):
        while not condition():
            await trio.sleep(0.02)


# The Claude terminals of this Neovim: number, label, pid of the holder it names (adopted
# ones), its text.
TERMINALS = """local out = {}
for _, c in ipairs(require('claude_nvim.terminal').list()) do
  out[#out + 1] = { n = c.n, job = c.job, label = vim.b[c.buf].claude_nvim_label or '',
    text = table.concat(vim.api.nvim_buf_get_lines(c.buf, 0, -1, false), '\\n') }
end
return out"""


async def terminals(nvim) -> list[dict]:
    return await nvim.exec_lua(TERMINALS)


async def type_into(nvim, n: int, text: str) -> None:
    assert await nvim.exec_lua("for _, c in ipairs(require('claude_nvim.terminal').list()) do "
                               "if c.n == ... then return require('claude_nvim.terminal')"
                               ".input(select(2, ...), c.buf) end end", n, text)


def records(runtime: Path) -> dict[int, dict]:
    found = {}
    for path in runtime.glob("claude-nvim/*/claude-*.json"):
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(path.read_text())
            found[record["number"]] = record
    return found


@pytest.mark.parametrize("how", [":qa!", "kill -9"])
async def test_claudes_outlive_neovim_and_the_next_one_finds_them(claude_dir, how):
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    async with neovim(claude_dir) as user:
        await user.request("nvim_command", "ClaudeNvim")
        await user.request("nvim_input", "<C-\\><C-n>")
        await user.request("nvim_command", "ClaudeNvimNew")
        await user.request("nvim_command", "ClaudeNvimRename the parser")
        started = {c["pid"] for c in await claudes_started(claude_dir, 2)}
        await until(lambda: len(records(runtime)) == 2, "two holders")
        await type_into(user, 1, "marker-one\r")  # the terminal echoes it: on Claude 1's screen
        await eventually(user, "for _, c in ipairs(require('claude_nvim.terminal').list()) do "
                               "if c.n == 1 and table.concat(vim.api.nvim_buf_get_lines(c.buf, "
                               "0, -1, false)):find('marker-one', 1, true) then return true end "
                               "end")
        await until(lambda: records(runtime)[2]["name"] == "the parser", "the name kept")
        # Both connected: the server answers a claude before it loads, and one that loses its
        # Neovim while loading ends rather than lingers.
        await eventually(user, "local s = require('claude_nvim').server(); "
                               "return s and s.clients == 2")
        await quit_neovim(user, how)
    held = records(runtime)
    assert {held[1]["claude"], held[2]["claude"]} == started
    await until(lambda: all(r["attached"] is None for r in records(runtime).values()),
                "the holders detached")
    assert all(running(pid) for pid in started)

    # Another project's Neovim does not see them.
    other = claude_dir / "other"
    other.mkdir()
    async with neovim(other) as stranger:
        await stranger.request("nvim_command", "ClaudeNvimSwitch")
        assert await terminals(stranger) == []

    async with neovim(claude_dir) as user:  # the same project again: both found
        await eventually(user, "return #require('claude_nvim.terminal').list() == 2 and "
                               "vim.b[require('claude_nvim.terminal').list()[2].buf]"
                               ".claude_nvim_label")
        found = await terminals(user)
        assert [(t["n"], t["label"]) for t in found] == [(1, "Claude 1"),
                                                          (2, "Claude 2 · the parser")]
        assert all(running(pid) for pid in started)  # the same claudes
        assert len((claude_dir / "started.jsonl").read_text().splitlines()) == 2
        # Claude 1's terminal shows what it showed before: the holder replayed it.
        await eventually(user, "return require('claude_nvim.terminal').list()[1] and "
                               "table.concat(vim.api.nvim_buf_get_lines(require("
                               "'claude_nvim.terminal').list()[1].buf, 0, -1, false))"
                               ":find('marker-one', 1, true)")
        # /exit in Claude 1: its claude ends, and its holder with it, files and all.
        holder = held[1]["holder"]
        await type_into(user, 1, "exit\r")
        await until(lambda: not running(holder) and 1 not in records(runtime), "holder 1 ends")
        assert not Path(held[1]["socket"]).exists()
        await eventually(user, "return #require('claude_nvim.terminal').list() == 1")
        # :ClaudeNvimStop! ends the rest.
        await user.request("nvim_command", "ClaudeNvimStop!")
        await until(lambda: not any(running(pid) for pid in (*started, held[2]["holder"])),
                    "all ended")
        await until(lambda: records(runtime) == {}, "their files removed")
        await eventually(user, "return #require('claude_nvim.terminal').list() == 0")


async def test_with_outlive_false_claudes_end_with_neovim(claude_dir):
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    async with neovim(claude_dir, claude={"outlive": False}) as user:
        await user.request("nvim_command", "ClaudeNvim")
        await user.request("nvim_input", "<C-\\><C-n>")
        await user.request("nvim_command", "ClaudeNvimNew")
        started = [c["pid"] for c in await claudes_started(claude_dir, 2)]
        assert records(runtime) == {}
        current = await user.exec_lua(  # Claude 2: its job is the stand-in itself
            "return vim.fn.jobpid(require('claude_nvim.terminal').info().job)")
        assert current in started
        await user.request("nvim_command", "ClaudeNvimStop")
        await until(lambda: not running(current), "Claude 2 stopped")
        await eventually(user, "return #require('claude_nvim.terminal').list() == 1")
        await quit_neovim(user, "kill -9")
    await until(lambda: not any(map(running, started)), "the claudes end with Neovim")


async def start_held_claude(user, claude_dir, runtime: Path) -> tuple[int, int]:
    """:ClaudeNvim in ``user``'s Neovim: its claude's pid and its holder's, once both run."""
    await user.request("nvim_command", "ClaudeNvim")
    (claude,) = await claudes_started(claude_dir, 1)
    await until(lambda: len(records(runtime)) == 1, "its holder")
    return claude["pid"], records(runtime)[1]["holder"]


@pytest.mark.parametrize("how", ["claude first", "holder first", "an older env"])
async def test_a_held_claude_has_a_terminal_of_its_own(claude_dir, monkeypatch, how):
    """Where the plugin knows the install's Python, it starts claude itself and the holder
    beside it (held.lua): claude's start waits for no Python. Otherwise (opts.cmd a wrapper,
    or an `env` without --default-signal: coreutils before 8.31) the holder starts claude.
    Either way claude leads a session of its own, its terminal its controlling one (its size
    changes and hangups reach it), its SIGINT not ignored (as a shell's background job's is),
    and its holder is its parent (which reaps it)."""
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    cmd = [sys.executable, "-m", "claude_nvim"]
    if how == "an older env":
        older = claude_dir / "older"
        older.mkdir()
        (older / "env").write_text(
            "#!/bin/sh\nfor a; do case $a in --default-signal*)\n"
            "  echo \"env: unrecognized option '$a'\" >&2; exit 125;; esac; done\n"
            "exec /usr/bin/env \"$@\"\n")
        (older / "env").chmod(0o755)
        monkeypatch.setenv("PATH", f"{older}:{os.environ['PATH']}")
    async with neovim(claude_dir, cmd=["env", *cmd] if how == "holder first" else cmd) as user:
        claude, holder = await start_held_claude(user, claude_dir, runtime)
        (started,) = await claudes_started(claude_dir, 1)
        assert started["session_leader"] and started["foreground"]
        assert not started["ignores_int"]
        assert started["parent"] == holder == parent_pid(claude)
        nvim = await user.exec_lua("return vim.fn.getpid()")
        if how == "claude first":  # started by Neovim, whose terminal is its client
            assert parent_pid(holder) == nvim
            await until(lambda: records(runtime)[1].get("attached") == nvim, "attached")
        else:  # started by the terminal's job, its client
            job = await eventually(user, "local c = require('claude_nvim.terminal').list()[1] "
                                         "return c and c.job and vim.fn.jobpid(c.job)")
            assert parent_pid(holder) == job and parent_pid(job) == nvim
        await type_into(user, 1, "marker-typed\r")  # through the client and the holder
        await eventually(user, "local c = require('claude_nvim.terminal').list()[1] return "
                               "table.concat(vim.api.nvim_buf_get_lines(c.buf, 0, -1, false))"
                               ":find('marker-typed', 1, true)")


# Neovim's side of the holder's wire (claude_nvim/attach.lua): `wire` fed in pieces of `cut`
# bytes; the frames read, or the error.
READ_FRAMES = """local attach = dofile(select(1, ...) .. '/lua/claude_nvim/attach.lua')
local wire, cut = select(2, ...), select(3, ...)
local read, found = attach.reader(), {}
local ok, err = pcall(function()
  for at = 1, #wire, cut do vim.list_extend(found, read(wire:sub(at, at + cut - 1))) end
end)
return ok and found or err"""


def raw(value: str | bytes) -> bytes:
    """Bytes from Lua, which come as str where they are UTF-8 (or nearly)."""
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")


@pytest.mark.parametrize("cut", [1, 4, 5, 6, 4096, 1 << 20])
async def test_neovim_reads_the_holders_frames_however_they_are_cut(nvim, cut):
    sent = [(p.OUTPUT, b""), (p.OUTPUT, b"x"), (p.OUTPUT, bytes(range(256)) * 300),
            (p.REFUSED, "open elsewhere \N{MIDDLE DOT}".encode()), (p.EXIT, b"3")]
    wire = b"".join(p.frame(kind, payload) for kind, payload in sent)
    found = await nvim.exec_lua(READ_FRAMES, str(ROOT), wire, cut)
    assert [(raw(kind), raw(payload)) for kind, payload in found] == sent
    # What it writes, the holder reads.
    typed = b"\x00typed\xff" * 5000
    assert p.Reader().feed(raw(await nvim.exec_lua(
        "local attach = dofile(select(1, ...) .. '/lua/claude_nvim/attach.lua') "
        "return attach.frame('I', select(2, ...)) .. attach.frame('W', '')",
        str(ROOT), typed))) == [(p.INPUT, typed), (p.SIZE, b"")]
    # Bytes that are not frames are an error, not a wait for more.
    assert "not a frame" in await nvim.exec_lua(READ_FRAMES, str(ROOT), b"Z\x00\x00\x00\x01!",
                                                 cut)
    assert "not a frame" in await nvim.exec_lua(READ_FRAMES, str(ROOT),
                                                 p.HEADER.pack(p.OUTPUT, p.MAX_PAYLOAD + 1), cut)


async def test_a_held_claudes_terminal_has_its_windows_size(claude_dir):
    """Neovim attaches a held Claude's terminal itself: claude's terminal has the size of the
    window showing it, and follows it when that changes."""
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    async with neovim(claude_dir) as user:
        await start_held_claude(user, claude_dir, runtime)
        for change in ("", "vim.api.nvim_win_set_width(w, 50)", "vim.wo[w].number = true",
                       "vim.cmd('split'); vim.api.nvim_win_set_height(0, 7)", "vim.cmd('only')"):
            size = await user.exec_lua(
                "local c = require('claude_nvim.terminal').list()[1] "
                "local w = vim.fn.win_findbuf(c.buf)[1] " + change + " "
                "local rows, cols = 0, 0 "  # as Neovim sizes a terminal: its largest window
                "for _, win in ipairs(vim.fn.win_findbuf(c.buf)) do "
                "  local i = vim.fn.getwininfo(win)[1] "
                "  rows, cols = math.max(rows, i.height), math.max(cols, i.width - i.textoff) "
                "end return ('size %dx%d'):format(rows, cols)")
            # (Asked again until it says so: the size follows the window soon after.)
            with trio.fail_after(WAIT):
                while not await user.exec_lua(
                        "local c = require('claude_nvim.terminal').list()[1] return table"
                        ".concat(vim.api.nvim_buf_get_lines(c.buf, 0, -1, false), '\\n')"
                        ":find(..., 1, true)", size):
                    await type_into(user, 1, "size\r")
                    await trio.sleep(0.1)


async def test_a_held_claudes_terminal_shows_all_it_writes(claude_dir):
    """What claude writes reaches its terminal in Neovim whole and in order: each echo of
    what is typed, one at a time, and a flood of more than Neovim takes in before the holder
    must wait."""
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    async with neovim(claude_dir) as user:
        await start_held_claude(user, claude_dir, runtime)
        text = ("local c = require('claude_nvim.terminal').list()[1] "
                "return table.concat(vim.api.nvim_buf_get_lines(c.buf, 0, -1, false), '\\n')")
        for n in range(5):
            await type_into(user, 1, f"marker-{n}\r")
            await eventually(user, f"return (function() {text} end)():find('marker-{n}', 1, true)")
        await type_into(user, 1, "flood 40000\r")  # 1.3 MB
        shown = await eventually(user, f"local t = (function() {text} end)() "
                                       "return t:find('flood done', 1, true) and t")
        numbers = [int(line.split()[1]) for line in shown.splitlines() if line.startswith("fl ")]
        assert numbers[-1] == 39999 and numbers == list(range(40000 - len(numbers), 40000))
        assert len(numbers) > 5000  # as much as the scrollback keeps


async def test_megabytes_typed_at_once_keep_a_held_claude_attached(claude_dir):
    """The holder takes frames of at most 1 MiB: a bigger paste goes in several, and the
    terminal stays attached (one frame too big, the holder would drop it): claude reads all of
    it, in order, and what it writes next is shown."""
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    async with neovim(claude_dir) as user:
        await start_held_claude(user, claude_dir, runtime)
        # (In lines: one line over 4 KiB overflows claude's cooked terminal, not the wire.
        # Its answer, not the echo, is waited for: an echo made while the holder is behind
        # can wait in the kernel until claude next writes.)
        await type_into(user, 1, ("x" * 1023 + "\r") * 2048 + "size\r")
        await eventually(user, "local c = require('claude_nvim.terminal').list()[1] "
                               "return c and table.concat(vim.api.nvim_buf_get_lines(c.buf, 0, "
                               "-1, false)):find('size %d+x%d+')")


async def test_a_held_claude_that_exits_at_once_says_why(claude_dir):
    """A claude that cannot start exits before its terminal's client has attached: its holder
    waits for that client, which shows what claude said and its status."""
    failing = claude_dir / "bin" / "claude-fails"
    failing.write_text("#!/bin/sh\necho 'claude: no API key here'\nexit 3\n")
    failing.chmod(0o755)
    async with neovim(claude_dir) as user:
        await user.exec_lua("vim.env.CLAUDE_NVIM_CLAUDE = ...", str(failing))
        await user.request("nvim_command", "ClaudeNvim")
        message = await eventually(
            user, "local m = vim.api.nvim_exec2('messages', {output = true}).output "
                  "return m:find('exited with code', 1, true) and m")
        assert "exited with code 3" in message
        await eventually(user, "for _, b in ipairs(vim.api.nvim_list_bufs()) do "
                               "if vim.b[b].claude_nvim_terminal == 1 and table.concat("
                               "vim.api.nvim_buf_get_lines(b, 0, -1, false)):find("
                               "'no API key here', 1, true) then return true end end")


async def test_a_holder_that_cannot_start_says_why_and_ends_its_claude(claude_dir):
    """claude starts before its holder binds its socket; when another process listens there
    (not a holder this Neovim can see: no record), the holder says why, its claude ends, and
    its terminal says why."""
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    squatter = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        squatter.bind(str(project_dir(str(claude_dir)) / "claude-1.sock"))
        squatter.listen(8)
        async with neovim(claude_dir) as user:
            await user.request("nvim_command", "ClaudeNvim")
            message = await eventually(
                user, "local m = vim.api.nvim_exec2('messages', {output = true}).output "
                      "return m:find('served by a live holder', 1, true) and m")
            assert "Claude 1: hold: " in message
            await until(lambda: not stand_ins_run(claude_dir), "its claude ended")
            # Its terminal stays, saying so.
            await eventually(user, "for _, b in ipairs(vim.api.nvim_list_bufs()) do "
                                   "if vim.b[b].claude_nvim_terminal == 1 and table.concat("
                                   "vim.api.nvim_buf_get_lines(b, 0, -1, false)):find("
                                   "'served by a live holder', 1, true) then "
                                   "return true end end")
            assert records(runtime) == {}
    finally:
        squatter.close()


async def test_stop_ends_the_current_claude(claude_dir):
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    async with neovim(claude_dir) as user:
        claude, holder = await start_held_claude(user, claude_dir, runtime)
        await user.request("nvim_input", "<C-\\><C-n>")
        await user.request("nvim_command", "ClaudeNvimStop")
        await until(lambda: not running(claude) and not running(holder), "ended")
        await eventually(user, "return #require('claude_nvim.terminal').list() == 0")
        assert records(runtime) == {}


async def test_wiping_a_held_claudes_buffer_ends_it(claude_dir):
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    async with neovim(claude_dir) as user:
        claude, holder = await start_held_claude(user, claude_dir, runtime)
        await user.exec_lua("vim.api.nvim_buf_delete(require('claude_nvim.terminal')"
                            ".list()[1].buf, { force = true })")
        await until(lambda: not running(claude) and not running(holder), "ended")
        assert records(runtime) == {}


async def test_a_held_claude_wiped_before_its_holder_is_up_ends(claude_dir):
    """Its holder starts once claude is up (held.lua): a buffer wiped before the holder
    listens ends claude all the same (the stop waits for the holder), and leaves no holder."""
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    async with neovim(claude_dir) as user:
        holder, socket_was_there = await user.exec_lua(
            "vim.cmd('ClaudeNvim') "
            "local c = require('claude_nvim.terminal').list()[1] "
            "vim.wait(10000, function() return vim.b[c.buf].claude_nvim_pid ~= nil end, 1) "
            "local sock = require('claude_nvim.held').socket(1) "
            "local there = vim.uv.fs_stat(sock) ~= nil "
            "local pid = vim.b[c.buf].claude_nvim_pid "
            "vim.api.nvim_buf_delete(c.buf, { force = true }) "
            "return { pid, there }")
        assert not socket_was_there  # wiped while the holder was still to come
        await until(lambda: not running(holder) and not stand_ins_run(claude_dir),
                    "claude and its holder ended")
        assert records(runtime) == {}


# A claude that never connects: Neovim stays its terminal until something else starts its
# holder. It says "got: LINE" for each line typed (with no echo, as claude), its terminal's
# size for "size".
QUIET_CLAUDE = """#!/bin/sh
stty -echo
echo $$ > "{out}/quiet.pid"
echo "quiet claude $$"
while read -r line; do
  case $line in
    size) echo "size $(stty size)";;
    *) echo "got: $line";;
  esac
done
"""

SHOWN = ("(function() local c = require('claude_nvim.terminal').list()[1] return c and "
         "table.concat(vim.api.nvim_buf_get_lines(c.buf, 0, -1, false), '\\n') or '' end)()")


async def start_quiet_claude(user, claude_dir: Path, hold_after_ms: int) -> int:
    """:ClaudeNvim with QUIET_CLAUDE as claude, its holder to start ``hold_after_ms`` after it
    (or sooner); its pid, once it runs."""
    quiet = claude_dir / "bin" / "claude-quiet"
    quiet.write_text(QUIET_CLAUDE.format(out=claude_dir))
    quiet.chmod(0o755)
    await user.exec_lua("vim.env.CLAUDE_NVIM_CLAUDE = ... "
                        "require('claude_nvim.held').hold_after_ms = select(2, ...)",
                        str(quiet), hold_after_ms)
    await user.request("nvim_command", "ClaudeNvim")
    await eventually(user, f"return ({SHOWN}):find('quiet claude', 1, true)")
    return int((claude_dir / "quiet.pid").read_text())


async def shows(user, text: str) -> str:
    """Wait until Claude 1's terminal shows ``text``; all it shows."""
    return await eventually(user, f"local t = {SHOWN} return t:find(..., 1, true) and t",
                            text)


async def test_neovim_is_claudes_terminal_until_its_holder_takes_over(claude_dir):
    """claude starts on a pseudo-terminal Neovim made, and Neovim is its terminal (keys,
    output, size) while its holder waits, loaded no further; once a Claude connects, the
    holder takes the terminal over: nothing shown twice, nothing lost, and Neovim attached."""
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    async with neovim(claude_dir) as user:
        claude = await start_quiet_claude(user, claude_dir, 600_000)
        holder = await user.exec_lua("return vim.b[require('claude_nvim.terminal')"
                                     ".list()[1].buf].claude_nvim_pid")
        assert parent_pid(claude) == holder and running(holder)
        await type_into(user, 1, "ping\r")
        await shows(user, "got: ping")
        rows, cols = await user.exec_lua("local w = vim.fn.win_findbuf(require("
                                         "'claude_nvim.terminal').list()[1].buf)[1] "
                                         "vim.api.nvim_win_set_width(w, 50) "
                                         "return { vim.fn.getwininfo(w)[1].height, 50 }")
        with trio.fail_after(WAIT):  # (asked again until it says so: it follows soon after)
            while not await user.exec_lua(f"return ({SHOWN}):find(..., 1, true)",
                                          f"size {rows} {cols}"):
                await type_into(user, 1, "size\r")
                await trio.sleep(0.1)
        assert records(runtime) == {}  # no holder yet
        assert not list(runtime.glob("claude-nvim/*/claude-1.sock"))

        await user.exec_lua("vim.api.nvim_exec_autocmds('User', "
                            "{ pattern = 'ClaudeNvimConnected' })")
        await until(lambda: 1 in records(runtime), "its holder")
        assert records(runtime)[1]["holder"] == holder and records(runtime)[1]["claude"] == claude
        await until(lambda: records(runtime)[1]["attached"] is not None, "Neovim attached")
        await type_into(user, 1, "pong\r")
        text = await shows(user, "got: pong")
        assert text.count("got: ping") == 1 and text.count("quiet claude") == 1
        await user.request("nvim_input", "<C-\\><C-n>")
        await user.request("nvim_command", "ClaudeNvimStop")
        await until(lambda: not running(claude) and not running(holder), "ended")


async def test_a_held_claudes_terminal_answers_what_claude_asks_of_its_colours(claude_dir):
    """claude asks its terminal's background colour as it starts (OSC 11) and waits for the
    answer: a terminal with no job gets no answer from Neovim's own handler, the plugin's."""
    asking = claude_dir / "bin" / "claude-asks"
    asking.write_text("#!/bin/sh\nstty raw -echo\nprintf '\\033]11;?\\007'\n"
                      f"dd bs=1 count=24 of={claude_dir}/reply 2>/dev/null\nsleep 100\n")
    asking.chmod(0o755)
    async with neovim(claude_dir) as user:
        await user.exec_lua("vim.env.CLAUDE_NVIM_CLAUDE = ...", str(asking))
        await user.request("nvim_command", "ClaudeNvim")
        await until(lambda: (claude_dir / "reply").exists()
                    and len((claude_dir / "reply").read_bytes()) == 24, "its answer")
        assert (claude_dir / "reply").read_bytes() == b"\x1b]11;rgb:0000/0000/0000\x07"


async def test_the_holder_takes_over_by_itself_after_a_while(claude_dir):
    """A claude that never connects (a wrong server, no IDE) is held all the same."""
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    async with neovim(claude_dir) as user:
        claude = await start_quiet_claude(user, claude_dir, 200)
        await until(lambda: 1 in records(runtime), "its holder")
        assert records(runtime)[1]["claude"] == claude
        await type_into(user, 1, "pong\r")
        await shows(user, "got: pong")


async def test_the_holder_takes_over_once_claude_connects(claude_dir):
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    async with neovim(claude_dir) as user:
        await user.exec_lua("require('claude_nvim.held').hold_after_ms = 600000 "
                            "vim.api.nvim_create_autocmd('User', { pattern = "
                            "'ClaudeNvimConnected', once = true, callback = function() "
                            "vim.g.connected_at = vim.uv.clock_gettime('realtime') end })")
        await user.request("nvim_command", "ClaudeNvim")
        await until(lambda: 1 in records(runtime), "its holder")
        at = await user.exec_lua("local t = vim.g.connected_at return t.sec + t.nsec / 1e9")
        assert records(runtime)[1]["started"] >= at


@pytest.mark.parametrize("how", [":qa!", "kill -9"])
async def test_a_claude_not_held_yet_outlives_neovim(claude_dir, how):
    """Neovim quits while it is claude's terminal still: the holder takes over then, and the
    next Neovim of the project finds that claude."""
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    async with neovim(claude_dir) as user:
        claude = await start_quiet_claude(user, claude_dir, 600_000)
        await type_into(user, 1, "ping\r")
        await shows(user, "got: ping")
        await quit_neovim(user, how)
    await until(lambda: 1 in records(runtime), "its holder")
    assert records(runtime)[1]["claude"] == claude and running(claude)
    async with neovim(claude_dir) as user:
        await user.request("nvim_command", "ClaudeNvim")
        # What claude wrote while Neovim was its terminal is in its holder's ring too (with
        # claude's terminal modes, set as it starts).
        await shows(user, "got: ping")
        await type_into(user, 1, "pong\r")
        await shows(user, "got: pong")
        assert running(claude)


async def test_keys_a_stopped_claude_did_not_take_go_to_its_holder(claude_dir):
    """Neovim never waits on claude's pseudo-terminal: keys it has no room for wait in Lua,
    and go to the holder when it takes over, in order, none twice; a claude that reads
    none (stopped) does not keep its holder from starting."""
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    async with neovim(claude_dir) as user:
        claude = await start_quiet_claude(user, claude_dir, 600_000)
        lines = [f"l{i:05d}" + "x" * 20 for i in range(4000)]  # 104 KB: more than a pty takes
        os.kill(claude, signal.SIGSTOP)
        try:
            await type_into(user, 1, "".join(line + "\r" for line in lines))
            await user.exec_lua("vim.api.nvim_exec_autocmds('User', "
                                "{ pattern = 'ClaudeNvimConnected' })")
            await until(lambda: 1 in records(runtime), "its holder, claude stopped")
        finally:
            os.kill(claude, signal.SIGCONT)
        text = await shows(user, f"got: {lines[-1]}")
        assert [line[5:] for line in text.splitlines() if line.startswith("got: ")] == lines


async def test_a_claude_named_and_stopped_before_its_holder_is_up(claude_dir):
    """What the user tells a Claude whose holder has not started yet waits for it: the
    holder starts at once."""
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    async with neovim(claude_dir) as user:
        claude = await start_quiet_claude(user, claude_dir, 600_000)
        await user.request("nvim_input", "<C-\\><C-n>")
        await user.request("nvim_command", "ClaudeNvimRename the parser")
        await until(lambda: records(runtime).get(1, {}).get("name") == "the parser",
                    "the name kept")
        holder = records(runtime)[1]["holder"]
        await user.request("nvim_command", "ClaudeNvimStop")
        await until(lambda: not running(claude) and not running(holder), "ended")
        assert records(runtime) == {}


async def test_two_neovims_starting_claudes_at_once_get_two_numbers(claude_dir):
    """A Claude's number is claimed as it starts, before its holder has it: another Neovim of
    the project starting one meanwhile takes the next (the same number, one holder would find
    it held and end its claude)."""
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    async with neovim(claude_dir) as first, neovim(claude_dir) as second:
        quiet = await start_quiet_claude(first, claude_dir, 600_000)
        assert records(runtime) == {}  # not held yet
        await second.request("nvim_command", "ClaudeNvim")
        await until(lambda: 2 in records(runtime), "the second Neovim's holder")
        assert await second.exec_lua("return require('claude_nvim.terminal').list()[1].n") == 2
        await first.exec_lua("vim.api.nvim_exec_autocmds('User', "
                             "{ pattern = 'ClaudeNvimConnected' })")
        await until(lambda: 1 in records(runtime), "the first Neovim's holder")
        assert records(runtime)[1]["claude"] == quiet and running(quiet)
        assert running(records(runtime)[2]["claude"])
        await until(lambda: not list(runtime.glob("claude-nvim/*/*.claim")),
                    "the claims removed: the holders' records have the numbers")


async def test_a_second_neovim_of_the_project_leaves_the_first_its_claudes(claude_dir):
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    async with neovim(claude_dir) as first:
        await first.request("nvim_command", "ClaudeNvim")
        (claude,) = await claudes_started(claude_dir, 1)
        await until(lambda: records(runtime).get(1, {}).get("attached"), "attached")
        attached = records(runtime)[1]["attached"]
        async with neovim(claude_dir) as second:
            await second.request("nvim_command", "ClaudeNvimSwitch")  # finds it; refused
            await eventually(second, "return #require('claude_nvim.terminal').list() == 0 "
                                     "and vim.api.nvim_exec2('messages', { output = true })"
                                     ".output:find('open in another Neovim', 1, true)")
            assert records(runtime)[1]["attached"] == attached
        await type_into(first, 1, "still-here\r")  # the first one's terminal still works
        await eventually(first, "return table.concat(vim.api.nvim_buf_get_lines(require("
                                "'claude_nvim.terminal').list()[1].buf, 0, -1, false))"
                                ":find('still-here', 1, true)")
        assert running(claude["pid"])


def read_until(fd: int, wanted: bytes) -> bytes:
    """Read the pty ``fd`` until ``wanted`` shows (or WAIT passes)."""
    got = b""
    deadline = time.monotonic() + WAIT
    while wanted not in got:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise TimeoutError(f"no {wanted!r} in {got[-500:]!r}")
        got += os.read(fd, 65536)
    return got


@contextlib.contextmanager
def held_cat(project: Path, runtime: Path,
             **env: str) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """`cat` held as Claude 4 of ``project``, its client in a terminal of ours, attached: the
    client and the terminal's master end. Both are ended (by pid) and closed after."""
    master, slave = os.openpty()
    client = subprocess.Popen(
        [sys.executable, "-m", "claude_nvim", "hold", "--number", "4", "--project",
         str(project), "--", "cat"], stdin=slave, stdout=slave, stderr=slave,
        start_new_session=True, env={**os.environ, **env})
    os.close(slave)
    try:
        deadline = time.monotonic() + WAIT
        while not records(runtime).get(4, {}).get("attached"):
            assert time.monotonic() < deadline and client.poll() is None
            time.sleep(0.02)
        yield client, master
    finally:
        end_holders(runtime)
        if client.poll() is None:
            os.killpg(client.pid, signal.SIGKILL)
        client.wait()
        os.close(master)


def test_a_holder_drops_what_is_not_its_wire_and_serves_on(tmp_path, monkeypatch):
    with private_runtime(monkeypatch) as runtime, \
            held_cat(tmp_path, runtime, NVIM="/run/nvim-of-the-terminal") as (client, master):
        record = records(runtime)[4]
        assert record["argv"] == ["cat"] and record["attached"] == client.pid
        assert record["nvim"] == "/run/nvim-of-the-terminal"  # for claude's editor
        sock = record["socket"]
        assert os.stat(sock).st_mode & 0o777 == 0o600
        for garbage in (b"Z\0\0\0\0", p.HEADER.pack(p.INPUT, p.MAX_PAYLOAD + 1), b"\xff" * 64):
            with socket.socket(socket.AF_UNIX) as intruder:
                intruder.connect(sock)
                intruder.sendall(garbage)
                intruder.settimeout(WAIT)
                assert intruder.recv(1) == b""  # dropped
        # A second attach while the first is attached: refused, the first served on.
        with socket.socket(socket.AF_UNIX) as second:
            second.connect(sock)
            second.sendall(p.frame(p.ATTACH, p.window(24, 80)))
            second.settimeout(WAIT)
            answer = p.Reader().feed(second.recv(4096))
            assert answer[0][0] == p.REFUSED and b"another Neovim" in answer[0][1]
        assert records(runtime)[4]["nvim"] == "/run/nvim-of-the-terminal"
        os.write(master, b"still served\r")
        read_until(master, b"still served\r\n")  # cat's line, through the holder
        os.write(master, b"\x04")  # cat ends: its holder too, and the client with its code
        assert client.wait(WAIT) == 0
        deadline = time.monotonic() + WAIT
        while running(record["holder"]) or records(runtime):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert not os.path.exists(sock)
        assert not os.path.exists(os.path.dirname(sock))  # the last one out: the directory


def test_a_number_already_held_is_refused_and_what_it_started_ends(tmp_path, monkeypatch):
    """claude starts before its holder binds its socket (at once, see _hold/launch.py); when
    that number turns out to be held already, the new claude is hung up, not left running."""
    marker = f"started-for-nothing-{os.getpid()}"
    with private_runtime(monkeypatch) as runtime, held_cat(tmp_path, runtime) as (first, master):
        second = subprocess.run(
            [sys.executable, "-m", "claude_nvim", "hold", "--number", "4", "--project",
             str(tmp_path), "--", "sh", "-c", "trap '' HUP; sleep 300; :", marker],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=WAIT,
            check=False)
        assert second.returncode == 1
        assert "is served by a live holder" in second.stderr
        left = [pid for pid in os.listdir("/proc") if pid.isdigit()
                and marker.encode() in _cmdline(pid) and running(int(pid))]
        assert left == []
        assert records(runtime)[4]["argv"] == ["cat"]  # the first holder serves on
        os.write(master, b"\x04")
        assert first.wait(WAIT) == 0


def stand_ins_run(claude_dir: Path) -> bool:
    """Whether a stand-in claude of ``claude_dir`` runs (one killed at once wrote nothing)."""
    stand_in = str(claude_dir / "bin" / "claude").encode()
    return any(stand_in in _cmdline(pid) and running(int(pid))
               for pid in os.listdir("/proc") if pid.isdigit())


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def lua_hold_command(tmp_path: Path, cmd: list[str] | str) -> list[str]:
    """What lua/claude_nvim/held.lua runs for `claude-nvim hold --attach SOCK` with opts.cmd."""
    chunk = tmp_path / "hold_command.lua"
    chunk.write_text(
        "require('claude_nvim').setup({ cmd = vim.json.decode(_G.arg[1]) }) "
        "io.stdout:write(vim.json.encode(require('claude_nvim.held').hold_command("
        "{ '--attach', 'SOCK' })))")
    done = subprocess.run(
        [find_nvim(), "--clean", "--headless", "--cmd", f"set rtp^={ROOT}", "-l", str(chunk),
         json.dumps(cmd)], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def test_the_holder_starts_with_the_installs_python_and_no_site(tmp_path):
    """The plugin runs the holder's start from its checkout with no site where it knows the
    install's Python (claude starts only once that has run); else `claude-nvim hold`."""
    fast = [sys.executable, "-I", "-S", "-c"]
    by_module = lua_hold_command(tmp_path, [sys.executable, "-m", "claude_nvim"])
    assert by_module[:4] == fast and by_module[5:] == [str(ROOT / "src"), "--attach", "SOCK"]
    script = tmp_path / "claude-nvim"  # as pip writes a console script
    script.write_text(f"#!{sys.executable}\n# -*- coding: utf-8 -*-\nimport re\n")
    script.chmod(0o755)
    assert lua_hold_command(tmp_path, str(script))[:4] == fast
    # pip's form for a long path or one with spaces names sh, not Python: the plain command.
    script.write_text(f"#!/bin/sh\n'''exec' '{sys.executable}' \"$0\" \"$@\"\n' '''\n")
    assert lua_hold_command(tmp_path, str(script)) == [str(script), "hold", "--attach", "SOCK"]
    wrapped = ["env", "A=1", str(script)]
    assert lua_hold_command(tmp_path, wrapped) == [*wrapped, "hold", "--attach", "SOCK"]
    # The command it gives runs: a socket no holder serves is said so.
    done = subprocess.run([*by_module[:-1], str(tmp_path / "none.sock")],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 1 and "no Claude holds" in done.stderr
    odd = subprocess.run([*by_module[:-2], "--number"], capture_output=True, text=True,
                         timeout=60, check=False)
    assert odd.returncode == 2 and "not a command line of the plugin's" in odd.stderr

