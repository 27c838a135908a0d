"""The server's WebSocket layer: the frame codec alone, then the handshake over a real socket."""

from __future__ import annotations

import array
import base64
import contextlib
import fcntl
import hashlib
import os
import re
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
import trio

from claude_nvim._wire.frames import (
    BINARY,
    CLOSE,
    CONTINUATION,
    FRAMES_PER_FEED,
    MAX_FRAGMENTS,
    PING,
    PONG,
    TEXT,
    CloseReason,
    Control,
    Failure,
    FrameReader,
    Message,
    frame,
    parse_close,
)
from claude_nvim._wire.websocket import serve
from helpers import KEY, WAIT, upgrade


def client_frame(opcode: int, payload: bytes, *, fin: bool = True, mask: bytes | None = None,
                 rsv: int = 0) -> bytes:
    """A client frame, masked unless ``mask=b""``."""
    head = bytes([(0x80 if fin else 0) | rsv | opcode])
    n = len(payload)
    bit = 0 if mask == b"" else 0x80
    if n < 126:
        head += bytes([bit | n])
    elif n < 1 << 16:
        head += bytes([bit | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([bit | 127]) + n.to_bytes(8, "big")
    if mask == b"":
        return head + payload
    mask = mask or os.urandom(4)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def feed_all(reader: FrameReader, data: bytes) -> list:
    """Everything ``data`` completes, over as many batches as it takes."""
    events = reader.feed(data)
    while reader.more:
        events += reader.feed(b"")
    return events


def test_a_text_message_in_one_frame():
    reader = FrameReader(1024)
    assert reader.feed(client_frame(TEXT, "héllo 😀".encode())) == [Message("héllo 😀")]


def test_frames_split_anywhere_and_joined_in_one_read():
    data = client_frame(TEXT, b"one") + client_frame(TEXT, b"x" * 300) + client_frame(TEXT, b"3")
    for cut in range(len(data)):
        reader = FrameReader(1024)
        events = reader.feed(data[:cut]) + reader.feed(data[cut:])
        assert events == [Message("one"), Message("x" * 300), Message("3")], cut


def test_fragments_are_reassembled_with_control_frames_between():
    reader = FrameReader(1024)
    events = reader.feed(client_frame(TEXT, b"ab", fin=False) + client_frame(PING, b"p")
                         + client_frame(CONTINUATION, b"c", fin=False)
                         + client_frame(CONTINUATION, b"d"))
    assert events == [Control(PING, b"p"), Message("abcd")]


def test_binary_messages_stay_bytes():
    assert FrameReader(1024).feed(client_frame(BINARY, b"\xff\x00")) == [Message(b"\xff\x00")]


def test_big_payload_lengths():
    payload = bytes(range(256)) * 400  # 102,400 bytes: the 64-bit length form
    assert FrameReader(2**20).feed(client_frame(BINARY, payload)) == [Message(payload)]


def test_over_the_limit_fails_1009_from_the_header_alone():
    reader = FrameReader(1000)
    header_only = client_frame(TEXT, b"x" * 1001)[:14]
    assert reader.feed(header_only) == [Failure(1009, "message over 1000 bytes")]
    assert reader.feed(b"more") == []  # nothing more is taken


def test_the_limit_covers_all_fragments():
    reader = FrameReader(10)
    events = reader.feed(client_frame(TEXT, b"x" * 6, fin=False)
                         + client_frame(CONTINUATION, b"y" * 6))
    assert [type(e) for e in events] == [Failure] and events[0].code == 1009


def test_a_message_in_progress_costs_its_payload_not_its_fragment_count():
    import tracemalloc
    reader = FrameReader(2**20)
    fragments = client_frame(TEXT, b"ab", fin=False) \
        + client_frame(CONTINUATION, b"cd", fin=False) * (MAX_FRAGMENTS - 2)
    tracemalloc.start()
    try:
        assert feed_all(reader, fragments) == []
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    payload = 2 * (MAX_FRAGMENTS - 1)  # 32 KiB; a list of parts held over 800 KiB
    assert held < 2 * payload
    assert reader.feed(client_frame(CONTINUATION, b"!")) == [
        Message("ab" + "cd" * (MAX_FRAGMENTS - 2) + "!")]


def test_a_message_in_too_many_fragments_fails_1009():
    reader = FrameReader(2**20)
    events = feed_all(reader, client_frame(TEXT, b"", fin=False)
                      + client_frame(CONTINUATION, b"", fin=False) * MAX_FRAGMENTS)
    assert events == [Failure(1009, f"message in over {MAX_FRAGMENTS} fragments")]


def test_a_flood_of_small_frames_is_parsed_a_batch_at_a_time():
    reader = FrameReader(100)
    events = reader.feed(client_frame(PING, b"") * (FRAMES_PER_FEED + 10))
    assert len(events) == FRAMES_PER_FEED and reader.more
    assert len(reader.feed(b"")) == 10 and not reader.more


def test_invalid_utf8_fails_1007():
    assert FrameReader(100).feed(client_frame(TEXT, b'{"x":"\xff"}'))[0].code == 1007
    # an encoded surrogate is not UTF-8 either
    assert FrameReader(100).feed(client_frame(TEXT, b"\xed\xa0\x80"))[0].code == 1007


@pytest.mark.parametrize("data, why", [
    (client_frame(TEXT, b"x", mask=b""), "masked"),
    (client_frame(TEXT, b"x", rsv=0x40), "reserved"),
    (client_frame(0x3, b"x"), "opcode"),
    (client_frame(0xB, b"x"), "opcode"),
    (client_frame(PING, b"x", fin=False), "control"),
    (client_frame(PING, b"x" * 126), "control"),
    (client_frame(CONTINUATION, b"x"), "continuation"),
    (client_frame(TEXT, b"x", fin=False) + client_frame(TEXT, b"y"), "inside"),
], ids=["unmasked", "reserved-bit", "opcode-3", "opcode-11", "fragmented-ping", "long-ping",
        "lone-continuation", "message-inside-a-message"])  # the masks are random
def test_protocol_errors_fail_1002(data, why):
    events = FrameReader(100).feed(data)
    assert events[-1].code == 1002 and why in events[-1].reason


def test_close_frames():
    assert parse_close(b"") == CloseReason(1005)
    assert parse_close((1000).to_bytes(2, "big") + b"bye") == CloseReason(1000, "bye")
    assert parse_close((4000).to_bytes(2, "big")) == CloseReason(4000)
    assert parse_close(b"\x03") == Failure(1002, "invalid close code")
    assert parse_close((1005).to_bytes(2, "big")) == Failure(1002, "invalid close code")
    assert parse_close((1000).to_bytes(2, "big") + b"\xff").code == 1007


def test_server_frames_are_unmasked_with_the_right_length_form():
    assert frame(TEXT, b"hi") == b"\x81\x02hi"
    assert frame(PONG, b"") == b"\x8a\x00"
    assert frame(TEXT, b"x" * 200)[:4] == b"\x81\x7e\x00\xc8"
    assert frame(CLOSE, b"x" * 70000)[:10] == b"\x88\x7f" + (70000).to_bytes(8, "big")


# The handshake, over a real socket -----------------------------------------------------------


async def echo(request):
    ws = await request.accept(subprotocol="mcp" if "mcp" in request.proposed_subprotocols
                              else None)

    def on_message(message):
        if isinstance(message, str):
            nursery.start_soon(ws.send, message.upper())

    async with trio.open_nursery() as nursery:
        await ws.serve(on_message)


@pytest.fixture
async def port(nursery):
    return await nursery.start(lambda task_status: serve(
        echo, 0, max_message_size=2**20, handshake_timeout=1, stall_timeout=0.2,
        task_status=task_status))


async def http(port: int, request: bytes) -> bytes:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(request)
    response = b""
    with trio.fail_after(WAIT):  # an error is answered and closed; an upgrade stays open
        while chunk := await stream.receive_some(4096):
            response += chunk
            if response.startswith(b"HTTP/1.1 101") and b"\r\n\r\n" in response:
                break
    await stream.aclose()
    return response


async def test_the_upgrade_answer(port):
    response = await http(port, upgrade(b"Sec-WebSocket-Protocol: x, mcp"))
    accept = base64.b64encode(hashlib.sha1(KEY + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11")
                              .digest())
    assert response.startswith(b"HTTP/1.1 101 ")
    assert b"\r\nSec-WebSocket-Accept: " + accept + b"\r\n" in response
    assert b"\r\nSec-WebSocket-Protocol: mcp\r\n" in response


@pytest.mark.parametrize("request_bytes, status", [
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"400"),
    (upgrade().replace(b"GET", b"POST"), b"400"),
    (upgrade(version=b"8"), b"426"),
    (upgrade(key=b"short"), b"400"),
    (upgrade(b"Bad header line"), b"400"),
    (upgrade(b"X-Big: " + b"y" * 20000), b"431"),
    # What a strict HTTP/1.1 parser (h11) refuses, and so do we:
    (upgrade().replace(b"Host: 127.0.0.1\r\n", b""), b"400"),
    (upgrade(b"Host: other"), b"400"),
    (upgrade(b"X Name: y"), b"400"),
    (upgrade(b"X-Na\x01me: y"), b"400"),
    (upgrade(b"X-N\xe4me: y"), b"400"),
    (upgrade(b"X-Name: a\x00b"), b"400"),
    (upgrade(b"X-Name: a\rb"), b"400"),
    (upgrade().replace(b"HTTP/1.1", b"HTTP/1.0"), b"400"),
])
async def test_bad_upgrades_get_an_http_error(port, request_bytes, status):
    response = await http(port, request_bytes)
    assert response.split(b" ")[1] == status, response[:200]


@pytest.mark.parametrize("body_header", [b"Content-Length: 6", b"Transfer-Encoding: chunked"])
async def test_an_upgrade_with_a_body_is_refused_not_read_as_frames(port, body_header):
    # Else the body would be taken for the client's first frames.
    response = await http(port, upgrade(body_header) + client_frame(TEXT, b"x"))
    assert response.startswith(b"HTTP/1.1 400 "), response[:200]


async def test_messages_and_frames_sent_right_after_the_upgrade(port):
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    # The first message rides in the same packet as the upgrade request.
    await stream.send_all(upgrade() + client_frame(TEXT, b"hello")
                          + client_frame(PING, b"are you there"))
    received = b""
    with trio.fail_after(WAIT):
        while frame(TEXT, b"HELLO") not in received or frame(PONG, b"are you there") \
                not in received:
            received += await stream.receive_some(4096)
        await stream.send_all(client_frame(CLOSE, (1000).to_bytes(2, "big")))
        while not received.endswith(frame(CLOSE, (1000).to_bytes(2, "big"))):
            chunk = await stream.receive_some(4096)
            assert chunk, "closed without echoing the close frame"
            received += chunk
        assert await stream.receive_some(4096) == b""  # and then the server closes


async def answered_once(nursery, answer, *, stall_timeout: float) -> trio.SocketStream:
    """A raw client that has sent one message to a server answering it with ``answer(ws)``."""
    async def handler(request):
        ws = await request.accept()
        async with trio.open_nursery() as tasks:
            await ws.serve(lambda message: tasks.start_soon(answer, ws))

    port = await nursery.start(lambda task_status: serve(
        handler, 0, max_message_size=2**20, handshake_timeout=WAIT, stall_timeout=stall_timeout,
        task_status=task_status))
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(upgrade() + client_frame(TEXT, b"go"))
    return stream


async def test_a_sender_waits_for_room_before_queueing_never_after(nursery):
    sent: list[str] = []

    async def answer(ws):
        await ws.send("x" * (16 << 20))  # room: queued, and done at once
        sent.append("big")
        await ws.send("small")  # over HIGH_WATER, unread: waits, not queued
        sent.append("small")

    stream = await answered_once(nursery, answer, stall_timeout=5)
    await trio.sleep(0.3)  # the client reads nothing yet
    assert sent == ["big"]
    received = b""
    with trio.fail_after(WAIT):
        while not received.endswith(frame(TEXT, b"small")):
            received += await stream.receive_some(1 << 20)
    assert sent == ["big", "small"]


async def test_a_stall_deadline_that_passed_while_idle_drops_nobody(nursery):
    async def answer(ws):
        await ws.send("one")
        await trio.sleep(0.05)  # written: the writer's stall deadline is set
        time.sleep(0.3)  # the loop is held past that deadline ...
        await ws.send("two")  # ... and the writer is woken in the same step

    stream = await answered_once(nursery, answer, stall_timeout=0.2)
    received = b""
    with trio.fail_after(WAIT):
        while frame(TEXT, b"two") not in received:
            chunk = await stream.receive_some(4096)
            assert chunk, "dropped"
            received += chunk


def waiting_to_be_read(stream: trio.SocketStream) -> int:
    """Bytes that have arrived for ``stream`` and are not read yet."""
    count = array.array("i", [0])
    fcntl.ioctl(stream.socket.fileno(), termios.FIONREAD, count)
    return count[0]


def read_by_the_other_end(stream: trio.SocketStream) -> bool:
    """Whether what ``stream`` sent has been read by the process at the other end (over
    loopback: both ends' queues are in /proc/net/tcp)."""
    here, there = stream.socket.getsockname()[1], stream.socket.getpeername()[1]
    queues = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = (int(a.split(":")[1], 16) for a in fields[1:3])
        tx, rx = (int(q, 16) for q in fields[4].split(":"))
        queues[local, remote] = tx, rx
    return queues.get((here, there), (1, 0))[0] == 0 and queues.get((there, here), (0, 1))[1] == 0


async def test_pings_not_read_get_one_pong_not_one_each(nursery):
    """A client that pings and does not read cannot make the server queue pongs."""
    stream = await answered_once(nursery, lambda ws: ws.send("x" * (16 << 20)), stall_timeout=WAIT)
    with trio.fail_after(WAIT):  # 16 MiB on its way: the writer is busy with it until we read
        while waiting_to_be_read(stream) < 65536:
            await trio.sleep(0.01)
    pings = 20000
    for n in range(pings):
        await stream.send_all(client_frame(PING, n.to_bytes(4, "big"), mask=b"abcd"))
    with trio.fail_after(WAIT):  # the server has read every ping
        while not read_by_the_other_end(stream):
            await trio.sleep(0.01)
    received = bytearray()
    with trio.fail_after(WAIT):
        while not received.endswith(frame(PONG, (pings - 1).to_bytes(4, "big"))):
            received += await stream.receive_some(1 << 20)
    pongs = received[16 << 20:].count(b"\x8a\x04")
    assert 1 <= pongs < 100, pongs  # each pong written answers all pings before it


# Open files: a server process with a low limit ---------------------------------------------

SERVER = """
import logging, sys, trio
from claude_nvim._wire.websocket import serve
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

async def handler(request):
    ws = await request.accept()
    await ws.serve(lambda message: None)

async def main():
    async with trio.open_nursery() as nursery:
        port = await nursery.start(lambda task_status: serve(
            handler, 0, max_message_size=1024, handshake_timeout=30, stall_timeout=5,
            task_status=task_status))
        print(port, flush=True)

trio.run(main)
"""


@contextlib.contextmanager
def limited_server(tmp_path, soft: int, hard: int):
    """A WebSocket server process with RLIMIT_NOFILE (soft, hard); its pid, port and log."""
    import resource
    log = tmp_path / "server.log"
    with open(log, "wb") as errors:
        process = subprocess.Popen(
            [sys.executable, "-c", SERVER], stdout=subprocess.PIPE, stderr=errors,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)))
    try:
        port = int(process.stdout.readline())
        yield process.pid, port, log
    finally:
        process.kill()
        process.wait()


