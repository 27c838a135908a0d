"""``claude-nvim serve`` as a user runs it: a real process, real signals, a real Neovim."""

from __future__ import annotations

import importlib.metadata
import json
import os
import resource
import shutil
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

import pytest
import trio

import claude_nvim
from claude_nvim.testing import mcp_client
from helpers import WAIT, environment

SERVE = [sys.executable, "-m", "claude_nvim", "serve"]


async def wait_for_lock(config_dir: Path, process: trio.Process,
                        ignore: Sequence[Path] = ()) -> tuple[Path, dict]:
    with trio.fail_after(WAIT):
        while True:
            ide = config_dir / "ide"
            locks = [p for p in ide.glob("*.lock") if p not in ignore] if ide.exists() else []
            if locks:
                return locks[0], json.loads(locks[0].read_text())
            assert process.poll() is None, "serve exited early"
            await trio.sleep(0.02)


async def stop(process: trio.Process, signum: int | None = None) -> int:
    if signum is not None:
        process.send_signal(signum)
    with trio.fail_after(WAIT):
        return await process.wait()


def test_serve_without_a_neovim_says_how_to_run_it(tmp_path):
    done = subprocess.run(SERVE, env=environment(tmp_path), capture_output=True, text=True,
                          timeout=WAIT)
    assert done.returncode == 2
    assert ":terminal" in done.stderr and "--nvim" in done.stderr
    assert not (tmp_path / "ide").exists() or not list((tmp_path / "ide").iterdir())


def test_version():
    done = subprocess.run([sys.executable, "-m", "claude_nvim", "--version"],
                          capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 0 and done.stdout.startswith("claude-nvim ")


async def test_the_version_is_the_same_everywhere(app, nvim):
    installed = importlib.metadata.version("claude-nvim")
    done = await trio.run_process([sys.executable, "-m", "claude_nvim", "--version"],
                                  capture_stdout=True)
    assert done.stdout.decode().strip() == f"claude-nvim {installed}"
    async with mcp_client(app.port, app.token, initialize=False) as client:
        answer = await client.initialize()
    assert answer["serverInfo"] == {"name": "claude-nvim", "version": installed}
    # What Neovim shows of the server (:lua =vim.api.nvim_get_chan_info(id).client).
    client_info = (await nvim.request("nvim_get_chan_info", app.editor.channel_id))["client"]
    version = client_info["version"]
    assert client_info["name"] == "claude-nvim"
    assert installed.startswith(f"{version['major']}.{version['minor']}.{version['patch']}")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
async def test_signals_stop_serve_and_remove_the_lock(processes, nvim_address, tmp_path, signum):
    process = await processes.start(
        [*SERVE, "--nvim", nvim_address], env=environment(tmp_path), stderr=subprocess.PIPE)
    lock, content = await wait_for_lock(tmp_path, process)
    async with mcp_client(int(lock.stem), content["authToken"]) as client:
        assert (await client.request("ping"))["result"] == {}
    status = await stop(process, signum)
    assert status in (0, 130)
    assert not lock.exists()


async def test_serve_starts_and_stops_beside_bogus_locks(processes, nvim_address, nvim, tmp_path,
                                                          plant_bogus_locks):
    nvim_pid = await nvim.exec_lua("return vim.fn.getpid()")  # they look like this Neovim's
    planted = plant_bogus_locks(tmp_path / "ide", folder=tmp_path, pid=nvim_pid)
    process = await processes.start(
        [*SERVE, "--nvim", nvim_address], env=environment(tmp_path), stderr=subprocess.PIPE,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30)))
    try:
        lock, content = await wait_for_lock(tmp_path, process, ignore=planted)
        async with mcp_client(int(lock.stem), content["authToken"]) as client:
            assert (await client.request("ping"))["result"] == {}
        assert await stop(process, signal.SIGTERM) == 0
    finally:
        process.kill()
    assert not lock.exists()
    assert all(p.is_symlink() or p.exists() for p in planted)  # not ours to remove


