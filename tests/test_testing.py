"""claude_nvim.testing, the plugin authors' kit: its McpClient against a small real WebSocket
server over loopback (a server that misbehaves fails the waiting request with the cause, one
that never answers times out), and its no_lua_errors check in a test suite of its own."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import pytest
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, WebSocketRequest, serve_websocket

from claude_nvim.testing import McpConnectionError, McpTimeoutError, mcp_client
from helpers import WAIT

Handler = Callable[[WebSocketConnection], Awaitable[None]]


async def serving(nursery: trio.Nursery, handler: Handler) -> int:
    """Serve ``handler`` on a free loopback port; the port."""
    async def accept(request: WebSocketRequest) -> None:
        ws = await request.accept(subprotocol="mcp")
        await handler(ws)
    server = await nursery.start(serve_websocket, accept, "127.0.0.1", 0, None)
    return server.port


async def test_a_non_json_answer_fails_the_waiting_request_and_later_ones():
    async def garbage(ws: WebSocketConnection) -> None:
        await ws.get_message()
        await ws.send_message("this is not JSON")
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        port = await serving(nursery, garbage)
        async with mcp_client(port, initialize=False) as client:
            with trio.fail_after(WAIT), pytest.raises(McpConnectionError) as info:
                await client.request("ping")
            assert isinstance(info.value.__cause__, json.JSONDecodeError)
            assert "JSONDecodeError" in str(info.value)
            with trio.fail_after(WAIT), pytest.raises(McpConnectionError):
                await client.result("tools/list")
            with trio.fail_after(WAIT), pytest.raises(McpConnectionError):
                await client.next_notification("notifications/message")
        nursery.cancel_scope.cancel()


async def test_an_abnormal_close_fails_the_waiting_request_with_its_code():
    async def close(ws: WebSocketConnection) -> None:
        await ws.get_message()
        await ws.aclose(1011, "internal error")

    async with trio.open_nursery() as nursery:
        port = await serving(nursery, close)
        async with mcp_client(port, initialize=False) as client:
            with trio.fail_after(WAIT), pytest.raises(McpConnectionError) as info:
                await client.request("ping")
            assert isinstance(info.value.__cause__, ConnectionClosed)
            assert info.value.__cause__.reason.code == 1011
            assert "internal error" in str(info.value)
        nursery.cancel_scope.cancel()


async def test_a_request_nobody_answers_times_out_naming_it():
    received: list[str] = []

    async def silent(ws: WebSocketConnection) -> None:
        while True:
            received.append(json.loads(await ws.get_message())["method"])

    async with trio.open_nursery() as nursery:
        port = await serving(nursery, silent)
        async with mcp_client(port, initialize=False, timeout=0.2) as client:
            with trio.fail_after(WAIT), pytest.raises(McpTimeoutError) as info:
                await client.request("ping")
            assert str(info.value) == "no answer to 'ping' (id 0) within 0.2 s"
            with trio.fail_after(WAIT), pytest.raises(McpTimeoutError) as info:
                await client.call_tool("openDiff", {})
            assert str(info.value) == "no answer to 'tools/call' (id 1) within 0.2 s"
            with trio.fail_after(WAIT), pytest.raises(McpTimeoutError, match=r"within 0\.1 s"):
                await client.result("tools/list", timeout=0.1)
        assert received == ["ping", "tools/call", "tools/list"]
        nursery.cancel_scope.cancel()


LUA_ERRORS_CONFTEST = """
import pytest

pytest_plugins = ["claude_nvim.testing"]


@pytest.fixture(autouse=True)
def _no_lua_errors(no_lua_errors): ...
"""

LUA_ERRORS_TESTS = """
import pytest
import trio

BOOM = "package.loaded['claude_nvim.core'].guard(function() error('kaboom') end)()"


async def boom(nvim, caplog):
    await nvim.exec_lua(BOOM)  # as an autocmd's error: in the server's log only
    with trio.fail_after(60):
        while not any("kaboom" in r.getMessage() for r in caplog.records):
            await trio.sleep(0.01)


async def test_quiet(app, nvim):
    assert await nvim.exec_lua("return 1") == 1


async def test_boom(app, nvim, caplog):
    await boom(nvim, caplog)


@pytest.mark.lua_errors
async def test_boom_on_purpose(app, nvim, caplog):
    await boom(nvim, caplog)
"""


def test_no_lua_errors_fails_a_test_whose_lua_failed_unless_it_is_marked(pytester):
    pytester.makeconftest(LUA_ERRORS_CONFTEST)
    pytester.makeini("[pytest]\ntrio_mode = true\n")
    pytester.makepyfile(test_lua=LUA_ERRORS_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, errors=1)  # test_boom's teardown
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_boom*",
                                 "*AssertionError: Lua in Neovim failed: *kaboom*"])
