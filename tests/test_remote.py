"""``claude-nvim remote``: Claude on another host (a real sshd of a second user, on loopback) or
in a container (a mount namespace standing in for one), Neovim here, its server here. A
stand-in claude there (tests/stand_in_claude.py) finds the server through the lock file the
agent writes there, and every path crosses to the right side; only WebSocket bytes cross.
The far side is hostile too: a fake agent that speaks msgpack-RPC and garbage, an account
process that writes to every pipe and connects to every socket there: the local Neovim runs
nothing. Where the machine cannot run sshd or namespaces, the tests say so and skip
(remote_side.py)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from claude_nvim._commands._remote_parts import (
    MAX_CONNECTIONS,
    Frames,
    Probe,
    ProtocolError,
    Target,
    TargetError,
    claude_command,
    frame,
    parse_target,
)
from helpers import WAIT, edit, environment, eventually
from plugin_kit import alive, plugin_user
from remote_side import (
    STAND_IN,
    Sshd,
    StandIn,
    container,
    installation,
    nsenter,
    python_for_others,
    run_as,
    second_user,
    shared_directory,
    sshd,
)

LAUNCHER = [sys.executable, "-m", "claude_nvim", "remote"]
A_PY, B_PY = "one\ntwo\nthree\n", "bee\n"
READY = ("local s = vim.g.claude_nvim_server; return s and s.claude and s.claude.remote and "
         "{port = s.port, clients = s.clients or 0, remote = s.claude.remote}")
PWNED = "return vim.g.pwned == nil"
HOSTILE = Path(__file__).resolve().parent


def workspace(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "a.py").write_text(A_PY)
    (path / "b.py").write_text(B_PY)
    return path


# The scenario: everything that crosses, on each side.


async def exercise(nvim, claude: StandIn, there: str, here: Path) -> None:
    """Drive Neovim as the user and ``claude`` as the CLI; ``there`` is the workspace as
    Claude's host has it, ``here`` as Neovim has it (the same files: a mount)."""
    connected = await claude.connected()
    lock = (await claude.answer(await claude.send(lock=True)))["content"]
    assert lock["workspaceFolders"] == [there] and connected["cwd"] == there
    assert lock["ideName"] == f"Neovim \N{MIDDLE DOT} {here.name}"  # by the project

    # A selection and a mention name Claude's paths.
    await edit(nvim, here / "a.py")
    await nvim.request("nvim_win_set_cursor", 0, [2, 1])
    selected = await claude.notification(
        "selection_changed", lambda p: p["selection"]["start"] == {"line": 1, "character": 1})
    assert (selected["filePath"], selected["fileUrl"]) == (f"{there}/a.py",
                                                          f"file://{there}/a.py")
    await nvim.request("nvim_command", "ClaudeNvimAdd a.py 2 3")
    mention = await claude.notification("at_mentioned")
    assert mention == {"filePath": f"{there}/a.py", "lineStart": 1, "lineEnd": 2}

    # getDiagnostics: asked with Claude's URI, answered with it.
    await nvim.exec_lua("vim.diagnostic.set(vim.api.nvim_create_namespace('t'), 0, "
                        "{ { lnum = 0, col = 0, message = 'not one', severity = 1 } })")
    (one,) = await claude.call_json("getDiagnostics", {"uri": f"file://{there}/a.py"})
    assert one["uri"] == f"file://{there}/a.py"
    assert [d["message"] for d in one["diagnostics"]] == ["not one"]
    assert await claude.call_json("getDiagnostics") == [one]

    # openFile: Claude's path opens Neovim's file.
    opened = await claude.call("openFile", {"filePath": f"{there}/b.py", "startLine": 1})
    assert not opened.get("isError"), opened
    assert await nvim.exec_lua("return vim.api.nvim_buf_get_name(0)") == str(here / "b.py")

    # openDiff, rejected: Neovim's file is shown, nothing changes.
    rejected = await diff(nvim, claude, there, here, "ONE\n", "ClaudeNvimDiffDeny")
    assert rejected[0]["text"] == "DIFF_REJECTED"
    # openDiff, accepted: the CLI writes the file there; Neovim's buffer shows it.
    accepted = await diff(nvim, claude, there, here, "one\n2\nthree\n", "ClaudeNvimDiffAccept")
    assert [item["text"] for item in accepted] == ["FILE_SAVED", "one\n2\nthree\n"]
    await claude.answer(await claude.send(write=f"{there}/a.py", text="one\n2\nthree\n"))
    await claude.call("close_tab", {"tab_name": "a.py (remote)"})
    await shows(nvim, here / "a.py", ["one", "2", "three"])
    # In auto mode there is no diff: the write alone reaches Neovim.
    await claude.answer(await claude.send(write=f"{there}/b.py", text="bee\nsting\n"))
    await shows(nvim, here / "b.py", ["bee", "sting"])
    # The server here runs nothing Claude sends: the far side never had Neovim's RPC.
    assert await nvim.exec_lua(PWNED)


