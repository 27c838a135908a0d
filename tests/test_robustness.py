"""Bad input, hostile names and faults: answered clearly, never a crash, a hang or lost work."""

from __future__ import annotations

import json
import socket
from functools import partial
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claude_nvim._app import App
from claude_nvim._big_reads import BigReads
from claude_nvim._errors import EditorGone
from claude_nvim._nvim import editor_for
from claude_nvim._plugins import load_tools
from claude_nvim._tool import ConnectionInfo
from claude_nvim.testing import mcp_client
from helpers import TOOLS, WAIT, Gate, masked_frame, raw_upgrade, session

CORPUS = sorted((Path(__file__).parent / "corpus").glob("*.json"))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]) | json_values,
        "id": json_values,
        "method": st.sampled_from(["initialize", "tools/list", "tools/call", "ping",
                                   "prompts/list", "notifications/cancelled", "x"]) | json_values,
        "params": json_values | st.fixed_dictionaries(
            {}, optional={"name": st.sampled_from(list(TOOLS)) | json_values,
                          "arguments": json_values}),
    },
)


def valid_response(reply, sent):
    assert reply["jsonrpc"] == "2.0"
    assert ("result" in reply) != ("error" in reply)
    if "error" in reply:
        assert isinstance(reply["error"]["code"], int)
        assert isinstance(reply["error"]["message"], str)
    if isinstance(sent, dict) and "id" in sent and reply["id"] is not None:
        assert reply["id"] == sent["id"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=messages | json_values)
def test_any_json_gets_a_valid_answer_or_none(message):
    async def main():
        s = session()
        with trio.fail_after(WAIT):
            # "slow" never answers by design: skip calling it.
            if isinstance(message, dict) and isinstance(message.get("params"), dict) \
                    and message["params"].get("name") == "slow":
                return
            reply = await s.handle(json.dumps(message))
        if reply is not None:
            valid_response(reply, message)
            json.dumps(reply)
        is_request = isinstance(message, dict) and "id" in message and "method" in message
        if is_request and message.get("jsonrpc") == "2.0" and isinstance(message["method"], str) \
                and not message["method"].startswith("notifications/"):
            assert reply is not None
    trio.run(main)


@settings(max_examples=200, deadline=None)
@given(raw=st.text() | st.binary())
def test_any_text_or_bytes_gets_an_answer(raw):
    async def main():
        reply = await session().handle(raw)
        assert reply is None or "error" in reply or "result" in reply
    trio.run(main)


@pytest.mark.parametrize("case", CORPUS, ids=lambda p: p.stem)
async def test_regression_corpus_over_the_wire(client, case):
    await client.send(case.read_text())
    with trio.fail_after(WAIT):
        assert (await client.request("ping"))["result"] == {}  # the connection is still up


HOSTILE_NAMES = ["with space.txt", "qu'ote\".txt", "pi|pe.txt", "per%20cent%.txt", "ha#sh.txt",
                 "back`tick`.txt", "$HOME.txt", "new\nline.txt", "dash -c.txt", "ü ñ.txt"]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
async def test_hostile_file_names_are_data(client, nvim, tmp_path, name):
    path = tmp_path / name
    path.write_text("one\n")
    opened = await client.call_tool("openFile", {"filePath": str(path)})
    assert not opened.get("isError"), opened
    assert await nvim.exec_lua("return vim.api.nvim_buf_get_name(0)") == str(path)
    await nvim.exec_lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, {'two'})")
    saved = await client.call_json("saveDocument", {"filePath": str(path)})
    assert saved["success"] is True
    assert path.read_text() == "two\n"
    diagnostics = await client.call_json("getDiagnostics", {"uri": "file://" + str(path)})
    assert diagnostics == [{"uri": "file://" + str(path), "diagnostics": []}]
    async with trio.open_nursery() as nursery:
        result = {}

        async def diff():
            result.update(await client.call_tool("openDiff", {
                "old_file_path": str(path), "new_file_path": str(path),
                "new_file_contents": "three\n", "tab_name": name}))
        nursery.start_soon(diff)
        with trio.fail_after(WAIT):
            while await nvim.exec_lua("return #vim.api.nvim_list_tabpages()") < 2:
                await trio.sleep(0.01)
        await nvim.request("nvim_command", "ClaudeNvimDiffAccept")
    assert [c["text"] for c in result["content"]] == ["FILE_SAVED", "three\n"]
    assert path.read_text() == "two\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == [name]  # nothing else


