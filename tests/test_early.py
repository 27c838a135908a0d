"""The early answers (claude_nvim/_wire/early.py): a server handed its listening socket answers
claude's IDE connection (the upgrade and `initialize`) before it loads the rest of itself, and
then serves every connection from where it stands. A real `serve --listen-fd` process, a real
headless Neovim and hand-made clients over loopback."""

from __future__ import annotations

import json
import socket
import sys
import threading
from pathlib import Path
from unittest.mock import ANY

import pytest
import trio

from claude_nvim._wire.constants import CHALLENGE_HEADER, PROOF_HEADER, proof
from claude_nvim._wire.early import MAX_CONNECTIONS, Early, answer_first
from claude_nvim._wire.frames import BINARY, PING, TEXT, frame
from helpers import KEY, WAIT, eventually, masked_frame

TOKEN = "5e" * 16
PORT = "local s = vim.g.claude_nvim_server; return s and s.port"
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "claude-code", "version": "2.1.332"}}}


def request(port: int, path: str = "/", token: str = TOKEN, *extra: bytes) -> bytes:
    lines = [f"GET {path} HTTP/1.1".encode(), f"Host: 127.0.0.1:{port}".encode(),
             b"Upgrade: websocket", b"Connection: Upgrade", b"Sec-WebSocket-Version: 13",
             b"Sec-WebSocket-Key: " + KEY, b"x-claude-code-ide-authorization: " + token.encode(),
             *extra]
    return b"\r\n".join(lines) + b"\r\n\r\n"


class Client:
    """A hand-made client: what it sends, byte for byte, and what came back."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.received = b""

    async def send(self, message: dict) -> None:
        await self.stream.send_all(masked_frame(TEXT, json.dumps(message).encode()))

    async def until(self, wanted: bytes) -> bytes:
        with trio.fail_after(WAIT):
            while wanted not in self.received:
                chunk = await self.stream.receive_some(65536)
                assert chunk, f"closed; received {self.received!r}"
                self.received += chunk
        return self.received


async def connect(port: int, upgrade: bytes) -> Client:
    client = Client(await trio.open_tcp_stream("127.0.0.1", port))
    await client.stream.send_all(upgrade)
    return client


async def start(processes, nvim_address: str, tmp_path: Path, seconds: float = WAIT * 10
                ) -> int:
    """`serve --listen-fd` on a socket bound here, as the plugin's activation hands it over;
    its port. By default it waits for claude's connection as long as any test takes."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen(16)
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg"), "CLAUDE_NVIM_TOKEN": TOKEN,
           "CLAUDE_NVIM_EARLY_SECONDS": str(seconds), "PATH": "/usr/bin:/bin"}
    await processes.start([sys.executable, "-m", "claude_nvim", "serve", "--nvim", nvim_address,
                           "--listen-fd", str(listening.fileno())],
                          pass_fds=[listening.fileno()], env=env)
    port = int(listening.getsockname()[1])
    listening.close()  # the server's now, as Neovim closes its copy
    return port


