"""What a hostile or buggy client costs the server (issue 11): time frozen and memory grown.

    .venv/bin/python -m benchmarks.hostile [--only pipeline,pongs,tiny,fragments,idle,slow,relay]

Each scenario runs against a fresh ``claude-nvim serve`` process (as the harness starts it) on a
fresh headless Neovim, over loopback:

* **pipeline**: one client with the token sends ``--calls`` getWorkspaceFolders calls in one
  go (for ``--hold`` seconds at most: the server may stop taking them), reads no answer, and
  closes the connection.
* **pongs**: one client sends pings as fast as it can for ``--hold`` seconds and reads none
  of the pongs.
* **tiny**: the same with empty pings (6 bytes each).
* **fragments**: one client sends a text message in ``--fragments`` two-byte fragments and
  never finishes it.
* **idle**: the server runs with RLIMIT_NOFILE 1,024 (soft and hard); a local process opens
  ``--idle`` TCP connections and sends nothing; then a legitimate client connects.
* **slow** (issue 18): Neovim has a 24 MB selection; one client asks twice for it
  (getCurrentSelection) and reads ``--trickle`` KB/s (never long enough idle to be dropped).
  Meanwhile another client calls getCurrentSelection three times, and getDiagnostics: their
  longest answer against the same calls with no slow client (most ``--limit`` seconds).
* **relay** (issue 18): ``claude-nvim mcp`` is given an ``initialize`` line, then a 200 MB line
  with no newline (in 1 MiB writes), then its newline and a ``ping``: the relay's peak RSS
  (VmHWM) minus its RSS before, and whether the ping was still answered.

Meanwhile a bystander client sends a ``ping`` request every 10 ms: its longest wait is the
time the server was frozen for everyone. "grown" is the server's peak RSS (VmHWM, reset
before the scenario) minus its RSS before. After the attack (the hostile client closed), "server
busy after it" is the time until the server's CPU stays under 20 % for a second (at most
``--limit`` seconds).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import trio

from benchmarks.harness import ProcWatch, server_command, wait_for_lock
from benchmarks.wsclient import CONTINUATION, PING, TEXT, WebSocket, connect, frame
from claude_nvim._nvim import editor_for
from claude_nvim._nvim.headless import headless_nvim

AUTH = "x-claude-code-ide-authorization"


class Bystander:
    """Pings the server every 10 ms; ``worst`` is the longest wait for an answer."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.worst = 0.0
        self.sent = 0.0
        self._answered = trio.Event()

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._read)
            n = 0
            while True:
                n += 1
                self._answered = trio.Event()
                self.sent = time.perf_counter()
                await self.ws.send_message(json.dumps({"jsonrpc": "2.0", "id": n,
                                                       "method": "ping"}))
                await self._answered.wait()
                self.worst = max(self.worst, time.perf_counter() - self.sent)
                await trio.sleep(0.01)

    def waiting(self) -> float:
        """Also counts a wait still going on."""
        return 0.0 if self._answered.is_set() else time.perf_counter() - self.sent

    async def _read(self) -> None:
        async for _ in self.ws.messages():
            self._answered.set()


@contextlib.asynccontextmanager
async def server(nofile: int | None = None, nvim: list[str] | None = None
                 ) -> AsyncIterator[tuple[ProcWatch, int, str, Path]]:
    """A server on a fresh Neovim; its address is put in ``nvim`` if given."""
    with tempfile.TemporaryDirectory(prefix="claude-nvim-hostile-") as tmp, \
            headless_nvim(cwd=tmp) as (address, _):
        if nvim is not None:
            nvim.append(address)
        config = Path(tmp) / "config"
        config.mkdir()
        log_path = Path(tmp) / "server.log"
        env = {**os.environ, "CLAUDE_CONFIG_DIR": str(config)}
        env.pop("NVIM", None)

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        with open(log_path, "wb") as log_file:
            process = subprocess.Popen(server_command(address), cwd=tmp, env=env,
                                       stdin=subprocess.DEVNULL, stdout=log_file,
                                       stderr=subprocess.STDOUT, preexec_fn=limit)
        try:
            port, token = await wait_for_lock(config, process, log_path)
            yield ProcWatch(process.pid), port, token, log_path
        finally:
            process.terminate()
            process.wait(10)


async def quiet(watch: ProcWatch, limit: float) -> float:
    """Wait until the server's CPU has been idle for a second; the time it took."""
    start = time.perf_counter()
    last, still = watch.cpu(), 0
    while time.perf_counter() - start < limit:
        await trio.sleep(0.1)
        now = watch.cpu()
        still = still + 1 if now - last < 0.02 else 0  # under 20 %: the bystander's own cost
        last = now
        if still >= 10:
            return time.perf_counter() - start - 1.0
    return time.perf_counter() - start


