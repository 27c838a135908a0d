"""Claude at once, and nothing when unused: the plugin's socket activation (lua/claude_nvim/
activate.lua, `serve --listen-fd`), in a real headless Neovim with a UI attached and the
stand-in claude of plugin_kit.py in a real terminal."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path
from unittest.mock import ANY

import pytest
import trio
from trio_websocket import HandshakeError

from claude_nvim._hooks import claude_settings
from claude_nvim._wire.constants import model_endpoint_config
from claude_nvim.testing import mcp_client
from helpers import WAIT, eventually
from plugin_kit import alive, claude_started, plugin_user

SERVER = "local s = require('claude_nvim').server(); return s and s.claude and s.port"


def children(pid: int) -> list[int]:
    """Every process under ``pid`` (from /proc)."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                tree.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found += [child]
            todo.append(child)
    return found


def server_pids(nvim_pid: int) -> list[int]:
    """The claude-nvim servers under Neovim (`python -m claude_nvim serve ...`)."""
    found = []
    for pid in children(nvim_pid):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if argv[0] == sys.executable.encode() and argv[1:4] == [b"-m", b"claude_nvim",
                                                                    b"serve"]:
                found.append(pid)
    return found


def locks(claude_dir: Path) -> list[Path]:
    return sorted((claude_dir / "cfg" / "ide").glob("*.lock"))


async def test_a_neovim_that_never_uses_claude_starts_nothing(claude_dir):
    async with plugin_user(claude_dir) as user:  # the default options
        await eventually(user, "return vim.v.vim_did_enter == 1")
        await user.exec_lua("vim.schedule(function() vim.g.after_start = true end)")
        await eventually(user, "return vim.g.after_start")
        await user.exec_lua("require('claude_nvim').start_ahead()")  # what UIEnter runs
        nvim_pid = await user.exec_lua("return vim.fn.getpid()")
        assert children(nvim_pid) == []
        assert not (claude_dir / "cfg").exists()
        assert await user.exec_lua("return vim.g.claude_nvim_server") is None


# The server's start held until the test opens the gate: claude starts, and connects, while the
# server is not even running yet (the socket is bound and the lock written already).
GATE = 'while [ ! -e "$0" ]; do sleep 0.02; done; exec "$@"'


def editor_script(value: str) -> object:
    """An `nvim -l SCRIPT` command as its Neovim and the script's bytes; anything else as is."""
    if " -l " not in value:
        return value
    nvim, script = value.split(" -l ", 1)
    return nvim, Path(script).read_bytes()


@pytest.fixture
def gated(claude_dir) -> tuple[Path, list[str]]:
    gate = claude_dir / "gate"
    return gate, ["/bin/sh", "-c", GATE, str(gate), sys.executable, "-m", "claude_nvim"]


async def test_claude_starts_before_the_server_and_is_answered(claude_dir, gated):
    gate, cmd = gated
    # claude right under Neovim, and a server that ends with it: the gate holds every
    # claude-nvim (a holder too), and a server with a Claude connected would outlive Neovim.
    async with plugin_user(claude_dir, cmd=cmd, claude={"outlive": False}) as user:
        nvim_pid = await user.exec_lua("return vim.fn.getpid()")
        await user.request("nvim_command", "ClaudeNvim")
        started = await claude_started(claude_dir)
        # claude runs, its server does not: the socket and the lock are the plugin's.
        assert await user.exec_lua("return require('claude_nvim').server()") is None
        assert server_pids(nvim_pid) == []
        [lock] = locks(claude_dir)
        content = json.loads(lock.read_text())
        assert content["pid"] == nvim_pid
        assert content["workspaceFolders"] == [str(claude_dir)]
        assert content["ideName"] == f"Neovim · {claude_dir.name}"
        assert content["transport"] == "ws"
        token = content["authToken"]
        assert len(token) == 32 and int(token, 16) >= 0
        assert stat.S_IMODE(lock.stat().st_mode) == 0o600
        assert stat.S_IMODE(lock.parent.stat().st_mode) == 0o700
        mcp_config = Path(started["argv"][started["argv"].index("--mcp-config") + 1])
        assert stat.S_IMODE(mcp_config.stat().st_mode) == 0o600
        assert json.loads(mcp_config.read_text())["mcpServers"]["nvim"]["headers"] == {
            "X-Claude-Code-Ide-Authorization": token}
        assert "--settings" in started["argv"]
        gate.touch()
        # Its connection waited for the server: now it is one of its clients.
        port = await eventually(user, SERVER)
        assert lock.name == f"{port}.lock"
        await eventually(user, "return (require('claude_nvim').server().clients or 0) == 1")
        [server] = server_pids(nvim_pid)
        # What claude was started with is what the server publishes once ready.
        published = await user.exec_lua("return require('claude_nvim').server().claude")
        argv = started["argv"]
        assert argv[argv.index("--mcp-config") + 1] == str(mcp_config)
        assert json.loads(mcp_config.read_text()) == json.loads(model_endpoint_config(port, token))
        assert published["args"] == ["--mcp-config", str(mcp_config), "--settings", ANY]
        assert json.loads(argv[argv.index("--settings") + 1]) == claude_settings()
        environ = dict(line.split(b"=", 1) for line in Path(
            f"/proc/{started['pid']}/environ").read_bytes().split(b"\0") if b"=" in line)
        given = {k: environ.get(k.encode(), b"").decode() for k in published["env"]}
        # $VISUAL's script: the plugin names its checkout's, the server its installed copy's
        # (a tox env installs a copy): the same file either way.
        assert {k: editor_script(v) for k, v in given.items()} == \
            {k: editor_script(v) for k, v in published["env"].items()}
        assert token.encode() not in Path(f"/proc/{started['pid']}/environ").read_bytes()
        argv = Path(f"/proc/{server}/cmdline").read_bytes()
        assert b"--listen-fd" in argv and token.encode() not in argv
        # The server kept the token (and wrote the lock as its own): a wrong one is refused.
        assert json.loads(lock.read_text())["authToken"] == token
        with pytest.raises(HandshakeError):
            async with mcp_client(port, "0" * 32):
                pass
        async with mcp_client(port, token) as client:
            assert "openDiff" in [t["name"] for t in (await client.result("tools/list"))["tools"]]
    with trio.fail_after(WAIT):  # Neovim gone: its server, the lock and claude's file too
        while alive(server) or lock.exists() or mcp_config.exists():
            await trio.sleep(0.05)
    if alive(started["pid"]):
        os.kill(started["pid"], signal.SIGKILL)