async def diff(nvim, claude: StandIn, there: str, here: Path, contents: str, verdict: str):
    number = await claude.send(call="openDiff", args={
        "old_file_path": f"{there}/a.py", "new_file_path": f"{there}/a.py",
        "new_file_contents": contents, "tab_name": "a.py (remote)"})
    target = await eventually(nvim, """
      for _, b in ipairs(vim.api.nvim_list_bufs()) do
        if vim.b[b].claude_nvim_proposal then
          vim.api.nvim_set_current_win(vim.fn.win_findbuf(b)[1])
          return vim.api.nvim_buf_get_name(vim.fn.winbufnr(vim.fn.winnr('#')))
        end
      end""", timeout=WAIT)
    assert target == str(here / "a.py")
    await nvim.request("nvim_command", verdict)
    return (await claude.answer(number))["result"]["content"]


async def shows(nvim, path: Path, lines: list[str]) -> None:
    """Wait until ``path``'s buffer holds ``lines``, unmodified."""
    await eventually(nvim, """
      local buf = vim.fn.bufnr(select(1, ...))
      return buf > 0 and not vim.bo[buf].modified
        and vim.deep_equal(vim.api.nvim_buf_get_lines(buf, 0, -1, false), select(2, ...))
    """, str(path), lines, timeout=WAIT)


# Over SSH


@pytest.fixture
def remote_user():
    with second_user() as user:
        yield user


@pytest.fixture
def remote_home(remote_user):
    """The second user's directory for this test: its workspace, claude-nvim, sshd files."""
    home = shared_directory(remote_user, "claude-nvim-remote-")
    yield home
    subprocess.run(["rm", "-rf", str(home)], check=False)


@pytest.fixture
def remote_bin(remote_home, remote_user) -> Path:
    """claude-nvim (and the stand-in claude) as the second user runs them."""
    return installation(remote_home / "install", remote_user)


@pytest.fixture
def remote_ws(remote_home, remote_user) -> Path:
    path = workspace(remote_home / "ws")
    for item in (path, *path.iterdir()):
        os.chown(item, remote_user.pw_uid, remote_user.pw_gid)
    return path


@pytest.fixture
def ssh_server(tmp_path, remote_home, remote_user):
    server_dir, client_dir = remote_home / "sshd", tmp_path / "ssh"
    server_dir.mkdir()
    client_dir.mkdir()
    config = remote_home / "claude-config"
    config.mkdir()
    os.chown(config, remote_user.pw_uid, remote_user.pw_gid)
    environment = {"CLAUDE_CONFIG_DIR": str(config), "CLAUDE_NVIM_KEEPALIVE": "1"}
    with sshd(client_dir, server_dir, remote_user, environment=environment) as server:
        yield server


def launcher(server: Sshd, remote_bin: Path, target: str, *more: str) -> list[str]:
    """The launcher, with Neovim's files where Claude's are (one host here: the same
    files, as a mount would be)."""
    return [*LAUNCHER, "--ssh", shlex.join(server.ssh), "--remote-claude",
            str(remote_bin / "claude"), "--path-map", f"{target}={target}", *more,
            f"{Sshd.HOST}:{target}"]


def stand_in_over_ssh(server: Sshd, remote_bin: Path, cwd: Path) -> list[str]:
    return [*server.ssh, Sshd.HOST, f"cd {cwd} && exec {remote_bin / 'claude'}"]