async def test_non_utf8_file_names_and_text(client, nvim, tmp_path):
    raw = bytes(tmp_path) + b"/caf\xe9.txt"
    Path(raw.decode("utf-8", "surrogateescape")).write_bytes(b"na\xefve\n")
    await nvim.exec_lua("vim.cmd.edit(vim.fn.fnameescape(...))",
                        raw.decode("utf-8", "surrogateescape"))
    editors = await client.call_tool("getOpenEditors")
    assert not editors.get("isError")
    await nvim.request("nvim_input", "V")
    selection = await client.call_tool("getCurrentSelection")
    assert not selection.get("isError"), selection


async def test_arguments_neovim_cannot_take_are_clear_errors(client, nvim, tmp_path):
    # Before: "Internal error: UnicodeEncodeError" and "Internal error: OverflowError".
    lone = await client.tool_error("openFile", {"filePath": "/tmp/\ud800.py"})
    assert lone == ("Invalid arguments for openFile: 'filePath' is not text: it holds a lone "
                    "surrogate (U+D800)")
    huge = await client.tool_error("openFile", {"filePath": str(tmp_path), "startLine": 2**70})
    assert huge == "Invalid arguments for openFile: 'startLine' is out of range (at most 64-bit " \
        "integers)"
    # The file name the server gives for a non-UTF-8 name comes back and names that file.
    raw = bytes(tmp_path) + b"/caf\xe9.txt"
    Path(raw.decode("utf-8", "surrogateescape")).write_bytes(b"x\n")
    await nvim.exec_lua("vim.cmd.edit(vim.fn.fnameescape(...))",
                        raw.decode("utf-8", "surrogateescape"))
    editors = await client.call_json("getOpenEditors")
    path = editors["tabs"][0]["fileName"]
    assert path.endswith("caf\udce9.txt")
    dirty = await client.call_json("checkDocumentDirty", {"filePath": path})
    assert dirty["success"] is True and dirty["isDirty"] is False


async def test_a_busy_neovim_times_out_clearly_and_recovers(nvim_address, nvim, tmp_path):
    app = App(editor_for(nvim_address, timeout=0.5), load_tools().tools,
              lock_directory=tmp_path / "ide")
    async with trio.open_nursery() as nursery:
        await nursery.start(app.run)
        async with mcp_client(app.port, app.token) as client:
            # A busy main loop (a long Lua loop, as a user's plugin might run) answers nothing.
            gate = Gate(tmp_path / "gate")
            nursery.start_soon(partial(nvim.exec_lua, gate.HOLD, gate.path, timeout=None))
            await gate.held()
            result = await client.call_tool("getOpenEditors")
            assert result["isError"] is True
            assert "did not answer within 0.5 s" in result["content"][0]["text"]
            assert (await client.request("ping"))["result"] == {}
            await gate.release()
            with trio.fail_after(WAIT):
                while (await client.call_tool("getOpenEditors")).get("isError"):
                    await trio.sleep(0.2)
        nursery.cancel_scope.cancel()


async def test_neovim_killed_with_work_in_flight(tmp_path):
    from claude_nvim._nvim.headless import headless_nvim
    lock_dir = tmp_path / "ide"
    target = tmp_path / "a.txt"
    target.write_text("a\n")
    with headless_nvim(cwd=tmp_path) as (address, process):
        app = App(editor_for(address), load_tools().tools, lock_directory=lock_dir)
        answers = []
        with pytest.raises(BaseExceptionGroup) as info:
            async with trio.open_nursery() as nursery:
                await nursery.start(app.run)
                async with mcp_client(app.port, app.token) as client:
                    async def pending_diff():
                        answers.append(await client.request("tools/call", {
                            "name": "openDiff", "arguments": {
                                "old_file_path": str(target), "new_file_path": str(target),
                                "new_file_contents": "b\n", "tab_name": "t"}}))
                    nursery.start_soon(pending_diff)
                    await trio.sleep(0.3)
                    process.kill()
                    with trio.fail_after(WAIT):
                        while app.lock_path.exists():
                            await trio.sleep(0.01)
        assert any(isinstance(e, EditorGone) for e in _leaves(info.value))
    assert list(lock_dir.iterdir()) == []