@pytest.mark.parametrize("kind", ["symlink", "someone else's"])
def test_serve_refuses_a_lock_directory_it_cannot_trust(nvim_address, tmp_path, kind):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    if kind == "symlink":
        (tmp_path / "ide").symlink_to(elsewhere)
    elif os.geteuid() == 0:
        elsewhere.rename(tmp_path / "ide")
        os.chown(tmp_path / "ide", 65534, 65534)
        elsewhere = tmp_path / "ide"
    else:
        pytest.skip("only root can make a directory someone else's")
    done = subprocess.run([*SERVE, "--nvim", nvim_address], env=environment(tmp_path),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith(f"claude-nvim: the lock directory {tmp_path / 'ide'} ")
    assert "remove it" in done.stderr and len(done.stderr.splitlines()) == 1
    assert list(elsewhere.iterdir()) == []
    assert stat.S_IMODE(elsewhere.stat().st_mode) == 0o755  # no chmod through the link


async def test_serve_exits_when_neovim_quits(processes, tmp_path):
    from claude_nvim._nvim.headless import headless_nvim
    with headless_nvim(cwd=tmp_path) as (address, nvim_process):
        process = await processes.start(
            [*SERVE, "--nvim", address], env=environment(tmp_path), stderr=subprocess.PIPE)
        lock, _ = await wait_for_lock(tmp_path, process)
        nvim_process.terminate()
        assert await stop(process) == 0
        assert not lock.exists()
        stderr = await process.stderr.receive_some(65536)
        assert b"Neovim went away" in stderr


async def test_serve_exits_cleanly_when_neovim_quits_as_it_announces_itself(processes, tmp_path):
    """Neovim quits between the lock written and the rest of the start (here: at once, from
    the announcement's autocmd): the server has started, and leaves as after any quit."""
    from claude_nvim._nvim.headless import headless_nvim
    with headless_nvim(cwd=tmp_path, args=("--clean", "--cmd",
                                           "autocmd User ClaudeNvimServerReady qa!")) \
            as (address, _):
        process = await processes.start(
            [*SERVE, "--nvim", address], env=environment(tmp_path), stderr=subprocess.PIPE)
        assert await stop(process) == 0
        assert list((tmp_path / "ide").glob("*.lock")) == []
        stderr = await process.stderr.receive_some(65536)
        assert b"Neovim went away" in stderr


async def test_a_second_serve_refuses_and_names_the_first(processes, nvim_address, tmp_path):
    first = await processes.start(
        [*SERVE, "--nvim", nvim_address], env=environment(tmp_path), stderr=subprocess.PIPE)
    try:
        lock, _ = await wait_for_lock(tmp_path, first)
        second = await trio.run_process(
            [*SERVE, "--nvim", nvim_address], env=environment(tmp_path / "2"),
            capture_stderr=True, check=False)
        assert second.returncode == 1
        assert f"port {lock.stem}".encode() in second.stderr
        assert f"pid {first.pid}".encode() in second.stderr
        assert lock.exists()
    finally:
        await stop(first, signal.SIGTERM)


async def test_disable_leaves_a_tool_out(processes, nvim_address, tmp_path):
    process = await processes.start(
        [*SERVE, "--nvim", nvim_address, "--disable", "getDiagnostics", "--disable", "getDiag"],
        env=environment(tmp_path, CLAUDE_NVIM_DISABLE="getOpenEditors"), stderr=subprocess.PIPE)
    try:
        lock, content = await wait_for_lock(tmp_path, process)
        async with mcp_client(int(lock.stem), content["authToken"]) as client:
            names = {t["name"] for t in (await client.result("tools/list"))["tools"]}
            assert "getCurrentSelection" in names
            assert not names & {"getDiagnostics", "getOpenEditors"}
            reply = await client.request("tools/call", {"name": "getDiagnostics"})
            assert reply["error"]["code"] == -32601
    finally:
        await stop(process, signal.SIGTERM)
    warnings = [line for line in (await read_all(process.stderr)).decode().splitlines()
                if "WARNING" in line]
    assert len(warnings) == 1 and "'getDiag': no tool or plugin has that name" in warnings[0]


async def test_headless_serves_a_private_neovim_and_stops_it(processes, tmp_path):
    process = await processes.start(
        [*SERVE, "--headless"], env=environment(tmp_path), cwd=tmp_path, stderr=subprocess.PIPE)
    lock, content = await wait_for_lock(tmp_path, process)
    assert content["workspaceFolders"] == [str(tmp_path)]
    nvim_pid = content["pid"]
    async with mcp_client(int(lock.stem), content["authToken"]) as client:
        assert (await client.call_json("getOpenEditors"))["tabs"] == []
    assert await stop(process, signal.SIGTERM) == 0
    assert not lock.exists()
    with trio.fail_after(WAIT):
        while Path(f"/proc/{nvim_pid}").exists() and "Z" not in _state(nvim_pid):
            await trio.sleep(0.02)


async def test_headless_says_what_to_do_next_and_ctrl_c_gives_one_stop_reason(processes,
                                                                          tmp_path):
    process = await processes.start(
        [*SERVE, "--headless"], env=environment(tmp_path), cwd=tmp_path,
        stderr=subprocess.PIPE)  # in a session of its own
    lock, _ = await wait_for_lock(tmp_path, process)
    stderr = ""
    with trio.fail_after(WAIT):  # the user reads what to do, then presses Ctrl-C
        while "Ctrl-C stops" not in stderr:
            chunk = await process.stderr.receive_some(65536)
            assert chunk, stderr  # ended before it was ready
            stderr += chunk.decode()
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: the headless Neovim gets it too
    assert await stop(process) == 130
    stderr += (await read_all(process.stderr)).decode()
    assert f"port {lock.stem}; run `claude --ide` in {tmp_path}" in stderr
    stop_reasons = [line for line in stderr.splitlines() if "stopped" in line]
    assert len(stop_reasons) == 1 and stop_reasons[0].endswith("stopped: interrupted"), stderr


async def read_all(stream: trio.abc.ReceiveStream) -> bytes:
    data = b""
    while chunk := await stream.receive_some(65536):
        data += chunk
    return data


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0]
    except OSError:
        return "Z"