async def start(nursery, command: list[str], tmp_path: Path, nvim_address: str, **env: str):
    """The launcher as the Neovim plugin runs it, with ``--nvim``; its stderr (and the other
    side's) in ``tmp_path/launcher.log``, printed when the test fails."""
    log = tmp_path / "launcher.log"
    starts = log.read_text().count(" is ready ") + 1 if log.exists() else 1
    with open(log, "ab") as out:
        process = await nursery.start(lambda task_status: trio.run_process(
            [*command[:len(LAUNCHER)], "--nvim", nvim_address, *command[len(LAUNCHER):]],
            env={**environment(tmp_path / "local-config"), "CLAUDE_NVIM_KEEPALIVE": "2", **env},
            stderr=out, check=False,
            task_status=task_status))
    process.log, process.starts = log, starts
    return process


async def ready(nvim, process, timeout: float = WAIT) -> dict:
    """Once the server there is ready, as Neovim and the launcher know it."""
    with trio.fail_after(timeout):
        while not (found := await nvim.exec_lua(READY)) \
                or process.log.read_text().count(" is ready ") < process.starts:
            if process.returncode is not None:
                raise AssertionError(f"the launcher exited: {process.log.read_text()}")
            await trio.sleep(0.05)
    return found


@pytest.fixture(autouse=True)
def _launcher_log(tmp_path):
    """The launchers' stderr (pytest shows it when the test fails)."""
    yield
    log = tmp_path / "launcher.log"
    if log.exists():
        print(f"launcher.log:\n{log.read_text()}")


def remote_locks(remote_home: Path) -> list[Path]:
    return sorted((remote_home / "claude-config" / "ide").glob("*.lock"))


async def test_over_ssh_every_path_crosses_to_its_side(ssh_server, remote_bin, remote_ws,
                                                       remote_home, nvim, nvim_address, tmp_path):
    await nvim.request("nvim_command", f"cd {remote_ws}")
    async with trio.open_nursery() as nursery:
        process = await start(nursery, launcher(ssh_server, remote_bin, str(remote_ws),
                                                "--serve"), tmp_path, nvim_address)
        await ready(nvim, process)
        (lock,) = remote_locks(remote_home)
        content = json.loads(lock.read_text())
        # The lock names the agent's pid there, alive there, and Claude's folder; it and its
        # folder are private.
        assert content["workspaceFolders"] == [str(remote_ws)]
        assert Path(f"/proc/{content['pid']}").stat().st_uid == ssh_server.user.pw_uid
        assert stat.S_IMODE(lock.stat().st_mode) == 0o600
        assert stat.S_IMODE(lock.parent.stat().st_mode) == 0o700
        async with StandIn.run(stand_in_over_ssh(ssh_server, remote_bin, remote_ws)) as claude:
            await exercise(nvim, claude, str(remote_ws), remote_ws)
        process.terminate()
    assert remote_locks(remote_home) == []


async def test_an_account_there_finds_no_neovim_rpc_anywhere(
        ssh_server, remote_bin, remote_ws, remote_home, nvim, nvim_address, tmp_path):
    """Any process of the account there connects to every socket and port it can find and
    asks each to run Lua: none is Neovim's RPC (the agent's port is a token-checked
    WebSocket), and Claude's connection goes on."""
    async with trio.open_nursery() as nursery:
        process = await start(nursery, launcher(ssh_server, remote_bin, str(remote_ws),
                                                "--serve"), tmp_path, nvim_address)
        await ready(nvim, process)
        port = int(remote_locks(remote_home)[0].stem)
        # All the far side listens on: sshd's port and the agent's, on loopback; no socket.
        far_side = descendants(ssh_server.process.pid)
        assert listening_ports(far_side) == {ssh_server.port, port}
        assert not listening_unix_sockets(far_side)
        # Every socket of the far side's processes, and of the server here (one host here).
        inodes = socket_inodes(far_side | descendants(process.pid))
        done = await trio.to_thread.run_sync(lambda: run_as(
            ssh_server.user, [python_for_others(), str(HOSTILE / "hostile_account.py"),
                              "sockets", ",".join(inodes)], timeout=120))
        answers = json.loads(done.stdout)
        assert f"127.0.0.1:{port}" in answers, done
        assert len(answers) >= 3, answers  # sshd's port, the agent's, the server's here
        # No msgpack-RPC answer ([1, id, error, result]) anywhere: the agent's port is the
        # server's WebSocket, which waits for an HTTP request (or says 400).
        assert not [where for where, got in answers.items() if got.startswith("9401")]
        assert bytes.fromhex(answers[f"127.0.0.1:{port}"]) in (b"", b"HTTP/1.1 400")[:1] \
            or bytes.fromhex(answers[f"127.0.0.1:{port}"]).startswith(b"HTTP/1.1 4")
        assert await nvim.exec_lua(PWNED)
        async with StandIn.run(stand_in_over_ssh(ssh_server, remote_bin, remote_ws)) as claude:
            await claude.connected()
        process.terminate()
    assert remote_locks(remote_home) == []