async def handshake_time(port: int) -> float:
    start = time.perf_counter()
    with trio.fail_after(WAIT):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.send_all(upgrade())
        assert (await stream.receive_some(4096)).startswith(b"HTTP/1.1 101 ")
    await stream.aclose()
    return time.perf_counter() - start


@pytest.mark.skipif(not os.path.exists("/proc/self/limits"), reason="Linux /proc")
async def test_the_open_file_limit_is_raised_to_the_hard_one(tmp_path):
    with limited_server(tmp_path, 256, 1024) as (pid, _, _):
        limits = Path(f"/proc/{pid}/limits").read_text()
        assert re.search(r"Max open files\s+1024\s+1024", limits), limits


async def test_idle_connections_cannot_keep_a_client_out(tmp_path):
    # 200 connections that send nothing, with 128 open files: the oldest unfinished
    # handshakes are dropped, so a client that sends its request is served at once.
    with limited_server(tmp_path, 128, 128) as (_, port, _):
        idle = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(200)]
        # Served before any idle one's handshake could time out (30 s) and free its file.
        assert await handshake_time(port) < 20
        for stream in idle:
            await stream.aclose()


async def test_out_of_open_files_is_logged_once_and_the_server_recovers(tmp_path):
    with limited_server(tmp_path, 64, 64) as (_, port, log):
        clients = []
        for _ in range(80):  # upgraded connections, held open: more than 64 files
            clients.append(await trio.open_tcp_stream("127.0.0.1", port))
            await clients[-1].send_all(upgrade())
        await trio.sleep(1.5)  # accept fails ten times a second meanwhile
        for stream in clients:
            await stream.aclose()
        with trio.fail_after(WAIT):
            while "accepting connections again" not in log.read_text():
                await trio.sleep(0.05)
        # Served before any idle one's handshake could time out (30 s) and free its file.
        assert await handshake_time(port) < 20
        text = log.read_text()
        assert text.count("cannot accept connections") == 1, text[-2000:]
        assert "Traceback" not in text
