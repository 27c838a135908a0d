"""The App over a real WebSocket and a real headless Neovim: auth, framing, lock file, lifecycle."""

from __future__ import annotations

import json
import logging
import os
import re
import stat
from pathlib import Path

import pytest
import trio
from trio_websocket import ConnectionClosed, ConnectionRejected, open_websocket

import claude_nvim.tools
from claude_nvim import Tool, text_result
from claude_nvim import _lockfile as lockfile
from claude_nvim._app import AlreadyServed, App
from claude_nvim._core import CoreFeature
from claude_nvim._errors import EditorError, EditorGone
from claude_nvim._nvim import editor_for
from claude_nvim._nvim.headless import headless_nvim
from claude_nvim._plugins import load_tools
from claude_nvim._selection import SelectionFeature
from claude_nvim._tool import BOTH
from claude_nvim._wire import constants as protocol
from claude_nvim.testing import mcp_client, running_app
from helpers import WAIT, masked_frame, raw_upgrade


def flatten(group: BaseException) -> list[BaseException]:
    if isinstance(group, BaseExceptionGroup):
        return [leaf for sub in group.exceptions for leaf in flatten(sub)]
    return [group]


async def rejected_status(port: int, headers: list[tuple[bytes, bytes]]) -> int:
    with pytest.raises(ConnectionRejected) as info:
        async with open_websocket("127.0.0.1", port, "/", use_ssl=False,
                                  subprotocols=["mcp"], extra_headers=headers):
            pass
    return info.value.status_code


async def test_token_is_required_before_the_upgrade(app):
    assert await rejected_status(app.port, []) == 401
    assert await rejected_status(app.port, [(b"x-claude-code-ide-authorization", b"wrong")]) == 401
    assert await rejected_status(
        app.port, [(b"X-Claude-Code-Ide-Authorization", app.token.encode() + b"x")]) == 401
    # The header name is case-insensitive.
    async with open_websocket("127.0.0.1", app.port, "/", use_ssl=False, subprotocols=["mcp"],
                              extra_headers=[(b"X-CLAUDE-CODE-IDE-AUTHORIZATION",
                                              app.token.encode())]) as ws:
        assert ws.subprotocol == "mcp"


async def test_browsers_are_refused_even_with_the_token(app):
    headers = [(b"x-claude-code-ide-authorization", app.token.encode()),
               (b"origin", b"https://evil.example")]
    assert await rejected_status(app.port, headers) == 403


async def test_listens_on_loopback_only(app):
    with pytest.raises(OSError):
        await trio.open_tcp_stream(_non_loopback_address(), app.port)


def _non_loopback_address() -> str:
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))  # no packet is sent: this only picks a route
            address = s.getsockname()[0]
        except OSError:
            address = "0.0.0.0"
    if address.startswith("127."):
        pytest.skip("this machine has no non-loopback address")
    return address


async def test_subprotocol_is_echoed_only_when_offered(app):
    async with mcp_client(app.port, app.token, subprotocols=()) as client:
        assert client.ws.subprotocol is None
        assert "result" in await client.request("ping")


async def test_any_path_is_the_ide_socket(app):
    async with mcp_client(app.port, app.token, path="/some/where?x=1") as client:
        assert (await client.result("tools/list"))["tools"]