async def test_an_account_there_writing_to_every_pipe_runs_nothing_here(
        ssh_server, remote_bin, remote_ws, remote_home, nvim, nvim_address, tmp_path):
    """Any process of the account there writes a request to run Lua into every pipe and
    socket of every process of that account (/proc/PID/fd/*; this test's far side), the
    agent's stdin and stdout among them: the connection may break, and Neovim is told;
    Neovim runs nothing."""
    async with trio.open_nursery() as nursery:
        process = await start(nursery, launcher(ssh_server, remote_bin, str(remote_ws),
                                                "--serve"), tmp_path, nvim_address)
        await ready(nvim, process)
        far_side = ",".join(map(str, descendants(ssh_server.process.pid)))
        done = await trio.to_thread.run_sync(lambda: run_as(
            ssh_server.user, [python_for_others(), str(HOSTILE / "hostile_account.py"),
                              "pipes", far_side], timeout=120))
        # sshd's session pipes first (the agent's stdin and stdout), then the agent's if it
        # is still there: whatever got it, the frames broke.
        assert json.loads(done.stdout), done
        with trio.fail_after(30):
            assert await process.wait() == 1
    said = (tmp_path / "launcher.log").read_text()
    assert "broke the protocol" in said or f"the connection to {Sshd.HOST} closed" in said
    assert await nvim.exec_lua(PWNED)
    await gone(remote_home)


def listening_unix_sockets(pids: set[int]) -> set[str]:
    """The Unix sockets the processes ``pids`` listen on (sshd's own forwarding included)."""
    inodes = socket_inodes(pids)
    return {line.split()[-1] for line in Path("/proc/net/unix").read_text().splitlines()[1:]
            if len(line.split()) >= 8 and line.split()[5] == "01" and line.split()[6] in inodes}


