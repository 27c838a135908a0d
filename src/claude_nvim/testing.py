"""Test helpers for claude-nvim and for tool plugin authors: an opt-in pytest plugin.

Put ``pytest_plugins = ["claude_nvim.testing"]`` in your root ``conftest.py`` and run the
tests with pytest-trio (``trio_mode = true``). Fixtures:

* ``nvim_address``: a fresh headless Neovim (``--clean``) in ``tmp_path``; its socket path.
* ``nvim``: a second RPC client of that Neovim, to drive it like a user would
  (``await nvim.request("nvim_input", "vjj")``, ``await nvim.exec_lua(...)``).
* ``app``: a running claude-nvim :class:`~claude_nvim._app.App` on that Neovim with every
  installed tool, its lock file in ``tmp_path``.
* ``client``: an initialized :class:`McpClient` connected to ``app``'s IDE endpoint.
* ``model_client``: one connected to its model endpoint (``/mcp``), where the tools for the
  model live: ``await model_client.call_json("myTool", {...})`` is a tool's decoded answer,
  ``await model_client.tool_error("myTool", {...})`` the message of a call that must fail.
* ``no_lua_errors``: fails the test when Lua in Neovim (claude-nvim's, or a tool's, in an
  autocmd, a timer or a callback) raised an error the server logged, which the user would
  never see. For every test, in ``conftest.py``::

      @pytest.fixture(autouse=True)
      def _no_lua_errors(no_lua_errors): ...

  A test that makes such errors on purpose says so: ``@pytest.mark.lua_errors``.

And :func:`mcp_client` (``from claude_nvim.testing import mcp_client``) for more clients.
Every request times out (:data:`REQUEST_TIMEOUT`, or ``timeout=``) with
:class:`McpTimeoutError`, and fails with :class:`McpConnectionError` once the connection is gone.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import math
import os
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
from trio_websocket import WebSocketConnection, open_websocket, wrap_client_stream

from ._app import App
from ._nvim import editor_for
from ._nvim.editor import Editor
from ._nvim.headless import headless_nvim
from ._plugins import load_tools
from ._tool import JSON, Tool
from ._wire import jsontext
from ._wire.constants import MODEL_PATH

REQUEST_TIMEOUT = 30.0
"""Seconds an :class:`McpClient` request waits for its answer by default, and an editor of the
kit (``nvim``, ``app``'s) for Neovim's: guards against hangs, which a busy machine must not
reach."""


@contextlib.asynccontextmanager
async def attached_editor(address: str) -> AsyncIterator[Editor]:
    """An editor client attached to ``address`` for the duration of the block."""
    editor = editor_for(address, timeout=REQUEST_TIMEOUT)  # a busy machine's seconds are no hang
    async with trio.open_nursery() as nursery:
        await nursery.start(editor.run)
        yield editor
        nursery.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def running_app(
    address: str,
    *,
    tools: Mapping[str, Tool] | None = None,
    lock_directory: Path,
    token: str = "test-token",
    **limits: Any,
) -> AsyncIterator[App]:
    """A claude-nvim server attached to the Neovim at ``address``, on a free port.

    ``limits`` are :class:`App`'s other keyword arguments (``handshake_timeout=0.3``, ...).
    """
    if tools is None:
        tools = load_tools().tools
    # Neovim's answers may take a busy machine's seconds: only a hang fails the test.
    app = App(editor_for(address, timeout=REQUEST_TIMEOUT), tools, lock_directory=lock_directory,
              token=token, **limits)
    async with trio.open_nursery() as nursery:
        await nursery.start(app.run)
        yield app
        nursery.cancel_scope.cancel()


class McpError(Exception):
    """A JSON-RPC error response."""

    def __init__(self, error: JSON) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = error.get("message")


class McpTimeoutError(TimeoutError):
    """No answer to a request within its timeout."""


class McpConnectionError(ConnectionError):
    """The connection closed or broke (its ``__cause__`` says how): no answer can come."""


class McpClient:
    """A small MCP client over a real WebSocket, speaking like the ``claude`` CLI does."""

    def __init__(self, ws: WebSocketConnection, *, timeout: float = REQUEST_TIMEOUT) -> None:
        self.ws = ws
        self.timeout = timeout
        """Seconds a request waits for its answer unless it says otherwise."""
        self.notifications: list[JSON] = []
        self.stray: list[JSON] = []
        """Responses to no request of ours (e.g. errors with ``"id": null``)."""
        self._ids = itertools.count(0)  # the CLI's ids start at 0
        self._waiting: dict[Any, trio.MemorySendChannel[JSON]] = {}
        self._arrived = trio.Event()
        self._failure: Exception | None = None
        """Why the reader stopped: the connection closed, or the server sent what is not JSON."""

    async def _read(self) -> None:
        try:
            while True:
                message = json.loads(await self.ws.get_message())
                if "id" in message and ("result" in message or "error" in message):
                    sender = self._waiting.pop(message["id"], None)
                    if sender is not None:
                        sender.send_nowait(message)
                    else:
                        self.stray.append(message)
                else:
                    self.notifications.append(message)
                    self._arrived.set()
                    self._arrived = trio.Event()
        except Exception as failure:  # not raised here: a test may expect the server to close
            self._failure = failure
            for sender in self._waiting.values():
                sender.close()  # the waiting requests raise it
            self._waiting.clear()
            self._arrived.set()

    def _failed(self) -> McpConnectionError:
        return McpConnectionError(f"the connection to the server failed: {self._failure!r}")

    async def send(self, message: JSON | str) -> None:
        text = message if isinstance(message, str) else jsontext.dumps(message).decode()
        await self.ws.send_message(text)

    async def request(self, method: str, params: JSON | None = None, *,
                      timeout: float | None = None) -> JSON:
        """Send a request and return the whole response message.

        Raises :class:`McpTimeoutError` when no answer comes within ``timeout`` seconds (default
        :attr:`timeout`), :class:`McpConnectionError` when the connection fails first.
        """
        if self._failure is not None:
            raise self._failed() from self._failure
        request_id = next(self._ids)
        sender, receiver = trio.open_memory_channel[JSON](1)
        self._waiting[request_id] = sender
        message: JSON = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        seconds = self.timeout if timeout is None else timeout
        try:
            await self.send(message)
            with trio.move_on_after(seconds):
                try:
                    return await receiver.receive()
                except trio.EndOfChannel:
                    raise self._failed() from self._failure
        finally:
            self._waiting.pop(request_id, None)
        raise McpTimeoutError(f"no answer to {method!r} (id {request_id}) within {seconds:g} s")

    async def result(self, method: str, params: JSON | None = None, *,
                     timeout: float | None = None) -> Any:
        """The ``result`` of a request; raises :class:`McpError` for an error response."""
        response = await self.request(method, params, timeout=timeout)
        if "error" in response:
            raise McpError(response["error"])
        return response["result"]

    async def notify(self, method: str, params: JSON | None = None) -> None:
        message: JSON = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def initialize(self, pid: int | None = None) -> JSON:
        """The CLI's opening sequence: initialize, initialized, ide_connected (with ``pid``,
        the claude process's: by default this one), tools/list."""
        result: JSON = await self.result("initialize", {
            "protocolVersion": "2025-11-25",
            "capabilities": {"roots": {"listChanged": True}},
            "clientInfo": {"name": "claude-nvim-tests", "version": "0"},
        })
        await self.notify("notifications/initialized")
        await self.notify("ide_connected", {"pid": os.getpid() if pid is None else pid})
        await self.result("tools/list")
        return result

    async def call_tool(self, name: str, arguments: JSON | None = None) -> JSON:
        """A ``tools/call`` result (with ``isError`` when the tool failed)."""
        params: JSON = {"name": name, "_meta": {"progressToken": 7}}
        if arguments is not None:
            params["arguments"] = arguments
        result: JSON = await self.result("tools/call", params)
        return result

    async def call_json(self, name: str, arguments: JSON | None = None) -> Any:
        """The decoded answer of a tool that must succeed and answer JSON text."""
        result = await self.call_tool(name, arguments)
        if result.get("isError"):
            raise AssertionError(f"{name} failed: {result}")
        return json.loads(result["content"][0]["text"])

    async def tool_error(self, name: str, arguments: JSON | None = None) -> str:
        """The message of a tool call that must fail (a result with ``isError``)."""
        result = await self.call_tool(name, arguments)
        if not result.get("isError"):
            raise AssertionError(f"{name} did not fail: {result}")
        text: str = result["content"][0]["text"]
        return text

    async def next_notification(self, method: str, *, after: int = 0,
                                timeout: float = REQUEST_TIMEOUT) -> JSON:
        """The first notification named ``method`` at index ``after`` or later (by default
        within :data:`REQUEST_TIMEOUT`: a guard against hangs, which a busy machine's
        seconds must not reach)."""
        with trio.fail_after(timeout):
            while True:
                for message in self.notifications[after:]:
                    if message.get("method") == method:
                        return message
                if self._failure is not None:
                    raise self._failed() from self._failure
                await self._arrived.wait()

    async def no_notification(self, method: str, *, after: int = 0,
                              within: float = 0.3) -> bool:
        """True when no ``method`` notification arrives at ``after`` or later in ``within`` s."""
        with trio.move_on_after(within):
            await self.next_notification(method, after=after, timeout=math.inf)
            return False
        return True


@contextlib.asynccontextmanager
async def mcp_client(
    port: int,
    token: str | None = "test-token",
    *,
    initialize: bool = True,
    subprotocols: tuple[str, ...] = ("mcp",),
    path: str = "/",
    timeout: float = REQUEST_TIMEOUT,
    pid: int | None = None,
    stream: trio.SocketStream | None = None,
) -> AsyncIterator[McpClient]:
    """A connected client; initialized like the CLI unless ``initialize=False``.

    ``path="/mcp"`` is the model endpoint; ``timeout`` is each request's default timeout;
    ``pid`` is the claude process it says it is in ``ide_connected``: by default this one,
    which holds the connection as a claude holds its own (the server believes a pid only if
    that process or a descendant holds the connection: a Claude in a Neovim terminal descends
    from the terminal's job). ``stream``: a TCP connection to the server to use (one another
    process holds too, say), instead of a new one.
    """
    headers = [] if token is None else [(b"x-claude-code-ide-authorization", token.encode())]
    async with contextlib.AsyncExitStack() as stack:
        if stream is None:
            ws = await stack.enter_async_context(open_websocket(
                "127.0.0.1", port, path, use_ssl=False, subprotocols=list(subprotocols),
                extra_headers=headers, max_message_size=128 * 2**20))
        else:
            own = await stack.enter_async_context(trio.open_nursery())
            ws = await wrap_client_stream(own, stream, "127.0.0.1", path,
                                          subprotocols=list(subprotocols), extra_headers=headers,
                                          max_message_size=128 * 2**20)
            stack.push_async_callback(ws.aclose)
        client = McpClient(ws, timeout=timeout)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client._read)
            if initialize:
                await client.initialize(pid)
            yield client
            nursery.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def model_client_of(address: str, lock_directory: Path, *tools: Tool
                          ) -> AsyncIterator[McpClient]:
    """A model-endpoint client of a new server for the Neovim at ``address``, with ``tools`` in
    place of the installed tools of the same names (a tool's ``make_tool(Limits(...))``: the
    same tool with other limits)."""
    every = {**load_tools().tools, **{tool.name: tool for tool in tools}}
    async with running_app(address, tools=every, lock_directory=lock_directory) as app, \
            mcp_client(app.port, app.token, path=MODEL_PATH) as client:
        yield client


