"""A stand-in for the ``claude`` CLI on the other side of ``claude-nvim remote``, driven by a
test through its stdin and stdout (JSON, one message per line). It needs only Python and what
claude-nvim needs (trio-websocket), so it runs wherever the server does.

It finds the server as the CLI does: ``$CLAUDE_CODE_SSE_PORT`` names the lock
(``${CLAUDE_CONFIG_DIR:-~/.claude}/ide/<port>.lock``), else the one lock whose
workspaceFolders hold the working directory; connects with the lock's token and opens the
session as the CLI does. Then, for each line on stdin:

* ``{"id": ID, "call": NAME, "args": {...}}``: calls the tool; prints ``{"id": ID, "result": ...}``
  when it answers (calls run at once, side by side: openDiff waits for the user);
* ``{"id": ID, "write": PATH, "text": TEXT}``: writes the file here, as the CLI does after a
  diff is accepted; prints ``{"id": ID, "written": PATH}``;
* ``{"id": ID, "lock": true}``: prints ``{"id": ID, "lock": <its path>, "content": {...}}``.

Every notification the server sends is printed as it comes: ``{"notification": {...}}``. First
of all it prints ``{"connected": <lock path>, "cwd": <cwd>, "argv": [...]}``. It ends when stdin
closes, or with ``{"error": ...}`` when it cannot connect.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from pathlib import Path

import trio
from trio_websocket import open_websocket


def find_lock() -> Path:
    directory = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude") / "ide"
    if port := os.environ.get("CLAUDE_CODE_SSE_PORT"):
        return directory / f"{port}.lock"
    cwd = os.getcwd()
    found = [path for path in directory.glob("*.lock")
             if any(cwd == f or cwd.startswith(f.rstrip("/") + "/")
                    for f in json.loads(path.read_text()).get("workspaceFolders", []))]
    if len(found) != 1:
        raise LookupError(f"{len(found)} locks in {directory} hold {cwd}")
    return found[0]


async def main() -> None:
    out = trio.lowlevel.FdStream(os.dup(sys.stdout.fileno()))
    saying = trio.Lock()  # one line at a time: answers and notifications come at once

    async def say(message: dict) -> None:
        async with saying:
            await out.send_all(json.dumps(message).encode() + b"\n")

    try:
        lock_path = find_lock()
        lock = json.loads(lock_path.read_text())
    except (OSError, ValueError, LookupError) as exc:
        await say({"error": f"no lock: {exc}"})
        return
    port = int(lock_path.stem)
    headers = [(b"x-claude-code-ide-authorization", lock["authToken"].encode())]
    async with open_websocket("127.0.0.1", port, "/", use_ssl=False, subprotocols=["mcp"],
                              extra_headers=headers, max_message_size=2**27) as ws, \
            trio.open_nursery() as nursery:
        ids = itertools.count()
        waiting: dict[int, trio.MemorySendChannel] = {}

        async def request(method: str, params: dict | None = None) -> dict:
            number = next(ids)
            sender, receiver = trio.open_memory_channel(1)
            waiting[number] = sender
            message = {"jsonrpc": "2.0", "id": number, "method": method}
            if params is not None:
                message["params"] = params
            await ws.send_message(json.dumps(message))
            return await receiver.receive()

        async def notify(method: str, params: dict | None = None) -> None:
            message = {"jsonrpc": "2.0", "method": method}
            if params is not None:
                message["params"] = params
            await ws.send_message(json.dumps(message))

        async def read() -> None:
            while True:
                message = json.loads(await ws.get_message())
                if "id" in message and ("result" in message or "error" in message):
                    sender = waiting.pop(message["id"], None)
                    if sender is not None:
                        sender.send_nowait(message)
                else:
                    await say({"notification": message})

        nursery.start_soon(read)
        await request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                     "clientInfo": {"name": "stand-in claude", "version": "0"}})
        await notify("notifications/initialized")
        await notify("ide_connected", {"pid": os.getpid()})
        await request("tools/list")
        await say({"connected": str(lock_path), "cwd": os.getcwd(), "argv": sys.argv[1:]})

        async def call(command: dict) -> None:
            answer = await request("tools/call", {"name": command["call"],
                                                  "arguments": command.get("args", {})})
            await say({**answer, "id": command["id"]})

        stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
        buffer = b""
        while chunk := await stdin.receive_some(65536):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in filter(None, (raw.strip() for raw in lines)):
                command = json.loads(line)
                if "call" in command:
                    nursery.start_soon(call, command)
                elif "write" in command:
                    Path(command["write"]).write_text(command["text"])
                    await say({"id": command["id"], "written": command["write"]})
                elif "lock" in command:
                    await say({"id": command["id"], "lock": str(lock_path), "content": lock})
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
