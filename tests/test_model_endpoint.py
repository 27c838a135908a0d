"""The model endpoint from the CLI's side: `claude-nvim mcp` over stdio, and --mcp-config."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import trio

from claude_nvim._commands import relay
from claude_nvim._wire.constants import MAX_MESSAGE_BYTES
from claude_nvim.testing import running_app
from helpers import WAIT, environment

CLAUDE_NVIM = [sys.executable, "-m", "claude_nvim"]


def limit_memory():
    """A reader of /dev/zero fails with MemoryError at 1 GiB, not later."""
    resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))


async def stdio_session(env, cwd, messages):
    """Run `claude-nvim mcp`, write `messages` as lines, return the decoded answers."""
    requests = sum(1 for m in messages if "id" in m)
    process = await trio.lowlevel.open_process(
        [*CLAUDE_NVIM, "mcp"], env=env, cwd=cwd, preexec_fn=limit_memory,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    answers, buffer = [], b""
    try:
        with trio.fail_after(WAIT):
            for message in messages:
                await process.stdin.send_all(json.dumps(message).encode() + b"\n")
            while len(answers) < requests:
                chunk = await process.stdout.receive_some(65536)
                assert chunk, "claude-nvim mcp closed its output"
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                answers += [json.loads(line) for line in lines if line]
            await process.stdin.aclose()
            assert await process.wait() == 0
    finally:
        process.kill()
    return answers


async def run_mcp(env, cwd):
    """Run `claude-nvim mcp` as the CLI would, given an initialize request."""
    with trio.fail_after(WAIT):
        return await trio.run_process(
            [*CLAUDE_NVIM, "mcp"], env=env, cwd=cwd, stdin=json.dumps(INIT[0]).encode() + b"\n",
            capture_stdout=True, capture_stderr=True, check=False, preexec_fn=limit_memory)


@contextlib.asynccontextmanager
async def listener_that_is_not_claude_nvim(port):
    """Listen on ``port`` and keep what clients send (until the end of their request)."""
    received = bytearray()

    async def keep(stream):
        with trio.move_on_after(5):
            while b"\r\n\r\n" not in received and (chunk := await stream.receive_some()):
                received.extend(chunk)
        await stream.aclose()

    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, keep, listeners)
        yield received
        nursery.cancel_scope.cancel()


INIT = [
    {"jsonrpc": "2.0", "id": 0, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "claude-code", "version": "2"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
     "params": {"name": "getWorkspaceFolders", "arguments": {}}},
]


async def test_mcp_relays_to_the_server_for_this_directory(app, tmp_path):
    config = tmp_path / "ide"
    assert app.lock_path.parent == config
    answers = await stdio_session(environment(tmp_path), tmp_path, INIT)
    by_id = {a["id"]: a for a in answers}
    assert by_id[0]["result"]["serverInfo"]["name"] == "claude-nvim"
    names = {t["name"] for t in by_id[1]["result"]["tools"]}
    assert "getWorkspaceFolders" in names and "openDiff" not in names
    folders = json.loads(by_id[2]["result"]["content"][0]["text"])
    assert folders["rootPath"] == str(tmp_path)


async def test_mcp_answers_a_line_over_the_message_limit_and_goes_on(app, tmp_path):
    # As the MCP TypeScript SDK writes a request: its id last. Before: the relay buffered the
    # whole line and sent it; the server closed the connection (1009), and the relay ended.
    huge = (b'{"method":"tools/call","params":{"name":"getWorkspaceFolders","arguments":'
            b'{"x":"' + b"a" * (MAX_MESSAGE_BYTES + 1) + b'"}},"jsonrpc":"2.0","id":7}\n')
    process = await trio.lowlevel.open_process(
        [*CLAUDE_NVIM, "mcp"], env=environment(tmp_path), cwd=tmp_path, preexec_fn=limit_memory,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    answers, buffer = [], b""
    try:
        with trio.fail_after(WAIT):
            await process.stdin.send_all(json.dumps(INIT[0]).encode() + b"\n" + huge)
            await process.stdin.send_all(json.dumps({**INIT[3], "id": 8}).encode() + b"\n")
            while len(answers) < 3:
                chunk = await process.stdout.receive_some(65536)
                assert chunk, "claude-nvim mcp closed its output"
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                answers += [json.loads(line) for line in lines if line]
    finally:
        process.kill()
    by_id = {a["id"]: a for a in answers}
    assert by_id[7]["error"] == {"code": -32600, "message": (
        "Invalid request: a message over 64 MiB, claude-nvim's limit (dropped)")}
    assert json.loads(by_id[8]["result"]["content"][0]["text"])["rootPath"] == str(tmp_path)


def test_a_dropped_line_is_answered_for_its_top_level_id_only():
    def answered(start, end=b""):
        return json.loads(relay._too_long(start, end or start, 10))["id"]

    assert answered(b'{"jsonrpc": "2.0", "id": "a\\"b", "method": ') == 'a"b'
    assert answered(b'{"id":-3,"method":"x"') == -3
    assert answered(b'{"method":"x","params":{"id":1', b'"x"}},"jsonrpc":"2.0","id":9}') == 9
    assert answered(b'{"method":"x","params":{"id":1', b'"a":{"id":2}}}') is None  # nested
    assert answered(b'[{"id":1') is None  # a batch: not ours to answer one of


async def test_mcp_skips_bogus_locks_and_relays_to_the_real_server(app, tmp_path,
                                                                   plant_bogus_locks):
    planted = plant_bogus_locks(tmp_path / "ide", folder=tmp_path, pid=os.getpid())
    answers = await stdio_session(environment(tmp_path), tmp_path, INIT)
    initialized = next(a for a in answers if a["id"] == 0)  # answers may come in any order
    assert initialized["result"]["serverInfo"]["name"] == "claude-nvim"
    env = environment(tmp_path, CLAUDE_CODE_SSE_PORT="2")  # names a lock that is a symlink
    done = await run_mcp(env, tmp_path)
    assert done.returncode == 1 and b"no readable claude-nvim lock file" in done.stderr
    assert all(p.is_symlink() or p.exists() for p in planted)


async def test_mcp_gives_no_token_to_a_port_that_does_not_prove_it_is_ours(
        nvim_address, tmp_path):
    env = environment(tmp_path)
    serve = await trio.lowlevel.open_process([*CLAUDE_NVIM, "serve", "--nvim", nvim_address],
                                             env=env, stderr=subprocess.DEVNULL)
    try:
        with trio.fail_after(WAIT):
            while not (locks := list((tmp_path / "ide").glob("*.lock"))):
                await trio.sleep(0.02)
        lock = locks[0]
        content = json.loads(lock.read_text())
    finally:
        serve.kill()  # SIGKILL: its lock stays, and its pid (Neovim's) is alive
        await serve.wait()
    async with listener_that_is_not_claude_nvim(int(lock.stem)) as received:
        done = await run_mcp(env, tmp_path)
        assert done.returncode == 1, done.stderr
        assert b"no claude-nvim server is running for" in done.stderr
        # Locks without a live pid of their own: none, or 0 (kill(0, 0) succeeds).
        for variant in ({k: v for k, v in content.items() if k != "pid"}, {**content, "pid": 0}):
            lock.write_text(json.dumps(variant))
            assert (await run_mcp(env, tmp_path)).returncode == 1
            sse = await run_mcp(environment(tmp_path, CLAUDE_CODE_SSE_PORT=lock.stem), tmp_path)
            assert sse.returncode == 1
        assert content["authToken"].encode() not in received


async def test_mcp_follows_claude_code_sse_port(app, tmp_path):
    elsewhere = tmp_path.parent  # not inside the server's workspace folders
    env = environment(tmp_path, CLAUDE_CODE_SSE_PORT=str(app.port))
    answers = await stdio_session(env, elsewhere, INIT[:1])
    assert answers[0]["result"]["serverInfo"]["name"] == "claude-nvim"


def test_mcp_without_a_server_says_so(tmp_path):
    done = subprocess.run([*CLAUDE_NVIM, "mcp"], env=environment(tmp_path), cwd=tmp_path,
                          capture_output=True, text=True, timeout=WAIT, input="")
    assert done.returncode == 1
    assert "no claude-nvim server is running for" in done.stderr
    stale_port = subprocess.run(
        [*CLAUDE_NVIM, "mcp"], env=environment(tmp_path, CLAUDE_CODE_SSE_PORT="9"),
        capture_output=True, text=True, timeout=WAIT, input="")
    assert stale_port.returncode == 1 and "port 9" in stale_port.stderr


def test_mcp_to_a_server_that_is_gone_is_one_line_of_error(tmp_path):
    with socket.socket() as gone:  # a port that refuses
        gone.bind(("127.0.0.1", 0))
        port = gone.getsockname()[1]
    (tmp_path / "ide").mkdir()
    (tmp_path / "ide" / f"{port}.lock").write_text(json.dumps({
        "pid": os.getpid(), "workspaceFolders": [str(tmp_path)], "ideName": "Neovim",
        "transport": "ws", "authToken": "t"}))
    done = subprocess.run(
        [*CLAUDE_NVIM, "mcp"], env=environment(tmp_path, CLAUDE_CODE_SSE_PORT=str(port)),
        capture_output=True, text=True, timeout=WAIT, input="")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(f"claude-nvim mcp: no claude-nvim server on port {port} ")
    assert "; is it still running? start one in Neovim" in done.stderr


async def test_claude_command_passes_the_model_endpoint(nvim_address, tmp_path):
    seen = tmp_path / "argv.json"
    fake = tmp_path / "claude"
    fake.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, os, stat, sys
        config = sys.argv[sys.argv.index("--mcp-config") + 1]
        json.dump({{"argv": sys.argv[1:], "config": open(config).read(),
                   "mode": stat.S_IMODE(os.stat(config).st_mode)}}, open({str(seen)!r}, "w"))
        """))
    fake.chmod(0o755)
    env = environment(tmp_path / "cfg", CLAUDE_NVIM_CLAUDE=str(fake), NVIM=nvim_address)
    await trio.run_process([*CLAUDE_NVIM, "claude", "hello"], env=env)
    got = json.loads(seen.read_text())
    argv = got["argv"]
    assert argv[0] == "--mcp-config" and argv[4] == "hello"
    assert got["mode"] == 0o600 and not os.path.exists(argv[1])  # private, and gone after
    assert "Authorization" not in " ".join(argv)  # no token on the command line
    server = json.loads(got["config"])["mcpServers"]["nvim"]
    assert server["type"] == "ws"
    assert server["url"].startswith("ws://127.0.0.1:") and server["url"].endswith("/mcp")
    assert len(server["headers"]["X-Claude-Code-Ide-Authorization"]) >= 32