async def attack(args: argparse.Namespace, name: str,
                 hostile: Callable[[int, str], Any]) -> dict[str, float]:
    async with server() as (watch, port, token, _):
        ws = await connect(port, headers=[(AUTH, token)])
        bystander = Bystander(ws)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bystander.run)
            await trio.sleep(0.5)
            before = watch.rss_mb()
            watch.reset_peak()
            bystander.worst = 0.0
            start = time.perf_counter()
            figures = dict(await hostile(port, token))
            figures["attack s"] = time.perf_counter() - start
            figures["server busy after it s"] = await quiet(watch, args.limit)
            await trio.sleep(0.2)
            figures["bystander worst wait ms"] = 1000 * max(bystander.worst, bystander.waiting())
            figures["server grown MB"] = watch.peak_mb() - before
            nursery.cancel_scope.cancel()
    return figures


async def raw_upgraded(port: int, token: str) -> trio.SocketStream:
    ws = await connect(port, headers=[(AUTH, token)])
    return ws.stream


async def send_for(stream: trio.SocketStream, data: bytes, seconds: float) -> float:
    """Send ``data`` for at most ``seconds``; the fraction sent."""
    view, sent = memoryview(data), 0
    with trio.move_on_after(seconds), contextlib.suppress(trio.BrokenResourceError):
        while sent < len(data):
            await stream.send_all(view[sent:sent + 65536])
            sent += min(65536, len(data) - sent)
    return sent / len(data)


def pipeline(args: argparse.Namespace) -> Callable[[int, str], Any]:
    blob = b"".join(frame(TEXT, json.dumps(
        {"jsonrpc": "2.0", "id": i, "method": "tools/call",
         "params": {"name": "getWorkspaceFolders", "arguments": {}}}).encode())
        for i in range(args.calls))

    async def run(port: int, token: str) -> dict[str, float]:
        stream = await raw_upgraded(port, token)
        taken = await send_for(stream, blob, args.hold)
        await stream.aclose()
        return {"calls taken by the server %": 100 * taken}
    return run


def pongs(args: argparse.Namespace) -> Callable[[int, str], Any]:
    blob = b"".join(frame(PING, b"p" * 125) for _ in range(10000))

    async def run(port: int, token: str) -> dict[str, float]:
        stream = await raw_upgraded(port, token)
        sent = 0
        with trio.move_on_after(args.hold):
            while True:
                await stream.send_all(blob)
                sent += 10000
        await stream.aclose()
        return {"pings sent": sent}
    return run


def tiny(args: argparse.Namespace) -> Callable[[int, str], Any]:
    blob = frame(PING, b"") * 100000

    async def run(port: int, token: str) -> dict[str, float]:
        stream = await raw_upgraded(port, token)
        sent = 0
        with trio.move_on_after(args.hold), contextlib.suppress(trio.BrokenResourceError):
            while True:
                await stream.send_all(blob)
                sent += 100000
        await stream.aclose()
        return {"pings sent": sent}
    return run


def fragments(args: argparse.Namespace) -> Callable[[int, str], Any]:
    one = frame(CONTINUATION, b"xy")
    one = bytes([one[0] & 0x7F]) + one[1:]  # not final
    first = frame(TEXT, b"xy")
    blob = bytes([first[0] & 0x7F]) + first[1:] + one * args.fragments

    async def run(port: int, token: str) -> dict[str, float]:
        stream = await raw_upgraded(port, token)
        taken = await send_for(stream, blob, args.limit)
        closed = b""
        with trio.move_on_after(1):
            with contextlib.suppress(trio.BrokenResourceError):
                closed = await stream.receive_some(4096)
        await stream.aclose()
        code = int.from_bytes(closed[2:4], "big") if closed[:1] == b"\x88" else 0
        return {"fragments taken %": 100 * taken, "close code": code}
    return run


async def idle(args: argparse.Namespace) -> dict[str, float]:
    async with server(nofile=1024) as (watch, port, token, log_path):
        before = watch.rss_mb()
        watch.reset_peak()
        streams = []
        for _ in range(args.idle):
            streams.append(await trio.open_tcp_stream("127.0.0.1", port))
        await trio.sleep(0.5)
        start = time.perf_counter()
        connected = float("nan")
        with trio.move_on_after(args.limit):
            ws = await connect(port, headers=[(AUTH, token)])
            await ws.send_message('{"jsonrpc":"2.0","id":1,"method":"ping"}')
            async for _ in ws.messages():
                connected = time.perf_counter() - start
                break
            await ws.aclose()
        for stream in streams:
            await stream.aclose()
        await trio.sleep(0.5)
        text = log_path.read_text(errors="replace")
        return {"legitimate handshake + ping s": connected,
                "server grown MB": watch.peak_mb() - before,
                "log lines about accept": sum("accept" in line for line in text.splitlines()),
                "tracebacks logged": text.count("Traceback")}


SELECTION = {"jsonrpc": "2.0", "method": "tools/call",
             "params": {"name": "getCurrentSelection", "arguments": {}}}
DIAGNOSTICS = {"jsonrpc": "2.0", "method": "tools/call",
               "params": {"name": "getDiagnostics", "arguments": {}}}


async def answered_in(ws: WebSocket, request: dict[str, Any], limit: float) -> float:
    """Seconds until ``ws`` gets the answer to ``request`` (inf past ``limit``)."""
    start = time.perf_counter()
    await ws.send_message(json.dumps({**request, "id": 1}))
    with trio.move_on_after(limit):
        async for _ in ws.messages():
            return time.perf_counter() - start
    return math.inf


