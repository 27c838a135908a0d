"""``claude-nvim mcp``: a stdio MCP server relaying to the running claude-nvim's model endpoint.

Register it once with ``claude mcp add nvim -- claude-nvim mcp``; the CLI spawns it with its
own environment, which inside a Neovim terminal names the server (``CLAUDE_CODE_SSE_PORT``).
A line longer than the server's message limit is not buffered: it is answered here with a
JSON-RPC error (for its id, when the id is at its start or its end, as MCP clients write it)
and its bytes are dropped up to its newline.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Awaitable, Callable

import trio
from trio_websocket import ConnectionClosed, HandshakeError, WebSocketConnection, open_websocket

from .. import _lockfile as lockfile
from .._errors import leaf_errors
from .._wire.constants import AUTH_HEADER, MAX_MESSAGE_BYTES, MODEL_PATH

Write = Callable[[bytes], Awaitable[None]]

_ID = rb'"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*"|null)'
ID_AT_START = re.compile(rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?' + _ID)
ID_AT_END = re.compile(_ID + rb'\s*\}\s*$')
"""A top-level id where MCP clients put it: first (after "jsonrpc"), or last (the TypeScript
SDK writes it last). Nested ids are not matched: an object's "id" is followed by its "}" and
the message's, never by the message's alone, and is never first."""
KEPT = 256
"""Bytes kept of each end of a dropped line, to find its id."""


def run(args: argparse.Namespace) -> int:
    try:
        port, token = lockfile.find_server(os.getcwd())
    except LookupError as exc:
        print(f"claude-nvim mcp: {exc}", file=sys.stderr)
        return 1
    status = 0
    try:
        trio.run(relay, port, token)
    except* (OSError, HandshakeError) as group:
        print(f"claude-nvim mcp: cannot reach the server on port {port} "
              f"({leaf_errors(group)[0]}); is it still running? {lockfile.START_ONE}",
              file=sys.stderr)
        status = 1
    return status


async def relay(port: int, token: str) -> None:
    """Copy newline-delimited JSON-RPC between stdin/stdout and the model endpoint."""
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    stdout = trio.lowlevel.FdStream(os.dup(sys.stdout.fileno()))
    writing = trio.Lock()  # answers from the server and our own errors: one writer at a time

    async def write(line: bytes) -> None:
        async with writing:
            await stdout.send_all(line + b"\n")

    async with (
        open_websocket("127.0.0.1", port, MODEL_PATH, use_ssl=False, subprotocols=["mcp"],
                       extra_headers=[(AUTH_HEADER, token.encode())],
                       max_message_size=MAX_MESSAGE_BYTES) as ws,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(_to_server, stdin, ws, write, nursery.cancel_scope)
        with contextlib.suppress(ConnectionClosed):
            while True:
                message = await ws.get_message()
                await write(message.encode() if isinstance(message, str) else message)
        nursery.cancel_scope.cancel()


async def _to_server(stdin: trio.lowlevel.FdStream, ws: WebSocketConnection, write: Write,
                     scope: trio.CancelScope, limit: int = MAX_MESSAGE_BYTES) -> None:
    buffer = bytearray()
    searched = 0  # bytes of `buffer` known to hold no newline
    dropping: bytes | None = None  # the start of a line over `limit`, while its rest comes
    with contextlib.suppress(ConnectionClosed):
        while chunk := await stdin.receive_some(1 << 20):
            buffer += chunk
            while (end := buffer.find(b"\n", searched)) >= 0:
                line = bytes(buffer[:end])
                del buffer[:end + 1]
                searched = 0
                if dropping is not None:
                    await write(_too_long(dropping, line[-KEPT:], limit))
                    dropping = None
                elif len(line) > limit:
                    await write(_too_long(line[:KEPT], line[-KEPT:], limit))
                elif line.strip():
                    await ws.send_message(line.decode("utf-8", "replace"))
            # No newline within the limit: keep the line's ends only, until its newline.
            if len(buffer) > limit or (dropping is not None and len(buffer) > KEPT):
                if dropping is None:
                    dropping = bytes(buffer[:KEPT])
                del buffer[:-KEPT]
            searched = len(buffer)
    scope.cancel()  # stdin closed: the CLI is done with us


def _too_long(start: bytes, end: bytes, limit: int) -> bytes:
    """The JSON-RPC error for a line over ``limit`` bytes that starts and ends so."""
    found = ID_AT_START.match(start) or ID_AT_END.search(end)
    request_id = found.group(1).decode("utf-8", "replace") if found else "null"
    message = (f"Invalid request: a message over {limit // 2**20} MiB, claude-nvim's limit "
               "(dropped)")
    return (f'{{"jsonrpc":"2.0","id":{request_id},"error":{{"code":-32600,'
            f'"message":"{message}"}}}}').encode()