def socket_inodes(pids: set[int]) -> set[str]:
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:["):-1])
        except OSError:
            continue
    return inodes


def descendants(pid: int) -> set[int]:
    """``pid`` and all the processes it started, and they started."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_bytes().rsplit(b")", 1)[1]
                                               .split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, grew = {pid}, True
    while grew:
        more = {child for child, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return found


def listening_ports(pids: set[int]) -> set[int]:
    """The TCP ports the processes ``pids`` listen on."""
    inodes = socket_inodes(pids)
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


# Lifetimes


def master_of(launcher_pid: int) -> int:
    """The pid of the launcher's ssh, the agent's connection (``ssh ... -T``)."""
    for pid in descendants(launcher_pid) - {launcher_pid}:
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if argv[0] == b"ssh" and b"-T" in argv:
                return pid
    raise AssertionError("no ssh")


async def gone(remote_home: Path, timeout: float = WAIT) -> None:
    with trio.fail_after(timeout):
        while remote_locks(remote_home):
            await trio.sleep(0.05)


async def test_the_tunnel_dropping_removes_the_lock_and_a_new_start_connects(
        ssh_server, remote_bin, remote_ws, remote_home, nvim, nvim_address, tmp_path):
    await nvim.request("nvim_command", f"cd {remote_ws}")
    command = launcher(ssh_server, remote_bin, str(remote_ws), "--serve")
    async with trio.open_nursery() as nursery:
        process = await start(nursery, command, tmp_path, nvim_address)
        await ready(nvim, process)
        assert len(remote_locks(remote_home)) == 1
        os.kill(master_of(process.pid), signal.SIGKILL)  # the connection drops
        await gone(remote_home)
        with trio.fail_after(WAIT):
            assert await process.wait() == 1
    said = (tmp_path / "launcher.log").read_text()
    assert f"the connection to {Sshd.HOST} closed" in said and "reconnect" in said
    # Neovim is told, and free again: the same start connects again.
    await eventually(nvim, "return package.loaded['claude_nvim.core'].live_server() == nil")
    told = await nvim.request("nvim_exec2", "messages", {"output": True})
    assert f"the connection to {Sshd.HOST} closed" in told["output"]
    async with trio.open_nursery() as nursery:
        process = await start(nursery, command, tmp_path, nvim_address)
        await ready(nvim, process)
        async with StandIn.run(stand_in_over_ssh(ssh_server, remote_bin, remote_ws)) as claude:
            await claude.connected()
            assert (await claude.call_json("getWorkspaceFolders"))["rootPath"] == str(remote_ws)
        process.terminate()
    await gone(remote_home, timeout=WAIT)


async def test_a_connection_that_stops_answering_loses_its_lock_there(
        ssh_server, remote_bin, remote_ws, remote_home, nvim, nvim_address, tmp_path):
    """No FIN comes when a laptop sleeps: the agent's own checks (three keepalives of 2 s
    here) find it out."""
    async with trio.open_nursery() as nursery:
        process = await start(nursery, launcher(ssh_server, remote_bin, str(remote_ws),
                                                "--serve"), tmp_path, nvim_address)
        await ready(nvim, process)
        master = master_of(process.pid)
        os.kill(master, signal.SIGSTOP)
        try:
            await gone(remote_home, timeout=WAIT)
        finally:
            os.kill(master, signal.SIGCONT)
        with trio.fail_after(WAIT):
            assert await process.wait() == 1


# What is missing there


@pytest.mark.parametrize(("option", "value", "said"), [
    ("--remote-claude", "/nowhere/claude",
     f"`/nowhere/claude` is not on {Sshd.HOST}'s PATH: install Claude Code there "
     "(npm install -g @anthropic-ai/claude-code)"),
])
async def test_what_is_missing_there_is_said_with_how_to_install_it(
        ssh_server, remote_bin, remote_ws, nvim_address, tmp_path, option, value, said):
    command = launcher(ssh_server, remote_bin, str(remote_ws), "--serve")
    command[command.index(option) + 1] = value
    done = await trio.run_process([*command[:len(LAUNCHER)], "--nvim", nvim_address,
                                   *command[len(LAUNCHER):]], capture_stderr=True, check=False,
                                  env=environment(tmp_path / "local-config"))
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 1 and len(lines) == 1, lines
    assert lines[0].startswith(f"claude-nvim: {said}")


async def test_a_directory_missing_there_is_said(ssh_server, remote_bin, nvim_address, tmp_path):
    command = launcher(ssh_server, remote_bin, "/nowhere/project", "--serve")
    done = await trio.run_process([*command[:len(LAUNCHER)], "--nvim", nvim_address,
                                   *command[len(LAUNCHER):]], capture_stderr=True, check=False,
                                  env=environment(tmp_path / "local-config"))
    assert done.returncode == 1
    assert done.stderr.decode().strip() == \
        f"claude-nvim: there is no directory /nowhere/project on {Sshd.HOST}"


def test_an_absent_python_is_said_with_how_to_get_one():
    target = Target(name="box", path=None, ssh_host="box")
    none = Probe({"no-python": "", "claude": "/c", "end": ""})
    (said,) = none.problems(target, "python3", "claude")
    assert said.startswith("box has no Python 3 (`python3`, python3, python): install one there")
    assert "--remote-python" in said
    assert Probe({"python": "python3 3.6", "claude": "/c", "agent": "1"}).problems(
        target, "python3", "claude") == []


@pytest.mark.parametrize(("text", "expected"), [
    ("box", ("box", None, "box", ())),
    ("me@box:src/app", ("me@box", "src/app", "me@box", ())),
    ("ssh://me@box:2222/srv/app", ("me@box", "/srv/app", "me@box", ("-p", "2222"))),
    ("ssh://box/~/app", ("box", "~/app", "box", ())),
])
def test_ssh_targets(text, expected):
    target = parse_target(text)
    assert (target.name, target.path, target.ssh_host, target.ssh_options) == expected


@pytest.mark.parametrize("text", ["-oProxyCommand=touch /tmp/x", "ssh://-oProxyCommand=x/p",
                                  "docker://-v/x", "-box:path"])
def test_a_host_that_would_be_an_option_is_refused(text):
    with pytest.raises(TargetError, match=r"'-'|is not HOST"):
        parse_target(text)


def test_container_targets():
    target = parse_target("docker://dev/workspaces/app")
    assert (target.name, target.path) == ("dev", "/workspaces/app")
    assert target.pipe == ("docker", "exec", "-i", "dev")
    assert target.tty == ("docker", "exec", "-i", "-t", "dev")
    via = parse_target("/w", via="kubectl exec -i pod --")
    assert (via.path, via.pipe, via.tty) == ("/w", ("kubectl", "exec", "-i", "pod", "--"),
                                             ("kubectl", "exec", "-i", "pod", "--"))


# One command: the server and claude there


async def test_one_command_runs_claude_there_connected_and_stops_it_all(
        ssh_server, remote_bin, remote_ws, remote_home, nvim, nvim_address, tmp_path):
    await nvim.request("nvim_command", f"cd {remote_ws}")
    command = launcher(ssh_server, remote_bin, str(remote_ws))
    env = environment(tmp_path / "local-config", NVIM=nvim_address)
    async with StandIn.run(command, env=env, stderr=subprocess.DEVNULL) as claude:
        connected = await claude.connected()
        # claude there got what the server published: its port, and --mcp-config.
        (lock,) = remote_locks(remote_home)
        assert connected["connected"] == str(lock) and connected["cwd"] == str(remote_ws)
        assert connected["argv"][0] == "--mcp-config"
        assert (await claude.call_json("getWorkspaceFolders"))["rootPath"] == str(remote_ws)
    assert claude.process.returncode == 0
    await gone(remote_home, timeout=WAIT)


# A container: a mount namespace, reached through nsenter as through `docker exec -i`


async def test_in_a_container_every_path_crosses_to_its_side(nvim, nvim_address, tmp_path):
    here = workspace(tmp_path / "ws")
    inside = tmp_path.parent / f"{tmp_path.name}-container" / "workspace"
    config = tmp_path / "container-config"
    await nvim.request("nvim_command", f"cd {here}")
    claude = inside.parent / "claude"  # outside tmp_path, which the container does not see
    claude.parent.mkdir(parents=True)
    claude.write_text(f'#!/bin/sh\nexec {sys.executable} {STAND_IN} "$@"\n')
    claude.chmod(0o755)
    with container(here, inside) as pid:
        command = [*LAUNCHER, "--via", shlex.join(nsenter(pid)), "--remote-claude",
                   str(claude), "--path-map", f"{inside}={here}", "--serve", str(inside)]
        async with trio.open_nursery() as nursery:
            process = await start(nursery, command, tmp_path, nvim_address,
                                  CLAUDE_CONFIG_DIR=str(config))
            await ready(nvim, process)
            (lock,) = config.glob("ide/*.lock")
            assert json.loads(lock.read_text())["workspaceFolders"] == [str(inside)]
            stand_in = [*nsenter(pid, str(inside)), str(claude)]
            async with StandIn.run(stand_in, env={**os.environ,
                                                  "CLAUDE_CONFIG_DIR": str(config)}) as claude:
                await exercise(nvim, claude, str(inside), here)
            process.terminate()
        with trio.fail_after(WAIT):
            while list(config.glob("ide/*.lock")):
                await trio.sleep(0.05)


# The server's side of the security: a socket others can open is refused.


@pytest.mark.parametrize("address", ["open", "127.0.0.1:6666"])
def test_serve_refuses_a_neovim_others_can_reach(tmp_path, address):
    if address == "open":
        folder = tmp_path / "open"
        folder.mkdir()
        folder.chmod(0o755)
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(folder / "nvim.sock"))
        listener.listen()
        (folder / "nvim.sock").chmod(0o666)
        address = str(folder / "nvim.sock")
    done = subprocess.run([sys.executable, "-m", "claude_nvim", "serve", "--path-map",
                           f"/srv/app={tmp_path}", "--nvim", address], env=environment(tmp_path),
                          capture_output=True, text=True, timeout=60)
    lines = done.stderr.splitlines()
    assert done.returncode == 1 and len(lines) == 1, lines
    assert "other users" in lines[0] or "every user of this host" in lines[0]
    assert not list((tmp_path / "ide").glob("*.lock"))


# From Neovim: the plugin's :ClaudeNvim with a remote target


def plugin_options(server: Sshd, remote_bin: Path, claude: str = "claude") -> list[str]:
    """opts.remote.args: the test's ssh, and where claude is there."""
    return ["--ssh", shlex.join(server.ssh), "--remote-claude", str(remote_bin / claude)]