async def test_lock_file_is_private_complete_and_removed_on_exit(nvim_address, nvim, tmp_path):
    lock_dir = tmp_path / "cfg" / "ide"
    lock_dir.mkdir(parents=True, mode=0o755)
    os.chmod(lock_dir, 0o755)
    nvim_pid = await nvim.exec_lua("return vim.fn.getpid()")
    async with running_app(nvim_address, lock_directory=lock_dir) as app:
        path = lock_dir / f"{app.port}.lock"
        assert app.lock_path == path
        assert stat.S_IMODE(lock_dir.stat().st_mode) == 0o700
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        content = json.loads(path.read_text())
        assert content == {
            "pid": nvim_pid,
            "workspaceFolders": [str(tmp_path)],
            "ideName": f"Neovim \N{MIDDLE DOT} {tmp_path.name}",  # as claude's /ide lists it
            "transport": "ws",
            "authToken": app.token,
        }
        # Beside it only the files a claude gets (--mcp-config ...), private too; no temporary.
        assert app.claude_args[::2] == ["--mcp-config", "--settings"]  # --settings: no file
        for_claude = [Path(app.claude_args[1])]
        assert sorted(lock_dir.iterdir()) == sorted([path, *for_claude])
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in for_claude)
    assert list(lock_dir.iterdir()) == []  # all gone with the server


async def test_ide_names_the_project_and_tells_two_neovims_on_it_apart(app, nvim, tmp_path):
    def name(path):
        return json.loads(path.read_text())["ideName"]

    assert name(app.lock_path) == f"Neovim \N{MIDDLE DOT} {tmp_path.name}"
    # Another Neovim on the same project: claude's /ide would show two same entries.
    with headless_nvim(cwd=tmp_path) as (other_address, _process):
        async with running_app(other_address, lock_directory=app.lock_directory) as other:
            assert name(other.lock_path) == f"Neovim \N{MIDDLE DOT} {tmp_path.name} (2)"
            assert name(app.lock_path) == f"Neovim \N{MIDDLE DOT} {tmp_path.name}"
            # The name follows Neovim's cwd.
            project = tmp_path / "parser project"
            project.mkdir()
            await nvim.exec_lua("vim.fn.chdir(...)", str(project))
            with trio.fail_after(WAIT):
                while name(app.lock_path) != "Neovim \N{MIDDLE DOT} parser project":
                    await trio.sleep(0.01)
            # The locks of claude-nvim by either name are found (claude-nvim claude, mcp).
            assert {lock.port for lock in lockfile.read_locks(app.lock_directory)} == {
                app.port, other.port}


async def test_default_token_is_random_and_long(nvim_address, tmp_path):
    tokens = {App(editor_for(nvim_address), {}, lock_directory=tmp_path).token
              for _ in range(3)}
    assert len(tokens) == 3
    assert all(len(t) >= 32 for t in tokens)


async def test_workspace_folders_follow_cd(app, nvim, tmp_path):
    other = tmp_path / "other dir"
    other.mkdir()
    await nvim.exec_lua("vim.fn.chdir(...)", str(other))
    with trio.fail_after(WAIT):
        while json.loads(app.lock_path.read_text())["workspaceFolders"] != [str(other)]:
            await trio.sleep(0.01)


async def test_environment_for_claude_is_set_in_neovim_and_port_removed_on_exit(
        nvim_address, nvim, tmp_path):
    async with running_app(nvim_address, lock_directory=tmp_path / "ide") as app:
        env = await nvim.exec_lua(
            "return {vim.env.CLAUDE_CODE_SSE_PORT, vim.env.ENABLE_IDE_INTEGRATION,"
            " vim.env.FORCE_CODE_TERMINAL, vim.env.no_proxy, vim.env.NO_PROXY}")
        assert env[:3] == [str(app.port), "true", "true"]
        for value in env[3:]:
            assert {"localhost", "127.0.0.1", "::1"} <= set(value.split(","))
    assert await nvim.exec_lua("return vim.env.CLAUDE_CODE_SSE_PORT") is None