# pytest fixtures


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "lua_errors: the test makes Lua errors on purpose (no_lua_errors lets them be)")


@pytest.fixture
def no_lua_errors(request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
                  ) -> Iterator[None]:
    """Fail the test if the server logged a warning or an error from Neovim's Lua (``core.log``
    and ``core.guard``: what an autocmd, a timer or a callback raised, which never reaches the
    user's :messages), unless it is marked ``lua_errors``."""
    caplog.set_level(logging.WARNING, logger="claude_nvim")
    yield
    if request.node.get_closest_marker("lua_errors") is None:
        errors = [r.getMessage() for r in caplog.get_records("call")
                  if r.levelno >= logging.WARNING and r.getMessage().startswith("Neovim:")]
        assert not errors, "Lua in Neovim failed: " + "; ".join(errors)


@pytest.fixture
def nvim_address(tmp_path: Path) -> Iterator[str]:
    """The socket of a fresh headless Neovim running in ``tmp_path``."""
    # Without the Python provider: its detection (run by the Python ftplugin) costs ~1 s.
    args = ("--clean", "--cmd", "let g:loaded_python3_provider = 0")
    with headless_nvim(cwd=tmp_path, args=args) as (address, _process):
        yield address


@pytest.fixture
async def nvim(nvim_address: str) -> AsyncIterator[Editor]:
    """A second RPC client of the test Neovim, to act as the user."""
    async with attached_editor(nvim_address) as editor:
        yield editor


@pytest.fixture
async def app(nvim_address: str, tmp_path: Path) -> AsyncIterator[App]:
    """claude-nvim serving the test Neovim, with every installed tool."""
    async with running_app(nvim_address, lock_directory=tmp_path / "ide") as served:
        yield served


@pytest.fixture
async def client(app: App) -> AsyncIterator[McpClient]:
    """An MCP client connected to ``app`` and initialized like the CLI."""
    async with mcp_client(app.port, app.token) as connected:
        yield connected


@pytest.fixture
async def model_client(app: App) -> AsyncIterator[McpClient]:
    """An MCP client of ``app``'s model endpoint (``/mcp``), initialized like the CLI."""
    async with mcp_client(app.port, app.token, path=MODEL_PATH) as connected:
        yield connected