async def test_the_mcp_config_file_is_new_and_private(nvim_address, tmp_path):
    ide = tmp_path / "ide"
    ide.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    for port in range(4000, 4010):  # names such files used to get
        (ide / f"mcp-{port}-{os.getpid()}.json").symlink_to(victim)
        (ide / f"mcp-config-{port + 10}.json").write_text("")
        os.chmod(ide / f"mcp-config-{port + 10}.json", 0o644)
    planted = sorted(ide.iterdir())
    for _ in range(2):
        async with running_app(nvim_address, lock_directory=ide, token="the-token") as app:
            path = Path(app.claude_args[app.claude_args.index("--mcp-config") + 1])
            assert path.parent == ide and path not in planted and not path.is_symlink()
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            assert "the-token" in path.read_text()
        assert not path.exists()
    assert victim.read_text() == "precious"
    assert sorted(ide.iterdir()) == planted


def test_the_relay_does_not_import_the_server():
    # All `claude-nvim mcp` imports: claude starts it for each session.
    done = subprocess.run([sys.executable, "-c", "import sys, claude_nvim._cli, "
                           "claude_nvim._commands.relay;"
                           "print('claude_nvim._app' in sys.modules)"],
                          capture_output=True, text=True, timeout=WAIT, check=True)
    assert done.stdout.strip() == "False"