async def test_stale_lock_of_a_crashed_server_is_removed(nvim_address, nvim, tmp_path):
    lock_dir = tmp_path / "ide"
    lock_dir.mkdir(mode=0o700)
    nvim_pid = await nvim.exec_lua("return vim.fn.getpid()")
    with trio.socket.socket() as s:  # a port nobody listens on
        await s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    stale = lock_dir / f"{dead_port}.lock"
    stale.write_text(json.dumps({"pid": nvim_pid, "ideName": "Neovim", "transport": "ws",
                                 "workspaceFolders": [], "authToken": "x"}))
    someone_else = lock_dir / "1.lock"
    someone_else.write_text(json.dumps({"pid": 1, "ideName": "Visual Studio Code"}))
    with trio.socket.socket() as taken:  # its port: something else listens there now
        await taken.bind(("127.0.0.1", 0))
        taken.listen()
        reused = lock_dir / f"{taken.getsockname()[1]}.lock"
        reused.write_text(stale.read_text())
        async with running_app(nvim_address, lock_directory=lock_dir):
            assert not stale.exists()
            assert not reused.exists()
            assert someone_else.exists()


async def test_a_challenge_gets_a_proof_of_the_token_never_the_token(app):
    stream = await trio.open_tcp_stream("127.0.0.1", app.port)
    await stream.send_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                          b"Sec-WebSocket-Version: 13\r\n"
                          b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                          b"X-Claude-Nvim-Challenge: abc\r\n\r\n")
    answer = b""
    with trio.fail_after(WAIT):
        while chunk := await stream.receive_some():
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 401 ")
    assert b"x-claude-nvim-proof: " + protocol.proof(app.token, b"abc") in answer
    assert app.token.encode() not in answer
    assert await trio.to_thread.run_sync(lockfile.proves_token, app.port, app.token)
    assert not await trio.to_thread.run_sync(lockfile.proves_token, app.port, "other-token")


async def test_messages_over_64_mib_close_1009_and_others_are_untouched(app):
    async with mcp_client(app.port, app.token) as bystander:
        async with mcp_client(app.port, app.token) as sender:
            chunk = "x" * 2**20
            with pytest.raises(ConnectionClosed) as info:
                await sender.ws.send_message('{"jsonrpc":"2.0","id":1,"method":"ping","p":"'
                                             + chunk * 65 + '"}')
                await sender.ws.get_message()
            assert info.value.reason.code == 1009
        assert (await bystander.request("ping"))["result"] == {}


async def test_a_large_message_within_the_limit_is_answered(app):
    async with mcp_client(app.port, app.token) as client:
        big = "y" * (16 * 2**20)
        reply = await client.request("tools/call", {"name": "getDiagnostics",
                                                    "arguments": {"uri": "/tmp/" + big}})
        result = reply["result"]
        assert not result.get("isError"), result["content"][0]["text"][:300]
        assert json.loads(result["content"][0]["text"])[0]["diagnostics"] == []


