"""The benchmark's MCP client: a WebSocket connection that talks as the ``claude`` CLI does,
with requests in flight matched to their answers by id."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import trio

from benchmarks.wsclient import Closed, WebSocket
from benchmarks.wsclient import connect as ws_connect

AUTH_HEADER = "x-claude-code-ide-authorization"
RESPONSE_HEAD = re.compile(r'\{"jsonrpc":"2\.0","id":(\d+),"(result|error)"')


class Slot:
    def __init__(self) -> None:
        self.event = trio.Event()
        self.value: tuple[float, str] = (0.0, "")


class Client:
    """Responses are matched by id from their first bytes (the server writes ``jsonrpc``, ``id``,
    ``result`` in that order), so a 10 MB answer is timed when it arrives, not once decoded."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self._ids = itertools.count(0)
        self._waiting: dict[int, Slot] = {}
        self.notes: list[tuple[float, dict[str, Any]]] = []
        self._arrived = trio.Event()

    async def reader(self) -> None:
        with contextlib.suppress(Closed, trio.ClosedResourceError):
            async for raw in self.ws.messages():
                arrived = time.perf_counter()
                head = RESPONSE_HEAD.match(raw, 0, 80)
                if head:
                    request_id: Any = int(head[1])
                else:
                    message = json.loads(raw)
                    if "method" in message and "id" not in message:
                        self.notes.append((arrived, message))
                        self._arrived.set()
                        self._arrived = trio.Event()
                        continue
                    request_id = message.get("id")
                slot = self._waiting.pop(request_id, None)
                if slot is not None:
                    slot.value = (arrived, raw)
                    slot.event.set()

    async def send(self, message: dict[str, Any] | str) -> None:
        text = message if isinstance(message, str) else json.dumps(message,
                                                                   separators=(",", ":"))
        await self.ws.send_message(text)

    def next_id(self) -> int:
        return next(self._ids)

    async def request_raw(self, request_id: int, text: str | bytes
                          ) -> tuple[float, float, str]:
        """Send a request (text, or a frame made with wsclient.frame); returns (sent, arrived,
        raw response)."""
        slot = Slot()
        self._waiting[request_id] = slot
        sent = time.perf_counter()
        if isinstance(text, bytes):
            await self.ws.send_frame(text)
        else:
            await self.ws.send_message(text)
        await slot.event.wait()
        return sent, slot.value[0], slot.value[1]

    async def request(self, method: str, params: dict[str, Any] | None = None
                      ) -> tuple[float, float, str]:
        request_id = self.next_id()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        return await self.request_raw(request_id, json.dumps(message, separators=(",", ":")))

    async def result(self, method: str, params: dict[str, Any] | None = None) -> Any:
        raw = (await self.request(method, params))[2]
        message = json.loads(raw)
        if "error" in message:
            raise RuntimeError(f"{method}: {message['error']}")
        return message["result"]

    async def call(self, name: str, arguments: dict[str, Any] | None = None
                   ) -> tuple[float, float, str]:
        request_id = self.next_id()
        params: dict[str, Any] = {"name": name, "arguments": arguments or {},
                                  "_meta": {"progressToken": request_id}}
        text = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                           "params": params}, separators=(",", ":"))
        return await self.request_raw(request_id, text)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def initialize(self) -> None:
        """The CLI's opening: initialize, notifications/initialized, ide_connected, tools/list."""
        await self.result("initialize", {
            "protocolVersion": "2025-06-18",
            "capabilities": {"roots": {"listChanged": True}},
            "clientInfo": {"name": "claude-nvim-bench", "version": "1"},
        })
        await self.notify("notifications/initialized")
        await self.notify("ide_connected", {"pid": os.getpid()})
        tools = await self.result("tools/list")
        assert tools["tools"], "the server lists no tools"

    async def wait_note(self, predicate: Callable[[dict[str, Any]], bool], after: int,
                        timeout: float = 10.0) -> tuple[float, dict[str, Any]]:
        """The first selection_changed at index ``after`` or later whose params match."""
        with trio.fail_after(timeout):
            index = after
            while True:
                while index < len(self.notes):
                    arrived, message = self.notes[index]
                    index += 1
                    if message.get("method") == "selection_changed" and predicate(
                            message.get("params") or {}):
                        return arrived, message
                await self._arrived.wait()


def cursor_on(line: int) -> Callable[[dict[str, Any]], bool]:
    """A selection_changed predicate: an empty selection (the cursor) on ``line``."""
    def matches(params: dict[str, Any]) -> bool:
        selection = params["selection"]
        return bool(selection["start"]["line"] == line and selection["isEmpty"])
    return matches


def tool_failed(raw: str) -> bool:
    """An error response, or a tool result with ``isError`` (the server writes it last)."""
    head = RESPONSE_HEAD.match(raw, 0, 80)
    return head is None or head[2] == "error" or raw.endswith('"isError":true}}')


def tool_text(raw: str) -> str:
    result = json.loads(raw)["result"]
    return "".join(item.get("text", "") for item in result["content"])


@contextlib.asynccontextmanager
async def connect(port: int, token: str, *, initialize: bool = True) -> AsyncIterator[Client]:
    ws = await ws_connect(port, headers=[(AUTH_HEADER, token)])
    try:
        client = Client(ws)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.reader)
            if initialize:
                await client.initialize()
            yield client
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await ws.aclose()


# ---------------------------------------------------------------------------------------------
# One benchmark session: Neovim in a state, the server process, the driver and the probe