CLAUDE_TERMINAL = """
local info = require('claude_nvim.terminal').info()
if not info then return '' end
return table.concat(vim.api.nvim_buf_get_lines(info.buf, 0, -1, false), '')  -- wrapped
"""


async def test_claude_nvim_with_a_target_runs_claude_there_from_the_plugin(
        ssh_server, remote_bin, remote_ws, remote_home, tmp_path):
    workspace(tmp_path)
    async with plugin_user(tmp_path, remote={"args": plugin_options(ssh_server, remote_bin)},
                           start_server="startup") as user:
        # A local server runs first (opts.start_server = 'startup'): :ClaudeNvim TARGET
        # switches this Neovim to the one there, and starts Claude there.
        await eventually(user, "return require('claude_nvim').server() ~= nil", timeout=WAIT)
        local_port = await user.exec_lua("return require('claude_nvim').server().port")
        await user.request("nvim_command", f"ClaudeNvim ssh://{Sshd.HOST}{remote_ws}")
        shown = await eventually(user, f"local t = loadstring([[{CLAUDE_TERMINAL}]])() "
                                       "return t:find('\"connected\"', 1, true) and t",
                                 timeout=WAIT)
        (lock,) = remote_locks(remote_home)
        assert str(lock) in shown and str(remote_ws) in shown
        served = await eventually(user, "local s = require('claude_nvim').server() "
                                        "return s and (s.clients or 0) == 1 and s", timeout=20)
        assert served["port"] != local_port
        assert served["claude"]["remote"] == Sshd.HOST
        # A mention from Neovim reaches the Claude there, in its paths.
        await user.request("nvim_command", "ClaudeNvimAdd a.py")
        await eventually(user, f"local t = loadstring([[{CLAUDE_TERMINAL}]])() "
                               f"return t and t:find('{remote_ws}/a.py', 1, true)", timeout=WAIT)
        # The connection drops: the user is told; a new Claude connects again, also while
        # the launcher that told it still ends.
        launcher_pid = await user.exec_lua(
            "for _, c in ipairs(vim.api.nvim_list_chans()) do if c.stream == 'job' and "
            "c.argv and vim.tbl_contains(c.argv, '--serve') then return vim.fn.jobpid(c.id) "
            "end end")
        os.kill(master_of(launcher_pid), signal.SIGKILL)
        await eventually(user, "return vim.fn.execute('messages'):find("
                               f"'the connection to {Sshd.HOST} closed', 1, true)", timeout=WAIT)
        await user.request("nvim_command", "ClaudeNvimNew")
        await eventually(user, "local s = require('claude_nvim').server() "
                               "return s and (s.clients or 0) == 1", timeout=WAIT)
        assert len(remote_locks(remote_home)) == 1
        assert not alive(launcher_pid)