async def test_claude_is_answered_before_the_server_loads(processes, nvim, nvim_address,
                                                          tmp_path):
    port = await start(processes, nvim_address, tmp_path)
    client = await connect(port, request(port))
    assert (await client.until(b"\r\n\r\n")).startswith(b"HTTP/1.1 101 Switching Protocols")
    # Waiting for initialize, the server has not even claimed Neovim.
    assert await nvim.exec_lua("return vim.g.claude_nvim_server") is None
    await client.send(INITIALIZE)
    await client.until(b'"id":0')
    answer = json.loads(client.received[client.received.index(b"{"):])
    assert answer == {"jsonrpc": "2.0", "id": 0, "result": {
        "protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "claude-nvim", "version": ANY}}}
    # What claude sends next waits for the loaded server, which answers it on this connection.
    await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    await client.send({"jsonrpc": "2.0", "method": "ide_connected", "params": {"pid": 4242}})
    await client.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    await client.until(b'"id":1')
    assert b'"name":"openDiff"' in client.received
    assert await eventually(nvim, PORT) == port
    assert await eventually(nvim, "return vim.g.claude_nvim_server.clients") == 1


async def test_the_model_endpoint_waits_for_the_server(processes, nvim, nvim_address, tmp_path):
    port = await start(processes, nvim_address, tmp_path)
    model = await connect(port, request(port, "/mcp"))
    ide = await connect(port, request(port))
    await ide.until(b"\r\n\r\n")
    # Left for the server, which has not claimed Neovim, let alone listened.
    assert await nvim.exec_lua("return vim.g.claude_nvim_server") is None
    await ide.send(INITIALIZE)
    await ide.until(b'"id":0')
    assert (await model.until(b"\r\n\r\n")).startswith(b"HTTP/1.1 101")
    await model.send(INITIALIZE)
    await model.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    await model.until(b'"id":1')
    assert b'"name":"getDiagnostics"' in model.received


@pytest.mark.parametrize("extra", [(), (b"Origin: http://evil.example",)],
                         ids=["wrong token", "from a web page"])
async def test_who_is_refused_is_refused_by_the_server(processes, nvim, nvim_address, tmp_path,
                                                      extra):
    port = await start(processes, nvim_address, tmp_path)
    token = "0" * 32 if not extra else TOKEN
    refused = await connect(port, request(port, "/", token, CHALLENGE_HEADER + b": c1", *extra))
    # The early answers leave it to the server, which loads at once and refuses it.
    answer = await refused.until(b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 401" if not extra else b"HTTP/1.1 403")
    if not extra:  # a refusal proves the server holds the token, as ever
        assert PROOF_HEADER + b": " + proof(TOKEN, b"c1") in answer.lower()
    assert await eventually(nvim, PORT) == port
    client = await connect(port, request(port))
    await client.until(b"\r\n\r\n")
    await client.send(INITIALIZE)
    await client.until(b'"id":0')


async def test_a_first_message_other_than_initialize_is_the_servers(processes, nvim,
                                                                    nvim_address, tmp_path):
    port = await start(processes, nvim_address, tmp_path)
    client = await connect(port, request(port))
    await client.until(b"\r\n\r\n")
    await client.send({"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
    await client.until(b'"id":7')  # answered by the loaded server, from the same bytes
    assert b'"name":"openDiff"' in client.received


async def test_a_client_gone_before_claude_changes_nothing(processes, nvim, nvim_address,
                                                           tmp_path):
    port = await start(processes, nvim_address, tmp_path)
    gone = await connect(port, request(port)[:20])
    await gone.stream.aclose()
    client = await connect(port, request(port))
    await client.until(b"\r\n\r\n")
    assert await nvim.exec_lua("return vim.g.claude_nvim_server") is None
    await client.send(INITIALIZE)
    await client.until(b'"id":0')
    assert await eventually(nvim, PORT) == port


async def test_with_no_claude_the_server_loads_after_its_wait(processes, nvim, nvim_address,
                                                              tmp_path):
    port = await start(processes, nvim_address, tmp_path, seconds=0.5)
    assert await eventually(nvim, PORT) == port  # nobody connected
    client = await connect(port, request(port))
    await client.until(b"\r\n\r\n")
    await client.send(INITIALIZE)
    await client.until(b'"id":0')


# answer_first alone, in this process: a real listening socket, clients on plain sockets.


def answering(listening: socket.socket) -> tuple[threading.Thread, list[list[Early]]]:
    done: list[list[Early]] = []
    thread = threading.Thread(
        target=lambda: done.append(answer_first(listening, TOKEN, seconds=WAIT)), daemon=True)
    thread.start()
    return thread, done


@pytest.fixture
def listening():
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        bound.listen(16)
        yield bound


def sent_frame(opcode: int, payload: bytes, *, fin: bool = True) -> bytes:
    return frame(opcode, payload, mask=b"\x01\x02\x03\x04", fin=fin)


def received_by(client: socket.socket, count: int) -> bytes:
    got = b""
    while len(got) < count:
        chunk = client.recv(65536)
        assert chunk, got
        got += chunk
    return got


def test_what_follows_initialize_is_left_for_the_server(listening):
    thread, done = answering(listening)
    port = listening.getsockname()[1]
    initialize = sent_frame(TEXT, json.dumps(INITIALIZE).encode())
    after = (sent_frame(TEXT, b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
             + sent_frame(TEXT, b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'))
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(request(port) + initialize + after)  # one write, as a pipelining client
        thread.join(WAIT)
        [[early]] = done
        assert early.upgrade is not None and early.upgrade.path == "/"
        assert early.initialize == INITIALIZE["params"]
        assert early.received == after  # to the byte, for the server to read
        answer = received_by(client, 1)
        while b'"result"' not in answer or answer.count(b"{") != answer.count(b"}"):
            answer += received_by(client, 1)
        assert answer.startswith(b"HTTP/1.1 101 Switching Protocols")
        assert b'"id":0,"result":{"protocolVersion":"2025-06-18"' in answer
        early.socket.close()


@pytest.mark.parametrize("first", [
    sent_frame(PING, b"hi"),
    sent_frame(TEXT, json.dumps(INITIALIZE).encode()[:40], fin=False),
    sent_frame(TEXT, b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":' + b"[" * 5000),
    sent_frame(TEXT, json.dumps(INITIALIZE).encode().replace(b"{}", b'{"x":NaN}')),
    sent_frame(BINARY, json.dumps(INITIALIZE).encode()),
    sent_frame(TEXT, b'{"jsonrpc":"2.0","id":0,"method":"tools/list"}'),
], ids=["ping", "fragment", "nested past the recursion limit", "NaN", "binary", "tools/list"])
def test_anything_but_initialize_first_stops_and_is_handed_over_whole(listening, first):
    thread, done = answering(listening)
    port = listening.getsockname()[1]
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(request(port))
        assert received_by(client, 1).startswith(b"HTTP/1.1 101")
        client.sendall(first)
        thread.join(WAIT)
        [[early]] = done  # it returned, it did not raise
        assert early.upgrade is not None and early.initialize is None
        assert early.received == first  # the server reads it, and answers as it does
        early.socket.close()


def test_it_takes_so_many_connections_and_leaves_the_rest_waiting(listening):
    thread, done = answering(listening)
    port = listening.getsockname()[1]
    clients = [socket.create_connection(("127.0.0.1", port))
               for _ in range(MAX_CONNECTIONS + 1)]
    try:
        thread.join(WAIT)
        [taken] = done
        assert len(taken) == MAX_CONNECTIONS
        assert all(e.upgrade is None and e.received == b"" for e in taken)
        listening.settimeout(WAIT)
        waiting, _ = listening.accept()  # the last one, in the backlog for the server
        waiting.close()
        for early in taken:
            early.socket.close()
    finally:
        for client in clients:
            client.close()