def test_an_unreachable_neovim_is_an_error_and_options_go_after_the_command(tmp_path):
    done = subprocess.run([*SERVE, "--nvim", str(tmp_path / "none.sock"), "--log-level",
                           "warning"], env=environment(tmp_path), capture_output=True,
                          text=True, timeout=WAIT)
    assert one_line_of_error(done).startswith(
        f"claude-nvim: cannot reach Neovim at {tmp_path / 'none.sock'}")


def one_line_of_error(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a failed command printed, after checking that it failed so."""
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("claude-nvim: ") and "; " in lines[0]  # cause; what to do
    return lines[0]


def test_a_taken_port_is_one_line_of_error_and_the_traceback_is_for_debug(nvim_address,
                                                                         tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [*SERVE, "--nvim", nvim_address, "--port", str(port)]
        done = subprocess.run(command, env=environment(tmp_path), capture_output=True,
                              text=True, timeout=WAIT)
        line = one_line_of_error(done)
        assert f"port {port} is in use" in line and "--port" in line
        log_file = tmp_path / "debug.log"
        subprocess.run([*command, "--log-level", "debug", "--log-file", str(log_file)],
                       env=environment(tmp_path), capture_output=True, timeout=WAIT)
        assert "Traceback" in log_file.read_text()
    assert not list((tmp_path / "ide").glob("*.lock"))


@pytest.mark.parametrize("config_dir", ["a file", "/proc/self", "read-only"])
def test_an_unusable_config_dir_is_one_line_of_error(nvim_address, tmp_path, config_dir):
    if config_dir == "a file":
        config_dir = tmp_path / "file"
        config_dir.write_text("")
    elif config_dir == "read-only":
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only directories")
        config_dir = tmp_path / "read-only"
        config_dir.mkdir(mode=0o500)
    done = subprocess.run([*SERVE, "--nvim", nvim_address], env=environment(config_dir),
                          capture_output=True, text=True, timeout=WAIT)
    line = one_line_of_error(done)
    assert f"cannot write the lock file in {Path(config_dir) / 'ide'}" in line
    assert "CLAUDE_CONFIG_DIR" in line


def test_neovim_quitting_during_start_up_is_one_line_of_error(tmp_path):
    from claude_nvim._nvim.headless import headless_nvim
    # It quits when serve, half started, names itself (nvim_set_client_info).
    quits = ("--clean", "--cmd", "autocmd ChanInfo * qa!")
    with headless_nvim(cwd=tmp_path, args=quits) as (address, _nvim):
        done = subprocess.run([*SERVE, "--nvim", address], env=environment(tmp_path),
                              capture_output=True, text=True, timeout=WAIT)
    assert "Neovim" in one_line_of_error(done)
    assert not list((tmp_path / "ide").glob("*.lock"))


@pytest.mark.parametrize("nvim", ["false", "missing"])
def test_a_headless_neovim_that_does_not_start_is_one_line_of_error(tmp_path, nvim):
    path = shutil.which("false") if nvim == "false" else str(tmp_path / "no-nvim")
    done = subprocess.run([*SERVE, "--headless"], env=environment(tmp_path,
                          CLAUDE_NVIM_NVIM=path), cwd=tmp_path, capture_output=True,
                          text=True, timeout=WAIT)
    line = one_line_of_error(done)
    assert f"cannot start `{path} --headless`" in line and "CLAUDE_NVIM_NVIM" in line


def test_an_unwritable_log_file_is_one_line_of_error(tmp_path):
    done = subprocess.run([*SERVE, "--log-file", str(tmp_path / "no" / "such.log")],
                          env=environment(tmp_path), capture_output=True, text=True,
                          timeout=WAIT)
    assert "cannot open the log file" in one_line_of_error(done)


async def test_the_token_never_reaches_the_log(processes, nvim_address, tmp_path):
    log_file = tmp_path / "server.log"
    process = await processes.start(
        [*SERVE, "--nvim", nvim_address, "--log-level", "debug", "--log-file", str(log_file)],
        env=environment(tmp_path), stderr=subprocess.PIPE)
    lock, content = await wait_for_lock(tmp_path, process)
    async with mcp_client(int(lock.stem), content["authToken"]) as client:
        await client.call_tool("getOpenEditors")
    with pytest.raises(Exception):  # noqa: B017 (a wrong token is refused, however it is)
        wrong = content["authToken"][:-1] + ("1" if content["authToken"].endswith("0") else "0")
        async with mcp_client(int(lock.stem), wrong):
            pass
    await stop(process, signal.SIGTERM)
    text = log_file.read_text()
    assert "refused a connection: HTTP 401" in text and "client 1 connected" in text
    assert content["authToken"] not in text
    assert content["authToken"][:-1] not in text


def test_a_checkout_that_was_never_installed_says_so_in_one_line(tmp_path):
    # PYTHONPATH=src python -m claude_nvim with the dependencies installed: the package runs,
    # but without its metadata, so without the entry points that are its built-in tools.
    site = tmp_path / "site"
    site.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if "claude_nvim" not in entry.name:  # this package's own, editable install included
            (site / entry.name).symlink_to(entry)
    checkout = tmp_path / "src"
    checkout.mkdir()
    (checkout / "claude_nvim").symlink_to(Path(claude_nvim.__file__).parent)
    env = environment(tmp_path / "config", PYTHONPATH=f"{checkout}{os.pathsep}{site}")
    for command in (["serve", "--headless"], ["tools"]):
        done = subprocess.run([sys.executable, "-S", "-m", "claude_nvim", *command], env=env,
                              cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=60)
        assert (done.returncode, done.stdout) == (1, ""), done
        assert done.stderr.startswith("claude-nvim: ") and done.stderr.count("\n") == 1
        assert "never installed" in done.stderr and "pip install -e ." in done.stderr
