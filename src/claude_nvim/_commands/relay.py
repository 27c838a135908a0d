"""``claude-nvim mcp``: a stdio MCP server relaying to the running claude-nvim's model endpoint.

Register it once with ``claude mcp add nvim -- claude-nvim mcp``; the CLI spawns it with its
own environment, which inside a Neovim terminal names the server (``CLAUDE_CODE_SSE_PORT``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

import trio
from trio_websocket import ConnectionClosed, HandshakeError, WebSocketConnection, open_websocket

from .. import _lockfile as lockfile
from .._errors import leaf_errors
from .._wire.constants import AUTH_HEADER, MAX_MESSAGE_BYTES, MODEL_PATH


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
    async with (
        open_websocket("127.0.0.1", port, MODEL_PATH, use_ssl=False, subprotocols=["mcp"],
                       extra_headers=[(AUTH_HEADER, token.encode())],
                       max_message_size=MAX_MESSAGE_BYTES) as ws,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(_to_server, stdin, ws, nursery.cancel_scope)
        with contextlib.suppress(ConnectionClosed):
            while True:
                message = await ws.get_message()
                data = message.encode() if isinstance(message, str) else message
                await stdout.send_all(data + b"\n")
        nursery.cancel_scope.cancel()


async def _to_server(stdin: trio.lowlevel.FdStream, ws: WebSocketConnection,
                     scope: trio.CancelScope) -> None:
    buffer = bytearray()
    searched = 0  # bytes of `buffer` known to hold no newline
    with contextlib.suppress(ConnectionClosed):
        while chunk := await stdin.receive_some(1 << 20):
            buffer += chunk
            while (end := buffer.find(b"\n", searched)) >= 0:
                line = bytes(buffer[:end])
                del buffer[:end + 1]
                searched = 0
                if line.strip():
                    await ws.send_message(line.decode("utf-8", "replace"))
            searched = len(buffer)
    scope.cancel()  # stdin closed: the CLI is done with us