async def test_a_connection_before_the_server_runs_waits_for_it(claude_dir):
    """The server starts a moment after claude: a connection that comes sooner waits in the
    socket's backlog for it, never taken (and dropped) by Neovim, which holds the socket."""
    async with plugin_user(claude_dir) as user:
        await user.request("nvim_command", "ClaudeNvim")
        [lock] = locks(claude_dir)
        assert await user.exec_lua("return require('claude_nvim').server()") is None
        port, token = int(lock.stem), json.loads(lock.read_text())["authToken"]
        async with mcp_client(port, token) as client:
            assert "openDiff" in [t["name"] for t in (await client.result("tools/list"))["tools"]]


async def test_a_server_that_never_starts_leaves_no_lock(claude_dir):
    async with plugin_user(claude_dir, cmd=["/bin/sh", "-c", "exit 3"],
                           claude={"outlive": False}) as user:  # no holder: no claude-nvim
        await user.request("nvim_command", "ClaudeNvim")
        await claude_started(claude_dir)  # at once, as ever
        await eventually(user, "return require('claude_nvim').server() == nil and "
                               "#vim.fn.glob(vim.env.CLAUDE_CONFIG_DIR .. '/ide/*', true, true) "
                               "== 0")


def test_the_plugin_has_the_hooks_claude_gets_from_the_server():
    """The plugin starts claude before the server runs, with the hooks of this file."""
    shipped = Path(claude_settings.__code__.co_filename).with_name("claude_settings.json")
    assert json.loads(shipped.read_text()) == claude_settings(), (
        "regenerate it: python -c 'import json; from claude_nvim._hooks import claude_settings; "
        "print(json.dumps(claude_settings(), indent=1))' > src/claude_nvim/_hooks/"
        "claude_settings.json")


def test_serve_refuses_a_listening_fd_without_its_token(tmp_path):
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        env = {k: v for k, v in os.environ.items() if k != "CLAUDE_NVIM_TOKEN"}
        done = subprocess.run([sys.executable, "-m", "claude_nvim", "serve", "--nvim",
                               str(tmp_path / "none.sock"), "--listen-fd",
                               str(listening.fileno())], pass_fds=[listening.fileno()], env=env,
                              capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "CLAUDE_NVIM_TOKEN" in done.stderr


async def test_with_tools_disabled_claude_waits_for_the_server(claude_dir, monkeypatch):
    # The server may then give claude other arguments (no hooks without their tool): the old way.
    monkeypatch.setenv("CLAUDE_NVIM_DISABLE", "getOpenEditors")
    async with plugin_user(claude_dir) as user:
        nvim_pid = await user.exec_lua("return vim.fn.getpid()")
        await user.request("nvim_command", "ClaudeNvim")
        await claude_started(claude_dir)
        await eventually(user, "return (require('claude_nvim').server().clients or 0) == 1")
        [server] = server_pids(nvim_pid)
        assert b"--listen-fd" not in Path(f"/proc/{server}/cmdline").read_bytes()


def early_wait(pid: int) -> bytes | None:
    """The server's $CLAUDE_NVIM_EARLY_SECONDS: how long it waits for a claude (None: 3 s)."""
    for entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
        if entry.startswith(b"CLAUDE_NVIM_EARLY_SECONDS="):
            return entry.split(b"=", 1)[1]
    return None


async def test_a_server_started_for_no_claude_does_not_wait_for_one(claude_dir):
    async with plugin_user(claude_dir) as user:
        nvim_pid = await user.exec_lua("return vim.fn.getpid()")
        # What :ClaudeNvimSend and the other commands do: they need the server, not a claude.
        await user.exec_lua("require('claude_nvim').when_ready("
                            "function() vim.g.served = true end, function() end)")
        await eventually(user, "return vim.g.served")
        [server] = server_pids(nvim_pid)
        assert b"--listen-fd" in Path(f"/proc/{server}/cmdline").read_bytes()
        assert early_wait(server) == b"0"


async def test_a_server_started_for_a_claude_waits_for_its_connection(claude_dir):
    async with plugin_user(claude_dir, claude={"outlive": False}) as user:
        nvim_pid = await user.exec_lua("return vim.fn.getpid()")
        await user.request("nvim_command", "ClaudeNvim")
        await claude_started(claude_dir)
        await eventually(user, "local s = require('claude_nvim').server(); "
                               "return s and (s.clients or 0) == 1")
        [server] = server_pids(nvim_pid)
        assert early_wait(server) is None