async def test_a_target_in_the_options_serves_from_there_from_the_start(
        ssh_server, remote_bin, remote_ws, remote_home, tmp_path):
    workspace(tmp_path)
    remote = {"target": f"ssh://{Sshd.HOST}{remote_ws}",
              "args": plugin_options(ssh_server, remote_bin)}
    async with plugin_user(tmp_path, remote=remote, start_server="startup") as user:
        # opts.start_server = 'startup': the server there, ready before any command.
        served = await eventually(user, READY, timeout=WAIT)
        assert served["clients"] == 0 and len(remote_locks(remote_home)) == 1
        await user.request("nvim_command", "ClaudeNvim")
        await eventually(user, f"local t = loadstring([[{CLAUDE_TERMINAL}]])() "
                               f"return t:find('\"connected\"', 1, true) "
                               f"and t:find('{remote_ws}', 1, true)", timeout=WAIT)
        await eventually(user, "local s = require('claude_nvim').server() "
                               "return s and (s.clients or 0) == 1", timeout=20)


async def test_what_is_missing_there_is_said_in_the_claude_window(
        ssh_server, remote_bin, remote_ws, tmp_path):
    workspace(tmp_path)
    remote = {"target": f"ssh://{Sshd.HOST}{remote_ws}",
              "args": plugin_options(ssh_server, remote_bin, claude="no-claude")}
    async with plugin_user(tmp_path, remote=remote, start_server="first_use") as user:
        await user.request("nvim_command", "ClaudeNvim")
        # The window of the Claude that did not start says why (its buffer, shown).
        said = await eventually(user, "local t = table.concat(vim.api.nvim_buf_get_lines("
                                      "vim.api.nvim_win_get_buf(vim.fn.win_getid(vim.fn.winnr("
                                      "'$'))), 0, -1, false)) "
                                      "return t:find('claude-nvim: ', 1, true) and t", timeout=WAIT)
        assert f"no-claude` is not on {Sshd.HOST}'s PATH: install Claude Code there" in said


