"""The MCP layer, free of I/O: one :class:`McpSession` per connection, which answers
``initialize``, ``tools/list`` and ``tools/call`` with the server's tools.

``await session.handle(text)`` takes one incoming message and returns the reply to send, or
``None`` (notifications, responses, cancelled calls). JSON-RPC's message shapes are in
:mod:`._wire.jsonrpc`; the transport is :mod:`._wire.websocket`, run by the App (``_app.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import trio

from ._errors import EditorError, EditorGone, EditorTimeout, ToolError
from ._tool import JSON, ConnectionInfo, Tool, ToolContext, error_result
from ._wire.hello import initialize_result
from ._wire.jsonrpc import (
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RpcError,
    error_response,
    hashable_id,
    read_message,
    valid_id,
)

log = logging.getLogger(__name__)

ContextFactory = Callable[[Tool, ConnectionInfo], ToolContext]


class McpSession:
    """One client's MCP session: its state and its dispatch, over any transport."""

    def __init__(
        self,
        connection: ConnectionInfo,
        tools: Mapping[str, Tool],
        make_context: ContextFactory,
        *,
        why_gone: Callable[[], str] = lambda: "Neovim went away",
    ) -> None:
        self.connection = connection
        self.why_gone = why_gone
        """What a tool call answers when Neovim is not there (or went away meanwhile)."""
        self.tools = tools
        self.make_context = make_context
        self.initialized = False
        self.tools_listed = trio.Event()
        """Set once the first ``tools/list`` is answered: the CLI listens from then on."""
        self._in_flight: dict[Any, trio.CancelScope] = {}

    async def handle(self, raw: str | bytes,
                     scope: trio.CancelScope | None = None) -> JSON | None:
        """Answer one incoming message; ``None`` when nothing is to be sent back.

        ``notifications/cancelled`` cancels ``scope``, the caller's cancel scope around this
        one call (``Cancelled`` then leaves this method); without one, the call has its own
        and a cancelled call returns ``None``.
        """
        if scope is None:
            with trio.CancelScope() as scope:
                return await self.handle(raw, scope)
            return None  # cancelled by the client: no reply
        if isinstance(raw, bytes):
            return error_response(None, INVALID_REQUEST, "Binary frames are not supported")
        try:
            message = read_message(raw)
        except (ValueError, RecursionError) as exc:
            return error_response(None, PARSE_ERROR, f"Parse error: {exc}")
        if not isinstance(message, dict):
            what = "batches are not supported" if isinstance(message, list) else "not an object"
            return error_response(None, INVALID_REQUEST, f"Invalid request: {what}")
        request_id = message.get("id")
        is_request = "id" in message
        if is_request and not valid_id(request_id):
            return error_response(None, INVALID_REQUEST, "Invalid request: bad id")
        method = message.get("method")
        if message.get("jsonrpc") != "2.0" or not isinstance(method, str):
            if is_request and "method" not in message and ("result" in message or
                                                            "error" in message):
                return None  # a response; this server sends no requests
            return error_response(request_id, INVALID_REQUEST,
                                  "Invalid request: not JSON-RPC 2.0")
        params = message.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            if not is_request:
                return None
            return error_response(request_id, INVALID_REQUEST, "Invalid request: bad params")
        if not is_request:
            self._on_notification(method, params)
            return None
        self._in_flight[request_id] = scope
        try:
            result = await self._on_request(method, params)
            return {"jsonrpc": "2.0", "id": request_id, "result": result}
        except RpcError as exc:
            return error_response(request_id, exc.code, exc.message)
        finally:
            if self._in_flight.get(request_id) is scope:
                del self._in_flight[request_id]

    def initialize(self, params: JSON) -> JSON:
        """Take ``initialize``'s ``params`` (the early answers took some before this session
        began); its result."""
        info = params.get("clientInfo")
        self.connection.client_info = info if isinstance(info, dict) else {}
        return initialize_result(params)

    def _on_notification(self, method: str, params: JSON) -> None:
        if method == "notifications/initialized":
            self.initialized = True
        elif method == "ide_connected":
            pid = params.get("pid")
            self.connection.client_pid = pid if isinstance(pid, int) else None
            log.info("connection %d: claude pid %s", self.connection.id, pid)
        elif method == "notifications/cancelled":
            scope = self._in_flight.get(hashable_id(params.get("requestId")))
            if scope is not None:
                scope.cancel()

    async def _on_request(self, method: str, params: JSON) -> Any:
        if method == "initialize":
            return self.initialize(params)
        if method == "tools/list":
            listed = [t.describe() for t in self.tools.values() if t.description is not None]
            self.tools_listed.set()
            return {"tools": listed}
        if method == "tools/call":
            return await self._call_tool(params)
        if method == "ping":
            return {}
        if method == "prompts/list":
            return {"prompts": []}
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    async def _call_tool(self, params: JSON) -> JSON:
        name = params.get("name")
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            raise RpcError(METHOD_NOT_FOUND, f"Tool not found: {name}")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        problem = tool.check_arguments(arguments)
        if problem:
            return error_result(f"Invalid arguments for {tool.name}: {problem}")
        try:
            result = await tool.handler(self.make_context(tool, self.connection), arguments)
        except (ToolError, EditorError, EditorTimeout) as exc:
            return error_result(str(exc))
        except EditorGone:
            return error_result(self.why_gone())
        except Exception as exc:
            log.exception("tool %s failed", tool.name)
            return error_result(f"Internal error: {type(exc).__name__}: {exc}")
        if not isinstance(result, dict) or not isinstance(result.get("content"), list):
            log.error("tool %s returned %r, not a tool result", tool.name, type(result))
            return error_result(f"Internal error: tool {tool.name} returned no tool result")
        return result
