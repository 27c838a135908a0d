"""A server that outlives its Neovim while a Claude needs it (docs/architecture.md, "What
outlives Neovim"): a real plugin Neovim starts it, a real WebSocket client stays connected
across Neovim's end, and the next Neovim of the project takes the same server over. Held
Claudes (``claude-*.json``, the ``hold`` part) are stood in for by a record naming a live pid."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from claude_nvim import _project
from claude_nvim._nvim.headless import headless_nvim
from claude_nvim.testing import attached_editor, mcp_client, running_app
from helpers import WAIT, HookedClaude, eventually, published_settings
from plugin_kit import alive, plugin_args, private_runtime

STATUS = "require('claude_nvim').status()"
STATE = "local c = require('claude_nvim').server().claudes return c and c[1] and c[1].state"
READY = "local s = require('claude_nvim').server() return s and s.claude and {s.pid, s.port}"
START = "require('claude_nvim').when_ready(function() end, function() end)"


@pytest.fixture
def runtime(tmp_path, monkeypatch) -> Iterator[Path]:
    """A private $XDG_RUNTIME_DIR (project directories go there) and $CLAUDE_CONFIG_DIR, for
    the Neovims and servers the test starts. A short path, as a real one is: a Unix socket's
    path has at most 107 bytes, which one in pytest's tmp_path under xdist would pass."""
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg"))
    for name in ("NVIM", "CLAUDE_CODE_SSE_PORT"):
        monkeypatch.delenv(name, raising=False)
    with private_runtime(monkeypatch) as runtime:
        yield runtime


@contextlib.contextmanager
def neovim(project: Path, **opts):
    """A plugin Neovim in ``project`` (the server at first use): its address and process."""
    project.mkdir(exist_ok=True)
    with headless_nvim(cwd=project, args=plugin_args(start_server="first_use", **opts)) as run:
        yield run


async def started_server(address: str, servers: set[int]) -> tuple[int, int]:
    """Start (or take over) this project's server from the Neovim at ``address``: its pid and
    port once it is ready there."""
    async with attached_editor(address) as nvim:
        await nvim.exec_lua(START)
        pid, port = await eventually(nvim, READY, timeout=WAIT)
    servers.add(pid)
    return pid, port


async def quit_neovim(address: str, process: subprocess.Popen[bytes], how: str) -> None:
    if how == "kill -9":
        process.kill()
    else:
        with contextlib.suppress(BaseExceptionGroup):  # EditorGone: it quit under the request
            async with attached_editor(address) as nvim:
                await nvim.request("nvim_command", "qa!")
    with trio.fail_after(WAIT):
        while process.poll() is None:
            await trio.sleep(0.02)


async def lingering(record: Path) -> None:
    """Once the server lingers: its ``server.json`` is written."""
    with trio.fail_after(WAIT):
        while not record.exists():
            await trio.sleep(0.02)


async def gone(pid: int) -> None:
    with trio.fail_after(WAIT):
        while alive(pid):
            await trio.sleep(0.05)


def token(tmp_path: Path, port: int) -> str:
    return json.loads((tmp_path / "cfg" / "ide" / f"{port}.lock").read_text())["authToken"]


