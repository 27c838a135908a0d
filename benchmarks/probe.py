"""The freeze probe: its own process sending ``nvim_eval("1")`` round trips in a loop (run as
``python benchmarks/probe.py ADDRESS GAP_MS``), and :class:`Probe`, which drives it from trio."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import trio


def percentile(ordered: Sequence[float], q: float) -> float:
    if not ordered:
        return math.nan
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))]


def probe_main(address: str, gap: float) -> None:
    """The freeze probe (its own process): ``nvim_eval("1")`` round trips in a loop.

    stdin commands: ``start`` (answers ``started``), ``stop`` (answers one JSON line of
    statistics), ``quit``. Raw msgpack-RPC on the socket: nothing but the round trip.
    """
    import socket

    import msgpack

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(address)
    packer, unpacker = msgpack.Packer(), msgpack.Unpacker(raw=False)
    ids = itertools.count()

    def round_trip() -> None:
        msgid = next(ids)
        sock.sendall(packer.pack([0, msgid, "nvim_eval", ["1"]]))
        while True:
            for message in unpacker:
                if message[0] == 1 and message[1] == msgid:
                    return
            data = sock.recv(65536)
            if not data:
                raise EOFError
            unpacker.feed(data)

    stop = threading.Event()
    samples: list[tuple[float, float]] = []

    def loop() -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            round_trip()
            samples.append((t0, time.perf_counter() - t0))
            if gap:
                time.sleep(gap)

    worker: threading.Thread | None = None
    for line in sys.stdin:
        command = line.strip()
        if command == "start":
            samples.clear()
            stop.clear()
            worker = threading.Thread(target=loop, daemon=True)
            worker.start()
            print("started", flush=True)
        elif command == "stop":
            stop.set()
            if worker is not None:
                worker.join()
            rtts = sorted(s[1] for s in samples)
            worst = max(samples, key=lambda s: s[1]) if samples else (0.0, 0.0)
            print(json.dumps({"n": len(rtts), "max": rtts[-1] * 1e3 if rtts else math.nan,
                              "p50": percentile(rtts, 0.5) * 1e3,
                              "p99": percentile(rtts, 0.99) * 1e3,
                              "over_50ms": sum(r > 0.05 for r in rtts),
                              "worst_at": worst[0] - samples[0][0] if samples else 0.0}),
                  flush=True)
        elif command == "quit":
            break


class Probe:
    """Controls the probe process from trio."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self._buffer = b""

    async def _line(self) -> str:
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            data = await self.process.stdout.receive_some(65536)
            if not data:
                raise EOFError("the freeze probe exited")
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    async def _command(self, command: str) -> str:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(command.encode() + b"\n")
        return await self._line()

    async def start(self) -> None:
        await self._command("start")

    async def stop(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(await self._command("stop"))
        return result

    async def quit(self) -> None:
        assert self.process.stdin is not None
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self.process.stdin.send_all(b"quit\n")
        with trio.move_on_after(2):
            await self.process.wait()
        if self.process.returncode is None:
            self.process.kill()


# ---------------------------------------------------------------------------------------------
# A WebSocket MCP client like the CLI's, timing each response on arrival



def probe_command(address: str, gap_ms: float) -> list[str]:
    """The command line of a freeze probe on the Neovim at ``address``."""
    return [sys.executable, os.path.abspath(__file__), address, str(gap_ms)]


if __name__ == "__main__":
    probe_main(sys.argv[1], float(sys.argv[2]) / 1000)