async def slow(args: argparse.Namespace) -> dict[str, float]:
    nvim: list[str] = []
    async with server(nvim=nvim) as (_watch, port, token, _):
        editor = editor_for(nvim[0])
        async with trio.open_nursery() as nursery:
            await nursery.start(editor.run)
            big = Path(nvim[0]).parent / "big.txt"
            big.write_text("".join(f"{i:079d}\n" for i in range(300000)))
            await editor.request("nvim_command", f"edit {big}")
            await editor.request("nvim_input", "ggVG")
            await trio.sleep(0.5)
            other = await connect(port, headers=[(AUTH, token)])
            figures: dict[str, float] = {}
            for call, request in (("getCurrentSelection", SELECTION),
                                  ("getDiagnostics", DIAGNOSTICS)):
                figures[f"{call} alone s"] = await answered_in(other, request, args.limit)
            sock = trio.socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            await sock.connect(("127.0.0.1", port))
            stream = await upgraded(trio.SocketStream(sock), port, token)
            for n in range(2):
                await stream.send_all(frame(TEXT, json.dumps({**SELECTION, "id": n}).encode()))

            async def trickle() -> None:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    while await stream.receive_some(4096):
                        await trio.sleep(4096 / (args.trickle * 1024))

            nursery.start_soon(trickle)
            await trio.sleep(2)
            worst = 0.0
            for _ in range(3):
                worst = max(worst, await answered_in(other, SELECTION, args.limit))
                if worst == math.inf:
                    break
            figures["getCurrentSelection beside it worst s"] = worst
            figures["getDiagnostics beside it s"] = await answered_in(other, DIAGNOSTICS,
                                                                       args.limit)
            await stream.aclose()
            await other.aclose()
            nursery.cancel_scope.cancel()
    return figures


async def upgraded(stream: trio.SocketStream, port: int, token: str) -> trio.SocketStream:
    """``stream`` after a WebSocket upgrade, for hand-made frames."""
    await stream.send_all(
        f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        f"Sec-WebSocket-Version: 13\r\n{AUTH}: {token}\r\n\r\n".encode())
    response = b""
    while b"\r\n\r\n" not in response:
        response += await stream.receive_some(4096)
    return stream


async def relay(args: argparse.Namespace) -> dict[str, float]:
    async with server() as (_, port, _token, log_path):
        env = {**os.environ, "CLAUDE_CONFIG_DIR": str(log_path.parent / "config"),
               "CLAUDE_CODE_SSE_PORT": str(port)}
        script = Path(sys.executable).parent / "claude-nvim"
        command = [str(script)] if script.exists() else [sys.executable, "-m", "claude_nvim"]
        process = await trio.lowlevel.open_process(
            [*command, "mcp"], env=env, cwd=log_path.parent, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        stdin, stdout = process.stdin, process.stdout
        assert stdin is not None and stdout is not None
        watch = ProcWatch(process.pid)
        received = bytearray()

        async def answers(count: int) -> bool:
            with trio.move_on_after(args.limit):
                while received.count(b"\n") < count:
                    chunk = await stdout.receive_some(65536)
                    if not chunk:
                        return False
                    received.extend(chunk)
                return True
            return False

        try:
            await stdin.send_all(json.dumps(
                {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                 "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "hostile", "version": "1"}}}).encode()
                + b"\n")
            await answers(1)
            before = watch.rss_mb()
            watch.reset_peak()
            piece = b"a" * 2**20
            start = time.perf_counter()
            with contextlib.suppress(trio.BrokenResourceError):
                for _ in range(200):
                    await stdin.send_all(piece)
                grown = watch.peak_mb() - before
                await stdin.send_all(b'\n{"jsonrpc":"2.0","id":9,"method":"ping"}\n')
            pinged = await answers(3) and b'"id":9' in received
            return {"relay grown MB": max(grown, watch.peak_mb() - before),
                    "ping answered after it": float(pinged),
                    "s": time.perf_counter() - start}
        finally:
            process.kill()
            await process.wait()


async def main(args: argparse.Namespace) -> None:
    results: dict[str, dict[str, float]] = {}
    for name in args.only.split(","):
        print(f"-- {name}", flush=True)
        if name in ("idle", "slow", "relay"):
            results[name] = await globals()[name](args)
        else:
            results[name] = await attack(args, name, globals()[name](args))
        for what, value in results[name].items():
            print(f"   {what:34} {value:,.1f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="pipeline,pongs,tiny,fragments,idle,slow,relay")
    parser.add_argument("--trickle", type=float, default=256.0)
    parser.add_argument("--calls", type=int, default=30000)
    parser.add_argument("--hold", type=float, default=5.0)
    parser.add_argument("--fragments", type=int, default=4_000_000)
    parser.add_argument("--idle", type=int, default=2000)
    parser.add_argument("--limit", type=float, default=120.0)
    parser.add_argument("--json")
    trio.run(main, parser.parse_args())