async def test_binary_frames_get_an_error_and_the_connection_stays(client):
    await client.ws.send_message(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
    assert (await client.request("ping"))["result"] == {}
    assert [m["error"]["code"] for m in client.stray] == [-32600]


async def test_a_blocking_tool_does_not_hold_up_other_calls_or_clients(nvim_address, tmp_path):
    release = trio.Event()

    async def wait(ctx, args):
        await release.wait()
        return text_result("released")

    tools = {**load_tools().tools,
             "wait": Tool("wait", {"type": "object"}, wait, description="Waits.", exposure=BOTH)}
    answers = []

    async def blocked(client):
        answers.append(await client.call_tool("wait"))

    async with (
        running_app(nvim_address, tools=tools, lock_directory=tmp_path / "ide") as app,
        mcp_client(app.port, app.token) as a,
        mcp_client(app.port, app.token) as b,
    ):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(blocked, a)
            with trio.fail_after(WAIT):
                assert (await a.call_json("getOpenEditors"))["tabs"] == []
                assert (await b.call_json("getOpenEditors"))["tabs"] == []
            assert answers == []
            release.set()
        assert answers == [{"content": [{"type": "text", "text": "released"}]}]


async def test_client_disconnect_cancels_its_calls(nvim_address, tmp_path):
    cancelled = trio.Event()

    async def wait(ctx, args):
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    tools = {"wait": Tool("wait", {"type": "object"}, wait, description="Waits.", exposure=BOTH)}
    async with running_app(nvim_address, tools=tools, lock_directory=tmp_path / "ide") as app:
        async with mcp_client(app.port, app.token) as client:
            await client.send({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                               "params": {"name": "wait"}})
            await trio.sleep(0.05)
        with trio.fail_after(WAIT):
            await cancelled.wait()
        async with mcp_client(app.port, app.token) as again:
            assert (await again.request("ping"))["result"] == {}


async def test_a_cancelled_call_ends_alone_and_the_connection_goes_on(nvim_address, tmp_path):
    release = trio.Event()
    cancelled = []

    async def wait(ctx, args):
        try:
            await release.wait()
        except trio.Cancelled:
            cancelled.append(args["n"])
            raise
        return text_result(args["n"])

    tools = {"wait": Tool("wait", {"type": "object"}, wait, description="Waits.", exposure=BOTH),
             **load_tools().tools}
    async with (
        running_app(nvim_address, tools=tools, lock_directory=tmp_path / "ide") as app,
        mcp_client(app.port, app.token) as client,
    ):
        for n in "abc":
            await client.send({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                               "params": {"name": "wait", "arguments": {"n": n}}})
        await trio.sleep(0.05)
        await client.notify("notifications/cancelled", {"requestId": "b"})
        await trio.sleep(0.05)
        assert cancelled == ["b"]
        release.set()
        # The connection goes on, its calls answered by tasks that are reused.
        with trio.fail_after(WAIT):
            async with trio.open_nursery() as nursery:
                for _ in range(20):
                    nursery.start_soon(client.call_json, "getWorkspaceFolders")
            assert (await client.call_json("getWorkspaceFolders"))["success"] is True
        answered = {m["id"]: m["result"]["content"][0]["text"] for m in client.stray}
        assert answered == {"a": "a", "c": "c"}


async def test_neovim_quitting_stops_the_app_and_removes_the_lock(nvim_address, tmp_path):
    lock_dir = tmp_path / "ide"
    app = App(editor_for(nvim_address),
              load_tools().tools, lock_directory=lock_dir)
    with pytest.raises(BaseExceptionGroup) as info:
        async with trio.open_nursery() as nursery:
            await nursery.start(app.run)
            async with mcp_client(app.port, app.token) as client:
                assert app.lock_path.exists()
                await app.editor.request("nvim_input", ":qall!<CR>")
                with trio.fail_after(WAIT), pytest.raises(ConnectionClosed):
                    await client.ws.get_message()
    assert any(isinstance(e, EditorGone) for e in flatten(info.value))
    assert list(lock_dir.iterdir()) == []


async def refused(nvim_address: str, lock_directory) -> AlreadyServed:
    """Start another server on the Neovim at ``nvim_address``: its refusal."""
    second = App(editor_for(nvim_address), load_tools().tools, lock_directory=lock_directory)
    with pytest.raises(BaseExceptionGroup) as info:
        async with trio.open_nursery() as nursery:
            await nursery.start(second.run)
    refusals = [e for e in flatten(info.value) if isinstance(e, AlreadyServed)]
    assert refusals, info.value
    assert not lock_directory.exists() or list(lock_directory.iterdir()) == []
    return refusals[0]


OWNER_STATE = """
return { send = vim.fn.exists(':ClaudeNvimSend'), accept = vim.fn.exists(':ClaudeNvimDiffAccept'),
         port = vim.env.CLAUDE_CODE_SSE_PORT, server = vim.g.claude_nvim_server }"""


async def assert_serving(app: App, nvim) -> None:
    """``app``'s half in Neovim is all there, as a user (and ``claude``) would find it."""
    state = await nvim.exec_lua(OWNER_STATE)
    assert (state["send"], state["accept"]) == (2, 2)  # the user commands
    assert state["port"] == str(app.port)  # what a `claude` started in a :terminal reads
    assert state["server"]["channel"] == app.editor.channel_id
    assert app.lock_path is not None and app.lock_path.exists()


async def test_a_refused_server_leaves_the_first_one_working(app, client, nvim, nvim_address,
                                                             tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    await nvim.request("nvim_command", f"edit {tmp_path / 'a.txt'}")
    await client.next_notification("selection_changed")
    refusal = await refused(nvim_address, tmp_path / "ide2")
    assert f"port {app.port}" in str(refusal)
    await assert_serving(app, nvim)
    after = len(client.notifications)
    await nvim.request("nvim_input", "j")  # the selection still reaches the first's client
    note = await client.next_notification("selection_changed", after=after)
    assert note["params"]["selection"]["start"] == {"line": 1, "character": 0}
    assert (await client.request("ping"))["result"] == {}
    refusal = await refused(nvim_address, tmp_path / "ide3")  # and it still owns Neovim
    assert f"port {app.port}" in str(refusal)
    await assert_serving(app, nvim)


async def test_a_dead_channels_leftover_lua_leaves_the_owner_alone(app, nvim):
    # What a dead server's Lua still referenced somewhere (a scheduled callback) does: notify
    # on its closed channel, which switches claude-nvim off only for that channel.
    sent = await nvim.exec_lua(
        "local stale = assert(loadstring(...))()\n"
        "stale.chan = 999\n"
        "return stale.notify('claude_nvim_log', 'info', 'x')",
        CoreFeature.lua.source)
    assert sent is False
    await assert_serving(app, nvim)


COUNT_AUTOCMDS = """
local n = 0
for _, a in ipairs(vim.api.nvim_get_autocmds({})) do
  if (a.group_name or ''):match('^claude_nvim') then n = n + 1 end
end
return n"""


async def test_a_server_replaces_one_that_died(nvim_address, nvim, tmp_path):
    async with running_app(nvim_address, lock_directory=tmp_path / "a"):
        first = await nvim.exec_lua(COUNT_AUTOCMDS)
    assert await nvim.exec_lua(COUNT_AUTOCMDS) == 0  # a clean stop takes them all away
    # Simulate a crash: the claim and the autocmds are still there, for a channel now gone.
    await nvim.exec_lua("vim.g.claude_nvim_server = {channel = 999, pid = 1, port = 1}\n"
                        "package.loaded['claude_nvim.core'].setup({chan = 999})")
    assert await nvim.exec_lua(COUNT_AUTOCMDS) > 0
    async with running_app(nvim_address, lock_directory=tmp_path / "b") as app:
        assert first > 0
        assert await nvim.exec_lua(COUNT_AUTOCMDS) == first  # replaced, not duplicated
        async with mcp_client(app.port, app.token) as client:
            assert (await client.call_json("getOpenEditors"))["tabs"] == []


@pytest.mark.lua_errors
async def test_lua_errors_reach_the_server_log_not_messages(app, nvim, caplog):
    await nvim.exec_lua(
        "vim.api.nvim_create_autocmd('User', {pattern = 'Boom', callback ="
        " package.loaded['claude_nvim.core'].guard(function() error('kaboom in lua') end)})")
    await nvim.request("nvim_command", "doautocmd User Boom")
    with trio.fail_after(WAIT):
        while not any("kaboom in lua" in r.getMessage() for r in caplog.records):
            await trio.sleep(0.01)
    messages = await nvim.exec_lua("return vim.api.nvim_exec2('messages', {output=true}).output")
    assert "kaboom" not in messages


@pytest.mark.lua_errors
async def test_a_lua_error_names_the_lua_file_and_line(app, nvim, caplog):
    # The shared modules are real files: an error in one names the file and the line there,
    # in the message and in the traceback.
    await nvim.exec_lua(
        "local core, selection = require('claude_nvim.core'), require('claude_nvim.selection')\n"
        "core.guard(function() selection.slice(nil, 10) end)()\n"
        "local _, trace = xpcall(selection.slice, debug.traceback, nil, 10)\n"
        "core.log('error', trace)")
    with trio.fail_after(WAIT):
        while len(logged := [r.getMessage() for r in caplog.records
                             if "attempt to index" in r.getMessage()]) < 2:
            await trio.sleep(0.01)
    selection_lua = Path(SelectionFeature.lua.chunkname.removeprefix("@"))
    source = selection_lua.read_text().splitlines()
    for message in logged:
        line = int(re.search(r"claude_nvim/_selection/selection\.lua:(\d+): attempt to index",
                             message)[1])
        assert source[line - 1].strip() == "local buf = more.buf"
    assert re.search(r"claude_nvim/_selection/selection\.lua:\d+: in function", logged[1])


async def test_a_tools_lua_error_names_the_tools_lua_file_and_line(app, nvim):
    # A tool's Lua longer than a screen is a real file beside the tool (not a Python string):
    # an error in it names that file and the line there.
    with pytest.raises(EditorError) as raised:
        await nvim.call_lua("claude_nvim.tools.getDiagnostics", "all", None, 10)
    # Lua shortens a long chunk name from the left ("...site-packages/claude_nvim/..."): the
    # file is named by its end, and read here from the installed package.
    found = re.search(r"claude_nvim/tools/get_diagnostics\.lua:(\d+): ", str(raised.value))
    assert found, raised.value
    source = Path(claude_nvim.tools.__file__).parent / "get_diagnostics.lua"
    line = source.read_text().splitlines()[int(found[1]) - 1]
    assert line.strip() == "for i = from, #buffers do"

@pytest.mark.lua_errors
async def test_lua_log_calls_of_any_level_reach_the_server_log(app, nvim, caplog):
    caplog.set_level(logging.DEBUG, logger="claude_nvim")
    levels = {"notice": logging.INFO, "warn": logging.WARNING, "WARNING": logging.WARNING,
              "trace": logging.DEBUG, "fatal": logging.CRITICAL, "whatever": logging.WARNING}
    for level in levels:
        await nvim.exec_lua("package.loaded['claude_nvim.core'].log(...)", level,
                            f"said at {level}")
    await nvim.exec_lua("package.loaded['claude_nvim.core'].log(vim.log.levels.WARN, 'said at 3')")
    levels[3] = logging.WARNING
    await nvim.exec_lua("package.loaded['claude_nvim.core'].log(nil, 'said at nil')")
    levels[None] = logging.ERROR
    seen = {}
    with trio.fail_after(WAIT):
        while len(seen) < len(levels):
            await trio.sleep(0.01)
            seen = {r.getMessage().split("said at ")[1].split()[0]: r.levelno
                    for r in caplog.records if "said at " in r.getMessage()}
    assert seen == {str(level).replace("None", "nil"): number
                    for level, number in levels.items()}


async def test_each_endpoint_lists_and_calls_only_its_own_tools(nvim_address, tmp_path):
    async def answer(ctx, args):
        return text_result(ctx.tool.name)

    tools = load_tools().tools
    tools["plugged"] = Tool("plugged", {"type": "object"}, answer, description="A plugin tool.")
    async with (
        running_app(nvim_address, tools=tools, lock_directory=tmp_path / "ide") as app,
        mcp_client(app.port, app.token) as ide,
        mcp_client(app.port, app.token, path="/mcp") as model,
    ):
        ide_names = {t["name"] for t in (await ide.result("tools/list"))["tools"]}
        model_names = {t["name"] for t in (await model.result("tools/list"))["tools"]}
        assert {"openDiff", "closeAllDiffTabs", "openFile", "getDiagnostics"} <= ide_names
        assert "plugged" not in ide_names
        assert {"plugged", "getDiagnostics", "getCurrentSelection", "getOpenEditors",
                "getWorkspaceFolders", "getLatestSelection"} <= model_names
        assert not model_names & {"openDiff", "closeAllDiffTabs", "openFile", "saveDocument",
                                  "checkDocumentDirty", "close_tab"}
        assert (await model.call_tool("plugged"))["content"][0]["text"] == "plugged"
        assert (await ide.request("tools/call", {"name": "plugged"}))["error"]["code"] == -32601
        assert (await model.request("tools/call", {"name": "openDiff"}))["error"]["code"] \
            == -32601


async def test_the_model_endpoint_needs_the_token_too(app):
    assert await rejected_status_at(app.port, "/mcp", []) == 401


async def rejected_status_at(port: int, path: str, headers) -> int:
    with pytest.raises(ConnectionRejected) as info:
        async with open_websocket("127.0.0.1", port, path, use_ssl=False, extra_headers=headers):
            pass
    return info.value.status_code


async def test_invalid_utf8_closes_1007_and_others_are_untouched(app):
    async with mcp_client(app.port, app.token) as bystander:
        stream = await raw_upgrade(app.port, app.token)
        await stream.send_all(masked_frame(0x1, b'{"x":"\xff\xfe"}'))
        with trio.fail_after(WAIT):
            frame = await stream.receive_some(4096)
        assert frame[0] == 0x88  # a close frame ...
        assert int.from_bytes(frame[2:4], "big") == 1007  # ... saying why
        assert (await bystander.request("ping"))["result"] == {}


async def test_the_limit_counts_bytes_not_characters(app):
    async with mcp_client(app.port, app.token) as bystander, \
            mcp_client(app.port, app.token) as sender:
        # 17 Mi characters of 4 bytes: 68 MiB on the wire, over the 64 MiB limit.
        with pytest.raises(ConnectionClosed) as info:
            await sender.ws.send_message('"' + "😀" * (17 * 2**20) + '"')
            await sender.ws.get_message()
        assert info.value.reason.code == 1009
        assert (await bystander.request("ping"))["result"] == {}


async def test_a_client_that_never_finishes_the_handshake_is_dropped(nvim_address, tmp_path):
    app = App(editor_for(nvim_address), {}, lock_directory=tmp_path / "ide", handshake_timeout=0.3)
    async with trio.open_nursery() as nursery:
        await nursery.start(app.run)
        stream = await trio.open_tcp_stream("127.0.0.1", app.port)
        await stream.send_all(b"GET / HTTP/1.1\r\n")  # ... and nothing more
        with trio.fail_after(WAIT):
            assert await stream.receive_some(4096) == b""  # closed by the server
        nursery.cancel_scope.cancel()


async def test_a_connection_has_a_bounded_number_of_calls_in_the_works(nvim_address, tmp_path):
    """A client that pipelines thousands of calls gets backpressure: the server reads no more
    while MAX_IN_FLIGHT are being answered, and answers every one in the end."""
    from claude_nvim._wire.workers import MAX_IN_FLIGHT
    release = trio.Event()
    started = []

    async def wait(ctx, args):
        started.append(args)
        await release.wait()
        return text_result("done")

    tools = {**load_tools().tools,
             "wait": Tool("wait", {"type": "object"}, wait, description="Waits.", exposure=BOTH)}
    calls = 3000
    async with (
        running_app(nvim_address, tools=tools, lock_directory=tmp_path / "ide") as app,
        mcp_client(app.port, app.token) as bystander,
    ):
        stream = await raw_upgrade(app.port, app.token)
        async with trio.open_nursery() as nursery:
            # More than the socket buffers hold: sending waits until the server reads on.
            nursery.start_soon(stream.send_all, b"".join(masked_frame(0x1, json.dumps(
                {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "wait"}})
                .encode()) for n in range(calls)))
            with trio.fail_after(WAIT):
                while len(started) < MAX_IN_FLIGHT:
                    await trio.sleep(0.01)
            await trio.sleep(0.3)  # more would have started by now
            assert len(started) == MAX_IN_FLIGHT
            assert (await bystander.request("ping"))["result"] == {}  # the others are served
            release.set()
            received = b""
            with trio.fail_after(WAIT):
                while received.count(b'"text":"done"') < calls:
                    received += await stream.receive_some(1 << 16)
        assert len(started) == calls


async def test_a_client_gone_while_its_reading_waits_has_its_calls_cancelled(
        nvim_address, tmp_path):
    from claude_nvim._wire.workers import MAX_IN_FLIGHT
    started, cancelled = [], []

    async def wait(ctx, args):
        started.append(args)
        try:
            await trio.sleep_forever()
        finally:
            cancelled.append(args)

    tools = {"wait": Tool("wait", {"type": "object"}, wait, description="Waits.", exposure=BOTH)}
    async with running_app(nvim_address, tools=tools, lock_directory=tmp_path / "ide") as app:
        stream = await raw_upgrade(app.port, app.token)
        await stream.send_all(b"".join(masked_frame(0x1, json.dumps(
            {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "wait"}})
            .encode()) for n in range(MAX_IN_FLIGHT)))  # the server reads no more for now
        with trio.fail_after(WAIT):
            while len(started) < MAX_IN_FLIGHT:
                await trio.sleep(0.01)
        await stream.aclose()
        with trio.fail_after(WAIT):
            while len(cancelled) < MAX_IN_FLIGHT:
                await trio.sleep(0.05)


