"""The editor clients against a real headless Neovim: both must keep the same contract."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import AsyncIterator
from functools import partial

import pytest
import trio

from claude_nvim._errors import EditorError, EditorGone, EditorTimeout
from claude_nvim._nvim.headless import _accepts
from claude_nvim._nvim.pipe import PynvimEditor
from claude_nvim._nvim.scheduler import EditorBase
from claude_nvim._nvim.socket import SocketEditor
from helpers import WAIT, Gate

CLIENTS = {"socket": SocketEditor, "pynvim": PynvimEditor}


@pytest.fixture(params=sorted(CLIENTS))
def client_class(request):
    return CLIENTS[request.param]


@contextlib.asynccontextmanager
async def attached(client_class, address: str, **options) -> AsyncIterator:
    editor = client_class(address, **options)
    async with trio.open_nursery() as nursery:
        await nursery.start(editor.run)
        yield editor
        nursery.cancel_scope.cancel()


async def test_requests_and_lua_calls_return_plain_data(client_class, nvim_address):
    async with attached(client_class, nvim_address) as editor:
        assert editor.channel_id > 0
        assert await editor.request("nvim_eval", "1 + 2") == 3
        buffer = await editor.request("nvim_get_current_buf")
        assert buffer == 1 and isinstance(buffer, int)  # a handle, as a plain integer
        assert await editor.exec_lua("return {...}", 1, [2, None], {"k": True}) == [
            1, [2, None], {"k": True}]


async def test_errors_name_what_went_wrong(client_class, nvim_address):
    async with attached(client_class, nvim_address) as editor:
        with pytest.raises(EditorError) as info:
            await editor.exec_lua("error('no such thing')")
        assert "no such thing" in str(info.value)
        assert "stack traceback" not in str(info.value)
        with pytest.raises(EditorError, match=r"claude_nvim\.missing is not installed"):
            await editor.call_lua("claude_nvim.missing", "fn")
        with pytest.raises(EditorError, match="Invalid buffer id"):
            await editor.request("nvim_buf_get_lines", 999, 0, -1, True)
        assert await editor.request("nvim_eval", "1") == 1  # still fine afterwards


async def test_bytes_that_are_not_utf8_survive_both_ways(client_class, nvim_address):
    async with attached(client_class, nvim_address) as editor:
        name = "caf\udce9 | `x` %.txt"  # Latin-1 "é" as Python carries an undecodable byte
        assert await editor.exec_lua("return ...", name) == name
        assert await editor.exec_lua("return #...", name) == len(name.encode(
            "utf-8", "surrogateescape"))
        assert await editor.exec_lua("return '\\xff\\xfe'") == "\udcff\udcfe"


async def test_notifications_reach_their_handler_in_order(client_class, nvim_address):
    async with attached(client_class, nvim_address) as editor:
        seen: list[list] = []
        editor.on_notification("probe", seen.append)
        await editor.exec_lua(
            "for i = 1, 3 do vim.rpcnotify(..., 'probe', i, 'x') end", editor.channel_id)
        with trio.fail_after(WAIT):
            while len(seen) < 3:
                await trio.sleep(0.01)
        assert seen == [[1, "x"], [2, "x"], [3, "x"]]


async def test_call_lua_soon_runs_before_later_requests(client_class, nvim_address):
    async with attached(client_class, nvim_address) as editor:
        await editor.exec_lua("package.loaded['probe'] = {set = function(v) vim.g.probe = v end}")
        editor.call_lua_soon("probe", "set", "sent without waiting")
        assert await editor.request("nvim_get_var", "probe") == "sent without waiting"


async def test_concurrent_requests_each_get_their_own_answer(client_class, nvim_address):
    async with attached(client_class, nvim_address) as editor:
        answers: dict[int, object] = {}

        async def ask(n: int) -> None:
            answers[n] = await editor.exec_lua("return ... * 2", n)

        async with trio.open_nursery() as nursery:
            for n in range(300):
                nursery.start_soon(ask, n)
        assert answers == {n: n * 2 for n in range(300)}


async def test_a_big_answer_arrives_whole(client_class, nvim_address):
    async with attached(client_class, nvim_address) as editor:
        text = await editor.exec_lua("return string.rep('abcdefgh', 3 * 1024 * 1024)")
        assert len(text) == 24 * 2**20 and text[:8] == "abcdefgh"


async def test_a_slow_neovim_times_out_and_the_client_recovers(client_class, nvim_address):
    async with attached(client_class, nvim_address, timeout=0.2) as editor:
        with pytest.raises(EditorTimeout, match=r"did not answer within 0\.2 s"):
            await editor.exec_lua("vim.uv.sleep(400)")
        await trio.sleep(0.4)  # the late answer arrives meanwhile, and is dropped
        assert await editor.request("nvim_eval", "7") == 7
        assert await editor.exec_lua("vim.uv.sleep(300) return 1", timeout=None) == 1


async def test_a_request_from_neovim_is_refused_not_left_hanging(client_class, nvim_address):
    async with attached(client_class, nvim_address) as editor:
        ok, message = await editor.exec_lua(
            "return {pcall(vim.rpcrequest, ..., 'anything')}", editor.channel_id)
        assert ok is False and "takes no RPC requests" in message


async def test_neovim_quitting_fails_waiting_calls_and_ends_run(client_class, nvim_address):
    outcome: dict[str, type[BaseException]] = {}
    with pytest.raises(BaseExceptionGroup) as info:
        async with attached(client_class, nvim_address, max_in_flight=2) as editor:

            async def ask(name: str, code: str) -> None:
                try:
                    await editor.exec_lua(code, timeout=None)
                except (EditorGone, EditorError) as exc:
                    outcome[name] = type(exc)

            async with trio.open_nursery() as nursery:
                # Whether Neovim answers the call that quits it is its own business; the call
                # behind it in Neovim's queue, and the one in ours, are never answered.
                nursery.start_soon(ask, "quits", "vim.uv.sleep(200) vim.cmd('qall!')")
                await trio.sleep(0.05)
                nursery.start_soon(ask, "in Neovim's queue", "return 1")
                await trio.sleep(0.05)
                nursery.start_soon(ask, "in ours", "return 2")
            await trio.sleep_forever()
    outcome.pop("quits", None)
    assert outcome == {"in Neovim's queue": EditorGone, "in ours": EditorGone}
    assert info.group_contains(EditorGone, depth=None)


async def test_an_unreachable_address_says_so(client_class, tmp_path):
    with pytest.raises(BaseException) as info:
        async with attached(client_class, str(tmp_path / "no-such-socket")):
            pass
    gone = info.value
    while isinstance(gone, BaseExceptionGroup):
        gone = gone.exceptions[0]
    assert isinstance(gone, EditorGone) and "cannot reach Neovim" in str(gone)


def test_a_socket_counts_as_ready_only_once_it_listens(tmp_path):
    # Neovim's socket file exists from bind() on, but connecting fails until listen().
    path = str(tmp_path / "nvim.sock")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        assert os.path.exists(path) and not _accepts(path)
        server.listen()
        assert _accepts(path)


async def test_at_most_max_in_flight_requests_are_sent_to_neovim(client_class, nvim_address,
                                                                 tmp_path):
    gate = Gate(tmp_path / "gate")
    async with attached(client_class, nvim_address, max_in_flight=2) as editor:
        await editor.exec_lua("vim.g.marker = vim.NIL")
        seen: dict[int, object] = {}

        async def ask(n: int) -> None:
            hold = gate.HOLD if n == 0 else ""  # the first holds Neovim until released
            seen[n] = await editor.exec_lua(f"{hold} return vim.g.marker", gate.path)

        editor._costs["nvim_exec_lua"] = 0.0  # their cost holds none back: max_in_flight does
        async with trio.open_nursery() as nursery:
            for n in range(3):
                nursery.start_soon(ask, n)
                await trio.sleep(0.01)
            await gate.held()
            # A notification is sent at once: it reaches Neovim before the third request,
            # which waits for one of the first two to be answered (none can be yet).
            editor._send_notification("nvim_set_var", ["marker", "set"])
            await gate.release()
        assert seen == {0: None, 1: None, 2: "set"}


async def test_a_cancelled_queued_request_never_reaches_neovim(client_class, nvim_address,
                                                               tmp_path):
    gate = Gate(tmp_path / "gate")
    async with attached(client_class, nvim_address, max_in_flight=1) as editor:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(editor.exec_lua, gate.HOLD, gate.path)
            await gate.held()
            with trio.move_on_after(0.05):  # queued behind the held one, which cannot end
                await editor.exec_lua("vim.g.queued_ran = true")
            await gate.release()
        assert await editor.exec_lua("return vim.g.queued_ran") is None


async def test_the_wait_for_a_slot_has_its_own_limit(client_class, nvim_address, tmp_path):
    gate = Gate(tmp_path / "gate")
    async with attached(client_class, nvim_address, max_in_flight=1,
                        queue_timeout=0.1) as editor:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(editor.exec_lua, gate.HOLD, gate.path, timeout=None))
            await gate.held()
            with pytest.raises(EditorTimeout, match=r"did not move for 0\.1 s"):
                await editor.exec_lua("return 1")
            await gate.release()
        assert await editor.exec_lua("return 2") == 2


async def test_finished_calls_leave_nothing_behind(client_class, nvim_address):
    # Each queued call has two deadlines (its wait for a slot, then its answer): both must go
    # when it ends, or a busy server keeps every finished call (and its task) alive.
    async with attached(client_class, nvim_address, max_in_flight=1) as editor:
        async with trio.open_nursery() as nursery:
            for n in range(50):
                nursery.start_soon(editor.exec_lua, "return ...", n)
        assert sum(map(len, editor._deadlines.values())) <= 1


async def test_slow_requests_are_queued_in_neovim_fewer_at_a_time(client_class, nvim_address):
    # Neovim runs queued requests back to back before the user's next key: what we queue
    # there at once is held to about FREEZE_BUDGET (25 ms) of work, by each kind's cost.
    async with attached(client_class, nvim_address) as editor:
        await editor.exec_lua("package.loaded.t = {slow = function() vim.uv.sleep(10) end, "
                              "cheap = function() end}")
        queued: dict[str, list[int]] = {"slow": [], "cheap": []}

        async def call(fn: str) -> None:
            await editor.call_lua("t", fn)
            queued[fn].append(len(editor._in_flight))

        for fn, count in (("slow", 12), ("cheap", 64)):
            async with trio.open_nursery() as nursery:
                for _ in range(count):
                    nursery.start_soon(call, fn)
        # The first goes alone, as its cost is not known yet; then two at a time.
        assert max(queued["slow"]) <= 2
        assert max(queued["cheap"]) > 4


def test_a_client_missing_a_method_of_its_own_cannot_be_made():
    # What a client provides is abstract in EditorBase: a forgotten one fails at once (and in
    # mypy), not with NotImplementedError at the first request.
    class NoSending(EditorBase):
        async def run(self, *, task_status=trio.TASK_STATUS_IGNORED):
            task_status.started()

        def _attached(self):
            return True

        def _prepare(self, method, args):
            return method, args

        def _send_notification(self, method, args):
            pass

    with pytest.raises(TypeError, match="_send_call"):
        NoSending("nowhere")