@pytest.mark.parametrize("how", ["qa!", "kill -9"])
async def test_a_claude_stays_connected_and_the_next_neovim_takes_the_server_over(
        tmp_path, runtime, servers, how):
    project = tmp_path / "project"
    with neovim(project) as (address, process):
        pid, port = await started_server(address, servers)
        async with attached_editor(address) as nvim:
            settings = published_settings(await nvim.exec_lua(
                "return require('claude_nvim').server().claude.args"))
        lock = tmp_path / "cfg" / "ide" / f"{port}.lock"
        record = _project.project_dir(str(project)) / "server.json"
        async with contextlib.AsyncExitStack() as stack:
            client = await stack.enter_async_context(mcp_client(port, token(tmp_path, port)))
            await quit_neovim(address, process, how)
            await lingering(record)
            # The same connection, answered: no Neovim, said so, never a hang.
            error = await client.tool_error("getCurrentSelection")
            assert error == f"Neovim is not running; reopen it in {project}"
            assert alive(pid)
            assert json.loads(lock.read_text())["pid"] == pid  # alive: claude keeps the lock
            assert json.loads(record.read_text())["pid"] == pid
            # Its turn goes on: every hook answered (the review records it), none an error.
            claude = HookedClaude(client, settings, project)
            await claude.prompt("write b")
            await claude.write(project / "b.txt", "b\n")
            await claude.stop()
            assert [c["name"] for c in claude.calls if c["result"].get("isError")] == []
            # A Neovim in another project never sees it: it starts its own.
            with neovim(tmp_path / "elsewhere") as (other, _):
                assert (await started_server(other, servers))[0] != pid
            # One in the project takes it over: the same server, port and connection.
            with neovim(project) as (again, new_process):
                assert await started_server(again, servers) == (pid, port)
                with trio.fail_after(WAIT):  # taken: a second Neovim starts its own
                    while record.exists():
                        await trio.sleep(0.02)
                # The lock names this Neovim again, as a new server's would.
                assert json.loads(lock.read_text())["pid"] == new_process.pid
                async with attached_editor(again) as nvim:
                    (project / "a.txt").write_text("alpha beta\n")
                    await nvim.request("nvim_command", "edit a.txt")
                    seen = len(client.notifications)
                    await nvim.request("nvim_input", "gg0vl")
                    with trio.fail_after(WAIT):
                        while True:
                            note = await client.next_notification("selection_changed", after=seen)
                            seen = client.notifications.index(note) + 1
                            if note["params"]["text"] == "al":
                                break
                    # The new Neovim knows the Claude's state from its hooks, and its turn.
                    assert await eventually(nvim, f"return {STATUS} ~= 'Claude' and "
                                                  f"{STATUS}") == "Claude · 1 file to review"
                    assert await eventually(nvim, STATE) == "done"
                await stack.aclose()  # the Claude goes: nothing keeps the server then
                async with attached_editor(again) as nvim:
                    await eventually(nvim, f"return {STATUS} == ''")
                await quit_neovim(again, new_process, how)
    await gone(pid)
    assert not lock.exists()
    assert not record.exists() and not record.with_name("server.sock").exists()


@pytest.mark.parametrize("opts", [{}, {"claude": {"outlive": False}}])
async def test_with_no_claude_or_outlive_false_the_server_ends_with_neovim(
        tmp_path, runtime, servers, opts):
    with neovim(tmp_path / "project", **opts) as (address, process):
        pid, port = await started_server(address, servers)
        lock = tmp_path / "cfg" / "ide" / f"{port}.lock"
        async with contextlib.AsyncExitStack() as stack:
            if opts:  # a connected Claude does not keep it
                client = await stack.enter_async_context(mcp_client(port, token(tmp_path, port)))
            await quit_neovim(address, process, "qa!")
            await gone(pid)
            if opts:
                with pytest.raises(Exception):  # noqa: B017 - the connection is closed
                    await client.call_tool("getCurrentSelection")
    assert not lock.exists()
    assert not any(runtime.rglob("server.*"))


async def test_a_lingering_server_ends_after_the_grace_once_nothing_needs_it(
        tmp_path, runtime):
    """In process: the held Claude (a stand-in record) and then the client keep it; once both
    are gone, it ends within its grace, with its files."""
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        ended = trio.Event()
        with headless_nvim(cwd=tmp_path, args=("--clean",)) as (address, process):
            async with trio.open_nursery() as nursery:
                async def serve(task_status=trio.TASK_STATUS_IGNORED):
                    with contextlib.suppress(BaseExceptionGroup):  # EditorGone at the end
                        async with running_app(address, lock_directory=tmp_path / "ide",
                                               linger=True, linger_grace=0.2) as app:
                            task_status.started(app)
                            await trio.sleep_forever()
                    ended.set()
                app = await nursery.start(serve)
                project_dir = _project.project_dir(str(tmp_path))
                (project_dir / "claude-1.json").write_text(json.dumps({"holder": holder.pid}))
                async with mcp_client(app.port, app.token):
                    process.kill()
                    await lingering(project_dir / "server.json")
                    assert not ended.is_set()
                holder.kill()
                holder.wait()
                with trio.fail_after(WAIT):
                    await ended.wait()
                assert not (project_dir / "server.json").exists()
                assert not (project_dir / "server.sock").exists()
                assert not list((tmp_path / "ide").glob("*.lock"))
    finally:
        holder.kill()
        holder.wait()