async def test_a_stopping_server_leaves_a_neovim_plugins_modules_alone(nvim_address, nvim,
                                                                       tmp_path):
    # The plugin owns `claude_nvim` and may add `claude_nvim.*` modules of its own; the
    # server's modules are claude_nvim.core and the ones it installed, and it stops only those.
    await nvim.exec_lua("""
        _G.plugin_stops = 0
        package.loaded['claude_nvim'] = {
          stop = function() _G.plugin_stops = _G.plugin_stops + 1 end}
        package.loaded['claude_nvim.terminal'] = package.loaded['claude_nvim']""")
    async with running_app(nvim_address, lock_directory=tmp_path):
        assert await nvim.exec_lua("return package.loaded['claude_nvim.core'] ~= nil")
    assert await nvim.exec_lua("return _G.plugin_stops") == 0
    assert await nvim.exec_lua("return package.loaded['claude_nvim'] ~= nil")
    assert await nvim.exec_lua(COUNT_AUTOCMDS) == 0  # its own were all stopped


async def test_a_ready_server_announces_itself_with_what_a_claude_needs(nvim_address, nvim,
                                                                        tmp_path):
    # Whoever starts a claude (the Neovim plugin) waits for this, not for a poll: by then the
    # lock file is there for claude to find.
    await nvim.exec_lua("""
        local dir = ...
        vim.api.nvim_create_autocmd('User', { pattern = 'ClaudeNvimServerReady', once = true,
          callback = function(ev)
            local lock = dir .. '/' .. ev.data.port .. '.lock'
            _G.announced = { data = ev.data, lock = vim.uv.fs_stat(lock) ~= nil }
          end })""", str(tmp_path / "ide"))
    async with running_app(nvim_address, lock_directory=tmp_path / "ide") as app:
        announced = await nvim.exec_lua("return _G.announced")
        assert announced["lock"]
        assert announced["data"]["port"] == app.port
        assert announced["data"]["claude"] == {"env": app.environment, "args": app.claude_args}
        assert announced["data"]["claude"]["env"]["CLAUDE_CODE_SSE_PORT"] == str(app.port)
        live = "return package.loaded['claude_nvim.core'].live_server()"
        assert (await nvim.exec_lua(live))["claude"]["args"] == app.claude_args
    assert await nvim.exec_lua(live) is None