def _leaves(error):
    if isinstance(error, BaseExceptionGroup):
        return [leaf for sub in error.exceptions for leaf in _leaves(sub)]
    return [error]


def _task_count() -> int:
    def count(task):
        return 1 + sum(count(child) for nursery in task.child_nurseries
                       for child in nursery.child_tasks)
    return count(trio.lowlevel.current_root_task())


async def test_thousands_of_connections_opened_and_dropped_leak_nothing(nvim_address, tmp_path):
    async with trio.open_nursery() as nursery:
        app = App(editor_for(nvim_address), load_tools().tools, lock_directory=tmp_path / "ide",
                  handshake_timeout=1.0)
        await nursery.start(app.run)
        await _churn(app)
        nursery.cancel_scope.cancel()


async def _churn(app: App) -> None:
    async with mcp_client(app.port, app.token) as warm:
        await warm.request("ping")
    await trio.sleep(0.1)
    baseline = _task_count()

    async def churn(i: int) -> None:
        if i % 3 == 0:  # a full upgrade, then gone without a close frame
            stream = await raw_upgrade(app.port, app.token)
        else:  # half a request line, then gone
            stream = await trio.open_tcp_stream("127.0.0.1", app.port)
            await stream.send_all(b"GET / HT")
        await stream.aclose()

    for start in range(0, 1500, 100):
        async with trio.open_nursery() as nursery:
            for i in range(start, start + 100):
                nursery.start_soon(churn, i)
    with trio.fail_after(app.handshake_timeout + WAIT):  # half-open ones wait out the timeout
        while _task_count() > baseline:
            await trio.sleep(0.05)
    async with mcp_client(app.port, app.token) as client:
        assert (await client.request("ping"))["result"] == {}


async def test_clients_resetting_mid_handshake_do_not_take_the_server_down(app):
    import socket
    import struct
    for token in (None, app.token):
        for _ in range(20):
            sock = trio.socket.socket()
            await sock.connect(("127.0.0.1", app.port))
            auth = f"x-claude-code-ide-authorization: {token}\r\n" if token else ""
            await sock.send(
                f"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                f"{auth}\r\n".encode())
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()  # RST
    await trio.sleep(0.2)
    async with mcp_client(app.port, app.token) as client:
        assert (await client.request("ping"))["result"] == {}


async def test_a_client_that_stops_reading_is_dropped_and_blocks_nobody(
        nvim_address, nvim, tmp_path, caplog):
    # 24 MB of selection: more than the socket buffers hold, so a reply to a client that
    # does not read cannot be sent whole.
    big = tmp_path / "big.txt"
    big.write_text("".join(f"{i:079d}\n" for i in range(300000)))
    await nvim.request("nvim_command", f"edit {big}")
    await nvim.request("nvim_input", "ggVG")
    app = App(editor_for(nvim_address), load_tools().tools, lock_directory=tmp_path / "ide",
              send_timeout=2)  # a reader slowed by a busy machine still takes 256 KiB in 2 s
    async with trio.open_nursery() as nursery:
        await nursery.start(app.run)
        stuck = await raw_upgrade(app.port, app.token)  # sends, and never reads
        for n in range(3):
            await stuck.send_all(masked_frame(0x1, json.dumps(
                {"jsonrpc": "2.0", "id": n, "method": "tools/call",
                 "params": {"name": "getCurrentSelection", "arguments": {}}}).encode()))
        await trio.sleep(0.2)
        async with mcp_client(app.port, app.token) as client:
            with trio.fail_after(WAIT):
                answer = await client.call_json("getCurrentSelection")
            assert len(answer["text"]) == 300000 * 80 - 1
        # Its answers fill the socket's buffers (tens of MB on loopback), and it is dropped.
        with trio.fail_after(WAIT):
            while not any("took nothing" in r.getMessage() for r in caplog.records):
                await trio.sleep(0.05)
        # Reading now drains what the socket held, then ends.
        with trio.fail_after(WAIT):
            while await stuck.receive_some(1 << 20):
                pass
        nursery.cancel_scope.cancel()


async def test_a_client_reading_a_trickle_delays_no_other_big_answer(app, nvim, tmp_path):
    # A token holder asks twice for a 24 MB selection and reads 20 KB/s: enough never to be
    # dropped as stalled, 20 minutes for one answer. Before, its second answer held the one
    # big-answer slot until its first was nearly read, and every other client's big read
    # waited as long (28-90 s at 256 KB/s).
    big = tmp_path / "big.txt"
    big.write_text("".join(f"{i:079d}\n" for i in range(300000)))
    await nvim.request("nvim_command", f"edit {big}")
    await nvim.request("nvim_input", "ggVG")
    slow = await raw_upgrade(app.port, app.token)
    slow.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    for n in range(2):
        await slow.send_all(masked_frame(0x1, json.dumps(
            {"jsonrpc": "2.0", "id": n, "method": "tools/call",
             "params": {"name": "getCurrentSelection", "arguments": {}}}).encode()))

    async def trickle():
        while await slow.receive_some(4096):
            await trio.sleep(0.2)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trickle)
        await trio.sleep(2)  # its first answer is queued; its second read would be next
        async with mcp_client(app.port, app.token) as client:
            for _ in range(2):
                with trio.fail_after(WAIT):
                    answer = await client.call_json("getCurrentSelection")
                assert len(answer["text"]) == 300000 * 80 - 1
        nursery.cancel_scope.cancel()
    await slow.aclose()