async def test_python_and_lua_agree_on_the_project_directory(tmp_path, runtime, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", f"{runtime}/")  # as a user may set it
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    with headless_nvim(cwd=link, args=plugin_args()) as (address, _):
        async with attached_editor(address) as nvim:
            lua = await nvim.exec_lua("return require('claude_nvim.project').dir()")
    assert lua == str(_project.project_dir(str(link)))
    assert lua.startswith(str(runtime))


async def test_a_refused_attach_leaves_the_server_lingering(tmp_path, runtime, servers):
    """An address where no Neovim listens: refused with a reason; it still lingers."""
    with neovim(tmp_path / "project") as (address, process):
        pid, port = await started_server(address, servers)
        async with mcp_client(port, token(tmp_path, port)):
            await quit_neovim(address, process, "qa!")
            record = _project.project_dir(str(tmp_path / "project")) / "server.json"
            await lingering(record)
            socket_path = json.loads(record.read_text())["socket"]
            stream = await trio.open_unix_socket(socket_path)
            async with stream:
                await stream.send_all(json.dumps({"nvim": str(tmp_path / "none")}).encode()
                                      + b"\n")
                with trio.fail_after(WAIT):
                    answer = json.loads(await stream.receive_some(4096))
                    assert "cannot reach Neovim" in answer["error"]
            assert alive(pid) and record.exists()
    await gone(pid)


async def test_with_no_private_project_directory_it_lingers_unreachable(tmp_path, runtime):
    """A root directory others may enter is refused (nothing written in it); the Claude keeps
    its connection all the same."""
    (runtime / "claude-nvim").mkdir(mode=0o755)
    (runtime / "claude-nvim").chmod(0o755)
    with headless_nvim(cwd=tmp_path, args=("--clean",)) as (address, process):
        async with running_app(address, lock_directory=tmp_path / "ide", linger=True) as app, \
                mcp_client(app.port, app.token) as client:
            process.kill()
            with trio.fail_after(WAIT):
                while "not running" not in await client.tool_error("getCurrentSelection"):
                    await trio.sleep(0.05)
            assert list((runtime / "claude-nvim").iterdir()) == []


SIGNS = """
local ns = vim.api.nvim_get_namespaces().claude_nvim_review_signs
return vim.tbl_map(function(m) return { m[2] + 1, vim.trim(m[4].sign_text) } end,
  vim.api.nvim_buf_get_extmarks(vim.fn.bufnr(...), ns, 0, -1, { details = true }))
"""
TO_REVIEW = "require('claude_nvim').live('review').to_review()"


async def test_the_next_neovim_shows_the_turns_recorded_before_and_while_none_was_open(
        tmp_path, runtime, servers):
    """Turns 1 (reviewed) and 2 while the first Neovim is open, turn 3 while none is: the next
    Neovim of the project shows them as the first would have (the status, the signs in its
    buffers, the list), and takes them back (:ClaudeNvimRevert, :ClaudeNvimRewind)."""
    project = tmp_path / "project"
    project.mkdir()
    a, b, c, made = (project / f"{n}.txt" for n in ("a", "b", "c", "made"))
    for path in (a, b, c):
        path.write_text(f"{path.stem} 1\n{path.stem} 2\n{path.stem} 3\n")
    with neovim(project) as (address, process):
        pid, port = await started_server(address, servers)
        async with contextlib.AsyncExitStack() as stack:
            client = await stack.enter_async_context(mcp_client(port, token(tmp_path, port)))
            async with attached_editor(address) as nvim:
                settings = published_settings(await nvim.exec_lua(
                    "return require('claude_nvim').server().claude.args"))
                await nvim.request("nvim_command", "edit c.txt | edit a.txt")
                claude = HookedClaude(client, settings, project)
                await claude.prompt("Turn 1, reviewed.")
                await claude.edit(c, "c 1", "C 1")
                await claude.stop()
                await eventually(nvim, f"return {TO_REVIEW} == 1")
                await nvim.request("nvim_command", "ClaudeNvimReview 1")
                await eventually(nvim, f"return {TO_REVIEW} == 0")
                await nvim.request("nvim_command", "tabclose")
                await claude.prompt("Turn 2.")
                await claude.edit(a, "a 2", "A 2")
                await claude.stop()
                assert await eventually(nvim, f"local s = (function(...) {SIGNS} end)(...) "
                                              "return #s > 0 and s", str(a)) == [[2, "~"]]
                assert await nvim.exec_lua(f"return {TO_REVIEW}") == 1
            await quit_neovim(address, process, "qa!")
            await lingering(_project.project_dir(str(project)) / "server.json")
            await claude.prompt("Turn 3, while no Neovim is open.")
            await claude.edit(b, "b 3", "B 3\nb 4")
            await claude.write(made, "made\n")
            assert [c["name"] for c in claude.calls if c["result"].get("isError")] == []
            with neovim(project) as (again, new_process):
                async with attached_editor(again) as nvim:
                    await nvim.request("nvim_command", "edit a.txt | edit b.txt | edit c.txt")
                    assert await started_server(again, servers) == (pid, port)
                    # The status and the signs, as the first Neovim would show them: turn 3
                    # still goes on, turn 2 waits for review.
                    assert await eventually(nvim, f"local s = (function(...) {SIGNS} "
                                                  "end)(...) return #s > 0 and s",
                                            str(a)) == [[2, "~"]]
                    assert await nvim.exec_lua(f"return {TO_REVIEW}") == 1
                    assert await nvim.exec_lua(SIGNS, str(b)) == []
                    await claude.stop()
                    assert await eventually(nvim, f"return {TO_REVIEW} > 1 and "
                                                  f"{TO_REVIEW}") == 2
                    assert await eventually(nvim, f"local s = (function(...) {SIGNS} "
                                                  "end)(...) return #s > 0 and s",
                                            str(b)) == [[3, "~"], [4, "~"]]
                    assert await eventually(nvim, f"local s = (function(...) {SIGNS} "
                                                  "end)(...) return #s > 0 and s",
                                            str(a)) == [[2, "~"]]
                    assert await nvim.exec_lua(SIGNS, str(c)) == []  # reviewed before
                    # The list: every turn, the latest first.
                    await nvim.exec_lua("vim.ui.select = function(items) _G.offered = "
                                        "vim.tbl_map(function(t) return t.number end, "
                                        "items) end")
                    await nvim.request("nvim_command", "ClaudeNvimReview list")
                    assert await eventually(nvim, "return _G.offered") == [3, 2, 1]
                    # A hunk of turn 3 back, in b.txt's buffer.
                    await nvim.request("nvim_command", "buffer b.txt | 3ClaudeNvimRevert")
                    with trio.fail_after(WAIT):
                        while b.read_text() != "b 1\nb 2\nb 3\n":
                            await trio.sleep(0.02)
                    # Turns 2-3 rewound: turn 1's change stays.
                    await nvim.request("nvim_command", "ClaudeNvimRewind! 2")
                    with trio.fail_after(WAIT):
                        while made.exists() or a.read_text() != "a 1\na 2\na 3\n":
                            await trio.sleep(0.02)
                    assert c.read_text() == "C 1\nc 2\nc 3\n"
                await stack.aclose()
                await quit_neovim(again, new_process, "qa!")
    await gone(pid)