# A hostile agent: what the other side says is read strictly, and nothing of it runs here


@pytest.mark.parametrize(("mode", "refused"), [
    ("rpc", "a frame of an unknown kind"),
    ("bad-ready", "its port is not one"),
    ("flood", f"more than {MAX_CONNECTIONS} connections"),
    ("framed", "a frame of 1073741824 bytes"),
])
async def test_a_hostile_agent_gets_no_neovim_rpc(nvim, nvim_address, tmp_path, mode, refused):
    record = tmp_path / "replies.json"
    await nvim.request("nvim_command", f"cd {workspace(tmp_path / 'ws')}")
    command = [*LAUNCHER, "--via", shlex.join([sys.executable, str(HOSTILE / "hostile_far_side.py"),
                                               mode, str(record)]), "--serve", "/w"]
    async with trio.open_nursery() as nursery:
        process = await start(nursery, command, tmp_path, nvim_address)
        with trio.fail_after(60):
            assert await process.wait() == 1
    said = (tmp_path / "launcher.log").read_text()
    assert f"broke the protocol: {refused}" in said
    assert await nvim.exec_lua(PWNED)
    if mode == "framed":  # msgpack-RPC to the server here: not even HTTP; no token: 401
        replies = json.loads(record.read_text())
        assert not replies["rpc"].startswith("\x94")
        assert replies["no token"].startswith("HTTP/1.1 401"), replies
    # Neovim is free again: no server holds it.
    await eventually(nvim, "return package.loaded['claude_nvim.core'] == nil "
                           "or package.loaded['claude_nvim.core'].live_server() == nil")


def test_frames_are_read_strictly():
    frames = Frames()
    with pytest.raises(ProtocolError, match="before the agent was ready"):
        frames.feed(b"O" + (1).to_bytes(4, "big") + bytes(4))
    frames = Frames()
    ready = b'{"port": 5, "lock": "/l", "mcp_config": "/m"}'
    (got,) = frames.feed(b"R" + bytes(4) + len(ready).to_bytes(4, "big") + ready)
    assert got.kind == b"R"
    # Split anywhere, the frames are the same.
    stream = b"O" + (7).to_bytes(4, "big") + bytes(4) + b"D" + (7).to_bytes(4, "big") \
        + (3).to_bytes(4, "big") + b"abc"
    assert [(f.kind, f.data) for i in range(len(stream))
            for f in frames.feed(stream[i:i + 1])] == [(b"O", b""), (b"D", b"abc")]
    with pytest.raises(ProtocolError, match="opened twice"):
        frames.feed(b"O" + (7).to_bytes(4, "big") + bytes(4))
    with pytest.raises(ProtocolError, match="unknown kind"):
        Frames().feed(frame(b"L", 0, b"{}"))


async def test_what_the_other_side_says_reaches_no_terminal_as_escapes(nvim_address, tmp_path):
    command = [*LAUNCHER, "--via", shlex.join([sys.executable, str(HOSTILE / "hostile_far_side.py"),
                                               "escapes", str(tmp_path / "r")]), "--serve", "/w"]
    done = await trio.run_process([*command[:len(LAUNCHER)], "--nvim", nvim_address,
                                   *command[len(LAUNCHER):]], capture_stderr=True, check=False,
                                  env=environment(tmp_path / "local-config"))
    said = done.stderr.decode()
    assert done.returncode == 1 and "not an absolute path" in said, said
    assert "\x1b" not in said and "\x07" not in said


def test_claude_there_is_run_with_the_host_after_double_dash():
    target = parse_target("ssh://me@box:2222/srv/app")
    command = claude_command(target, ["ssh"], "claude", {"CLAUDE_CODE_SSE_PORT": "5",
                                                         "HOME": "/root"}, ["--resume"])
    assert command[:6] == ["ssh", "-p", "2222", "-t", "--", "me@box"]
    there = shlex.split(command[6])
    assert there[:2] == ["sh", "-lc"] and there[3:] == [
        "claude-nvim", "/srv/app", "env", "CLAUDE_CODE_SSE_PORT=5", "claude", "--resume"]
    box = claude_command(parse_target("docker://dev/w"), ["ssh"], "claude", {}, [])
    assert box[:5] == ["docker", "exec", "-i", "-t", "dev"]