async def test_each_app_has_its_own_big_read_slot_that_its_tools_share(tmp_path):
    # Two servers in one process (a test suite, say) do not wait on each other's big reads.
    tool = TOOLS["echo"]
    apps = [App(editor_for(str(tmp_path / "nvim.sock")), {"echo": tool}) for _ in range(2)]
    first, same_app, other_app = (app._context(tool, ConnectionInfo(n))
                                  for n, app in enumerate([apps[0], apps[0], apps[1]]))
    async with first.big_read():
        with trio.move_on_after(0.1) as waiting:
            async with same_app.big_read():
                pass
        assert waiting.cancelled_caught
        with trio.fail_after(WAIT):
            async with other_app.big_read():
                pass


async def test_a_big_read_waits_for_room_to_send_before_it_takes_the_slot():
    class Outlet:
        def __init__(self) -> None:
            self.free = trio.Event()

        def has_room(self) -> bool:
            return self.free.is_set()

        async def room(self) -> None:
            await self.free.wait()

    slot, full, order = BigReads(), Outlet(), []

    async def answer(name: str, outlet: Outlet | None) -> None:
        with slot.answering(outlet) as answering:
            async with slot.read():
                order.append(name)
            assert answering.holds_slot

    with trio.fail_after(WAIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer, "to a full connection", full)
            await trio.sleep(0.05)
            await answer("to another", None)  # not kept waiting by the full one
            assert order == ["to another"]
            full.free.set()
    assert order == ["to another", "to a full connection"]


async def test_a_big_read_slot_is_kept_until_the_answer_is_sent():
    order: list[str] = []
    slot = BigReads()

    async def answer(name: str) -> None:
        with slot.answering():
            async with slot.read():
                order.append(f"{name} read")
            async with slot.read():  # again, in the same answer: no deadlock
                order.append(f"{name} read again")
            await trio.sleep(0.05)  # sending
            order.append(f"{name} sent")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer, "first")
        await trio.sleep(0.01)
        nursery.start_soon(answer, "second")
    assert order == ["first read", "first read again", "first sent",
                     "second read", "second read again", "second sent"]
    async with slot.read():  # outside an answer: released at the end of the block
        pass
    with trio.fail_after(WAIT):
        async with slot.read():
            pass
