"""Fuzz claude-nvim over its WebSocket: random and broken frames from many clients.

    python fuzz/ws_fuzz.py --seconds 180 [--seed N]

Starts a headless Neovim and a claude-nvim App in-process, then keeps clients sending random
JSON-RPC (well-formed, mangled, huge, nested), random text and binary frames, hand-made bad
frames (invalid UTF-8, bad opcodes, fragments, lying lengths) and abrupt disconnects. After each
client a fresh client must still get an answer. Any input after which the server stops
answering is saved to tests/corpus/ and the run fails. Loopback only, bounded in time.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import trio

from claude_nvim._app import App
from claude_nvim._nvim import editor_for
from claude_nvim._nvim.headless import headless_nvim
from claude_nvim._plugins import load_tools
from claude_nvim._wire import frames
from claude_nvim.testing import mcp_client

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus"
METHODS = ["initialize", "tools/list", "tools/call", "ping", "prompts/list", "resources/list",
           "notifications/initialized", "notifications/cancelled", "ide_connected", "x/y"]
TOOLS = ["getCurrentSelection", "getLatestSelection", "getOpenEditors", "getDiagnostics",
         "getWorkspaceFolders", "checkDocumentDirty", "saveDocument", "openFile",
         "closeAllDiffTabs", "close_tab", "nope"]
KEYS = ["uri", "filePath", "startLine", "endLine", "startText", "endText", "makeFrontmost",
        "tab_name", "preview", "line", "character"]


def value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 2**31, 2**63, -(2**70), 10**400 if rng.random() < 0.1 else 7])
    if kind == 3:
        return rng.choice([0.5, -0.0, 1e308])
    if kind == 4:
        return rng.choice(["", "file:///tmp/x y.py", "~/%41", "\u0000", "\ud800"[:0] + "é😀",
                           "/" * rng.randrange(1, 300), "a" * rng.randrange(0, 5000)])
    if kind == 5:
        return "".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randrange(20)))
    if kind == 6:
        return [value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice([*KEYS, "x"]): value(rng, depth + 1) for _ in range(rng.randrange(4))}


def message(rng: random.Random) -> str:
    m: dict[str, object] = {}
    if rng.random() < 0.9:
        m["jsonrpc"] = "2.0" if rng.random() < 0.9 else value(rng)
    if rng.random() < 0.8:
        m["id"] = rng.randrange(1000) if rng.random() < 0.8 else value(rng)
    if rng.random() < 0.95:
        m["method"] = rng.choice(METHODS) if rng.random() < 0.9 else value(rng)
    if rng.random() < 0.8:
        params: dict[str, object] = {"name": rng.choice(TOOLS)}
        if rng.random() < 0.8:
            params["arguments"] = {rng.choice(KEYS): value(rng) for _ in range(rng.randrange(4))}
        m["params"] = params if rng.random() < 0.9 else value(rng)
    text = json.dumps(m)
    if rng.random() < 0.1:  # mangle it
        cut = rng.randrange(len(text) + 1)
        text = text[:cut] + rng.choice(["", "}", "\\", "\"", "[" * 1000, "\x00"]) + text[cut:]
    if rng.random() < 0.02:
        text = "[" + ",".join([text] * rng.randrange(1, 50)) + "]"
    return text


def frame(opcode: int, payload: bytes, fin: bool = True, length: int | None = None) -> bytes:
    return frames.frame(opcode, payload, mask=random.randbytes(4), fin=fin, length=length)


def bad_frames(rng: random.Random) -> list[bytes]:
    choice = rng.randrange(7)
    if choice == 0:
        return [frame(0x1, b'{"a":"\xff\xfe\xfd"}')]
    if choice == 1:
        return [frame(rng.choice([0x3, 0x4, 0x5, 0xB, 0xF]), b"x")]
    if choice == 2:  # fragments, some never finished
        parts = [frame(0x1, b'{"jsonrpc":"2.0",', fin=False), frame(0x0, b'"id":1,', fin=False)]
        return parts + ([frame(0x0, b'"method":"ping"}')] if rng.random() < 0.5 else [])
    if choice == 3:  # a length that lies
        return [frame(0x1, b"{}", length=rng.choice([2**40, 70 * 2**20, 200]))]
    if choice == 4:
        return [frame(0x2, bytes(rng.randrange(256) for _ in range(rng.randrange(100))))]
    if choice == 5:  # a ping with too big a payload, a close with a bad code
        return [frame(0x9, b"p" * 200 if rng.random() < 0.5 else b"p"),
                frame(0x8, (999).to_bytes(2, "big"))]
    return [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))]


async def raw_client(app: App, rng: random.Random) -> list[bytes]:
    from test_server import raw_upgrade  # the same hand-made upgrade as the tests
    sent = bad_frames(rng)
    stream = await raw_upgrade(app.port, app.token)
    with trio.move_on_after(1):
        for data in sent:
            await stream.send_all(data)
        await stream.receive_some(65536)
    await stream.aclose()
    return sent


async def json_client(app: App, rng: random.Random) -> list[str]:
    sent = []
    async with mcp_client(app.port, app.token, initialize=rng.random() < 0.5) as client:
        for _ in range(rng.randrange(1, 30)):
            text = message(rng)
            sent.append(text)
            await client.send(text)
        if rng.random() < 0.7:  # else: vanish with requests in flight
            with trio.fail_after(10):
                await client.request("ping")
    return sent


async def alive(app: App) -> bool:
    with trio.move_on_after(10):
        async with mcp_client(app.port, app.token) as probe:
            return "result" in await probe.request("ping")
    return False


async def fuzz(address: str, seconds: float, seed: int, lock_dir: Path) -> int:
    rng = random.Random(seed)
    app = App(editor_for(address), load_tools().tools, lock_directory=lock_dir,
              handshake_timeout=2)
    counts = {"json": 0, "raw": 0, "messages": 0}
    async with trio.open_nursery() as nursery:
        await nursery.start(app.run)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            raw = rng.random() < 0.3
            try:
                sent = await (raw_client if raw else json_client)(app, rng)
            except Exception:  # the client's own troubles (closed on it, timeouts) are fine
                sent = []
            counts["raw" if raw else "json"] += 1
            counts["messages"] += len(sent)
            if not await alive(app):
                name = f"fuzz_{seed}_{counts['json'] + counts['raw']}"
                CORPUS.mkdir(exist_ok=True)
                (CORPUS / f"{name}.json").write_text(repr(sent))
                print(f"server stopped answering; input saved as tests/corpus/{name}.json")
                return 1
        nursery.cancel_scope.cancel()
    leftover = list(lock_dir.glob("*.lock"))
    print(f"fuzz: seed {seed}, {seconds:g} s: {counts['json']} JSON clients "
          f"({counts['messages']} messages), {counts['raw']} raw-frame clients; "
          f"server answered after every one; lock files left: {len(leftover)}")
    return 1 if leftover else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args()
    sys.path.insert(0, str(CORPUS.parent))
    with tempfile.TemporaryDirectory() as tmp, headless_nvim(cwd=tmp) as (address, _):
        return trio.run(fuzz, address, args.seconds, args.seed, Path(tmp) / "ide")


if __name__ == "__main__":
    raise SystemExit(main())
