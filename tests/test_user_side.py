"""The user's side: @-mention commands, and `claude-nvim claude` starting Claude connected."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import trio

from claude_nvim.testing import mcp_client, running_app
from helpers import WAIT, claude_in_a_terminal, handed_over, messages

CLAUDE_NVIM = [sys.executable, "-m", "claude_nvim"]


async def mention(client, after=0):
    return (await client.next_notification("at_mentioned", after=after))["params"]


async def ready(client, nvim, tmp_path):
    """Wait until the server treats the client as listening: its first selection push."""
    await nvim.request("nvim_command", f"edit {tmp_path / 'some.txt'}")
    await client.next_notification("selection_changed")


async def test_send_mentions_the_current_line_or_the_visual_range(client, nvim, tmp_path):
    path = tmp_path / "a.py"
    path.write_text("".join(f"line {i}\n" for i in range(1, 31)))
    await ready(client, nvim, tmp_path)
    await nvim.request("nvim_command", f"edit {path}")
    await nvim.request("nvim_win_set_cursor", 0, [5, 0])
    await nvim.request("nvim_command", "ClaudeNvimSend")
    assert await mention(client) == {"filePath": str(path), "lineStart": 4, "lineEnd": 4}
    seen = len(client.notifications)
    await nvim.request("nvim_input", "10GVjj:ClaudeNvimSend<CR>")
    assert await mention(client, seen) == {"filePath": str(path), "lineStart": 9, "lineEnd": 11}
    seen = len(client.notifications)
    await nvim.request("nvim_command", "20,21ClaudeNvimSend")
    assert await mention(client, seen) == {"filePath": str(path), "lineStart": 19, "lineEnd": 20}


async def test_add_mentions_files_ranges_and_directories(client, nvim, tmp_path):
    path = tmp_path / "b c.py"
    path.write_text("x\n" * 10)
    await ready(client, nvim, tmp_path)
    await nvim.exec_lua("vim.cmd.ClaudeNvimAdd({args = {...}})", str(path))
    assert await mention(client) == {"filePath": str(path)}
    seen = len(client.notifications)
    await nvim.exec_lua("vim.cmd.ClaudeNvimAdd({args = {...}})", str(path), "3", "7")
    assert await mention(client, seen) == {"filePath": str(path), "lineStart": 2, "lineEnd": 6}
    seen = len(client.notifications)
    await nvim.request("nvim_command", "ClaudeNvimAdd .")  # relative to Neovim's cwd
    assert await mention(client, seen) == {"filePath": str(tmp_path)}


async def test_add_refuses_what_does_not_exist(client, nvim, tmp_path):
    await ready(client, nvim, tmp_path)
    await nvim.request("nvim_command", f"ClaudeNvimAdd {tmp_path / 'missing.py'}")
    messages = await nvim.exec_lua("return vim.api.nvim_exec2('messages', {output=true}).output")
    assert "no such file or directory" in messages
    assert await client.no_notification("at_mentioned")


async def test_mentions_wait_for_a_client_and_reach_it_when_it_connects(app, nvim, tmp_path):
    path = tmp_path / "q.py"
    path.write_text("q\n")
    await nvim.request("nvim_command", f"ClaudeNvimAdd {path}")
    await trio.sleep(0.3)  # nobody connected yet
    async with mcp_client(app.port, app.token) as client:
        assert await mention(client) == {"filePath": str(path)}
    messages = await nvim.exec_lua("return vim.api.nvim_exec2('messages', {output=true}).output")
    assert "no Claude is connected yet" in messages


async def test_with_two_claudes_the_latest_to_connect_gets_the_mention(app, client, nvim,
                                                                      tmp_path):
    async with mcp_client(app.port, app.token) as other:
        await ready(client, nvim, tmp_path)
        await ready(other, nvim, tmp_path)
        await nvim.request("nvim_command", f"ClaudeNvimAdd {tmp_path}")
        assert await mention(other) == {"filePath": str(tmp_path)}
        assert await client.no_notification("at_mentioned")
        assert f"sent to the Claude with pid {os.getpid()}" in await messages(nvim)


async def test_neovim_knows_how_many_claudes_listen(app, client, nvim, tmp_path):
    await nvim.exec_lua("""
        _G.said = {}
        vim.api.nvim_create_autocmd('User', {pattern = {'ClaudeNvimConnected',
          'ClaudeNvimDisconnected'}, callback = function(a)
            table.insert(_G.said, a.match .. ' ' .. a.data.clients) end})""")

    async def clients_become(count):
        with trio.fail_after(WAIT):
            while await nvim.exec_lua("return vim.g.claude_nvim_server.clients") != count:
                await trio.sleep(0.05)

    await ready(client, nvim, tmp_path)
    async with mcp_client(app.port, app.token, pid=4343) as other:
        await other.next_notification("selection_changed")
        await clients_become(2)
    await clients_become(1)  # one of two went away
    said = await nvim.exec_lua("return _G.said")  # perhaps "ClaudeNvimConnected 1" first
    assert said[-2:] == ["ClaudeNvimConnected 2", "ClaudeNvimDisconnected 1"]


async def proposal_bar(nvim, client, path):
    """The window bar of the diff ``client`` proposes for ``path`` (then rejected)."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.call_tool, "openDiff", {
            "old_file_path": str(path), "new_file_path": str(path),
            "new_file_contents": "n\n", "tab_name": "a proposal"})
        with trio.fail_after(WAIT):
            while "accepts" not in (winbar := await nvim.exec_lua("return vim.wo.winbar")):
                await trio.sleep(0.05)
        await nvim.request("nvim_command", "ClaudeNvimDiffDeny")
    return winbar


async def test_a_mention_goes_to_the_claude_of_the_terminal_entered_last(app, nvim, tmp_path):
    # Two :terminal buffers, each the home of one Claude: the pid a Claude sends in
    # ide_connected is its terminal's job pid (or a descendant of it), which holds its
    # connection.
    path = tmp_path / "m.py"
    path.write_text("m\n")
    await nvim.request("nvim_command", f"edit {path}")
    editor_win = await nvim.request("nvim_get_current_win")
    async with handed_over(tmp_path / "hand") as receive:
        (win_a, buf_a, pid_a, stream_a), (win_b, buf_b, pid_b, stream_b) = [
            await claude_in_a_terminal(nvim, app.port, receive, tmp_path, name)
            for name in ("a", "b")]
    await nvim.request("nvim_set_current_win", editor_win)
    async with mcp_client(app.port, app.token, pid=pid_a, stream=stream_a) as claude_a, \
            mcp_client(app.port, app.token, pid=pid_b, stream=stream_b) as claude_b:
        for claude in (claude_a, claude_b):
            await claude.next_notification("selection_changed")
        for win, to, other, buf in ((win_a, claude_a, claude_b, buf_a),
                                    (win_b, claude_b, claude_a, buf_b),
                                    (win_a, claude_a, claude_b, buf_a)):
            seen = len(to.notifications), len(other.notifications)
            await nvim.request("nvim_set_current_win", win)  # the user visits its terminal
            await nvim.request("nvim_set_current_win", editor_win)
            await nvim.request("nvim_command", "ClaudeNvimSend")
            assert await mention(to, seen[0]) == {"filePath": str(path), "lineStart": 0,
                                                  "lineEnd": 0}
            assert await other.no_notification("at_mentioned", after=seen[1])
            assert f"sent to the Claude in terminal buffer {buf}" in await messages(nvim)
        # Its diff says whose proposal it is, as several Claudes are connected.
        winbar = await proposal_bar(nvim, claude_b, path)
        assert f"the Claude in terminal buffer {buf_b}" in winbar


async def test_a_claude_that_claims_another_terminals_pid_gets_none_of_its_mentions(
        app, nvim, tmp_path):
    # Before: a token holder that sent the pid of terminal A's job in ide_connected got the
    # mentions meant for A's Claude (the latest to claim a terminal got them), and Neovim named
    # A's terminal for it. A pid is believed only if its process tree holds the connection.
    path = tmp_path / "m.py"
    path.write_text("m\n")
    await nvim.request("nvim_command", f"edit {path}")
    editor_win = await nvim.request("nvim_get_current_win")
    async with handed_over(tmp_path / "hand") as receive:
        win_a, buf_a, pid_a, stream_a = await claude_in_a_terminal(nvim, app.port, receive,
                                                                   tmp_path, "a")
    await nvim.request("nvim_set_current_win", editor_win)
    async with mcp_client(app.port, app.token, pid=pid_a, stream=stream_a) as claude_a, \
            mcp_client(app.port, app.token, pid=pid_a) as impostor:
        for claude in (claude_a, impostor):
            await claude.next_notification("selection_changed")
        await nvim.request("nvim_set_current_win", win_a)
        await nvim.request("nvim_set_current_win", editor_win)
        await nvim.request("nvim_command", "ClaudeNvimSend")
        assert await mention(claude_a) == {"filePath": str(path), "lineStart": 0, "lineEnd": 0}
        assert await impostor.no_notification("at_mentioned")
        assert f"sent to the Claude in terminal buffer {buf_a}" in await messages(nvim)
        # Its diff is not named after A's terminal either.
        winbar = await proposal_bar(nvim, impostor, path)
        assert "terminal buffer" not in winbar and f"pid {pid_a}" not in winbar


async def test_unproven_two_claudes_claiming_one_terminal_the_first_keeps_it(app, nvim,
                                                                            tmp_path):
    # Off Linux (here: the proof replaced by one that cannot tell), a pid is taken at its
    # word, but a second Claude claiming a terminal a connected Claude runs in gets none.
    app.claudes.holds = lambda pid, client, server: None
    await nvim.request("nvim_command", f"edit {tmp_path / 'some.txt'}")
    await nvim.request("nvim_command", "botright split | terminal sleep 60")
    buf, pid = await nvim.exec_lua("return {vim.api.nvim_get_current_buf(), "
                                   "vim.b.terminal_job_pid}")
    await nvim.request("nvim_command", "wincmd p")
    async with mcp_client(app.port, app.token, pid=pid) as first:
        await first.next_notification("selection_changed")
        async with mcp_client(app.port, app.token, pid=pid) as second:
            await second.next_notification("selection_changed")
            with trio.fail_after(WAIT):
                while "two Claudes claim one terminal" not in (said := await messages(nvim)):
                    await trio.sleep(0.05)
            assert (f"two Claudes claim one terminal: the Claude in terminal buffer {buf} "
                    f"keeps it; the other is the Claude with pid {pid}") in said
            await nvim.request("nvim_set_current_win", await nvim.exec_lua(
                "return vim.fn.bufwinid(...)", buf))
            await nvim.request("nvim_command", "wincmd p | ClaudeNvimAdd .")
            assert await mention(first) == {"filePath": str(tmp_path)}
            assert await second.no_notification("at_mentioned")


async def test_a_terminal_whose_job_ended_runs_no_claude(app, nvim):
    # Its pid stays in b:terminal_job_pid, and an unrelated claude may get that pid later:
    # before, that claude was taken for the terminal's.
    await nvim.request("nvim_command", "terminal sleep 60")
    running = await nvim.request("nvim_get_current_buf")
    await nvim.request("nvim_command", "enew | terminal true")
    ended = await nvim.request("nvim_get_current_buf")
    await nvim.exec_lua("vim.fn.jobwait({vim.bo[...].channel}, 5000)", ended)
    assert await nvim.exec_lua("return vim.b[...].terminal_job_pid ~= nil", ended)
    terminals = await nvim.exec_lua("return require('claude_nvim.core').terminals()")
    assert [t["buf"] for t in terminals] == [running]


def fake_claude(tmp_path):
    """A stand-in for `claude`: records what it was given and what it could reach."""
    script = tmp_path / "claude"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, os, sys, glob
        port = os.environ.get("CLAUDE_CODE_SSE_PORT")
        config = os.environ["CLAUDE_CONFIG_DIR"]
        locks = [os.path.basename(p) for p in glob.glob(config + "/ide/*.lock")]
        json.dump({{"argv": sys.argv[1:], "port": port, "locks": locks,
                   "force": os.environ.get("FORCE_CODE_TERMINAL"),
                   "no_proxy": os.environ.get("no_proxy")}},
                  open({str(tmp_path / "seen.json")!r}, "w"))
        sys.exit(7)
        """))
    script.chmod(0o755)
    return script


async def test_claude_command_serves_runs_claude_and_cleans_up(nvim_address, nvim, tmp_path):
    env = {**os.environ, "CLAUDE_NVIM_CLAUDE": str(fake_claude(tmp_path)),
           "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg"), "NVIM": nvim_address}
    env.pop("CLAUDE_CODE_SSE_PORT", None)
    done = await trio.run_process([*CLAUDE_NVIM, "claude", "--resume", "-p", "x"], env=env,
                                  check=False, capture_stderr=True)
    assert done.returncode == 7, done.stderr
    assert done.stderr == b""  # claude owns the terminal: the server logs nothing on it
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["argv"][0] == "--mcp-config"  # ours first, then claude's own
    assert seen["argv"][2] == "--settings"  # its hooks (test_hooks.py)
    assert seen["argv"][4:] == ["--resume", "-p", "x"]
    assert seen["locks"] == [f"{seen['port']}.lock"]
    assert seen["force"] == "true" and "127.0.0.1" in seen["no_proxy"]
    assert list((tmp_path / "cfg" / "ide").iterdir()) == []  # the lock is gone
    assert await nvim.exec_lua("return vim.g.claude_nvim_server") is None


async def test_claude_command_reuses_a_running_server(app, nvim_address, nvim, tmp_path):
    env = {**os.environ, "CLAUDE_NVIM_CLAUDE": str(fake_claude(tmp_path)),
           "CLAUDE_CONFIG_DIR": str(tmp_path / "ide").removesuffix("/ide"), "NVIM": nvim_address}
    for _ in range(2):  # the first `claude` leaves the server as the second finds it
        done = await trio.run_process([*CLAUDE_NVIM, "claude"], env=env, check=False,
                                      capture_stderr=True)
        assert done.returncode == 7, done.stderr
        seen = json.loads((tmp_path / "seen.json").read_text())
        assert seen["port"] == str(app.port)
        assert seen["argv"] == app.claude_args  # what the running server published
    assert app.lock_path.exists()  # the running server is untouched, in Neovim too:
    assert await nvim.exec_lua("return { vim.fn.exists(':ClaudeNvimSend'),"
                               " vim.env.CLAUDE_CODE_SSE_PORT }") == [2, str(app.port)]


async def test_claude_command_gives_claude_only_what_the_running_server_published(
        nvim_address, nvim, tmp_path):
    with trio.socket.socket() as s:  # a port nobody listens on
        await s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # This Neovim's server is said to be there (a live channel claims it), not yet ready (it
    # published nothing for a claude), and a lock with another token says it listens.
    await nvim.exec_lua("vim.g.claude_nvim_server = {channel = select(1, ...), pid = 1,"
                        " port = select(2, ...)}", nvim.channel_id, port)
    ide = tmp_path / "cfg" / "ide"
    ide.mkdir(parents=True, mode=0o700)
    (ide / f"{port}.lock").write_text(json.dumps({
        "pid": os.getpid(), "workspaceFolders": [str(tmp_path)], "ideName": "Neovim",
        "transport": "ws", "authToken": "stale-token"}))
    env = {**os.environ, "CLAUDE_NVIM_CLAUDE": str(fake_claude(tmp_path)),
           "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg"), "NVIM": nvim_address}
    with trio.fail_after(WAIT):
        done = await trio.run_process([*CLAUDE_NVIM, "claude"], env=env, cwd=tmp_path,
                                      check=False, capture_stderr=True)
    assert done.returncode == 7, done.stderr
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["port"] == str(port)
    assert "--mcp-config" not in seen["argv"]


def test_claude_command_without_a_neovim_explains(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NVIM"}
    done = subprocess.run([*CLAUDE_NVIM, "claude"], env=env, capture_output=True, text=True,
                          timeout=WAIT)
    assert done.returncode == 2
    assert "claude-nvim claude --nvim" in done.stderr


async def test_a_mention_nobody_receives_expires_with_a_message(nvim_address, nvim, tmp_path):
    async with running_app(nvim_address, lock_directory=tmp_path / "ide",
                           mention_queue_seconds=0.2) as app:
        # An 80-column terminal: the messages are wider, and must not stop Neovim at a prompt.
        await nvim.request("nvim_ui_attach", 80, 24, {"ext_linegrid": True})
        await nvim.request("nvim_command", f"ClaudeNvimAdd {tmp_path}")
        with trio.fail_after(WAIT):
            while "dropped" not in (messages := await nvim.exec_lua(
                    "return vim.api.nvim_exec2('messages', {output=true}).output")):
                await trio.sleep(0.05)
        assert "no Claude connected within 0.2 s: 1 mention(s) dropped; start claude and send " \
            "again" in messages
        assert (await nvim.request("nvim_get_mode"))["blocking"] is False
        async with mcp_client(app.port, app.token) as client:  # a late client gets nothing stale
            await ready(client, nvim, tmp_path)
            assert await client.no_notification("at_mentioned")


async def test_closing_the_terminal_stops_claude_and_removes_the_lock(nvim_address, tmp_path):
    import signal
    sleeper = tmp_path / "claude"
    sleeper.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    sleeper.chmod(0o755)
    config = tmp_path / "cfg"
    env = {**os.environ, "CLAUDE_NVIM_CLAUDE": str(sleeper), "CLAUDE_CONFIG_DIR": str(config),
           "NVIM": nvim_address}
    process = await trio.lowlevel.open_process([*CLAUDE_NVIM, "claude"], env=env)
    with trio.fail_after(WAIT):
        while not list(config.glob("ide/*.lock")):
            await trio.sleep(0.05)
    process.send_signal(signal.SIGHUP)  # what closing the :terminal sends
    with trio.fail_after(WAIT):
        await process.wait()
    assert list((config / "ide").iterdir()) == []  # no lock, no private config left


def test_claude_command_help_is_its_own_and_says_claudes_options_follow():
    env = {k: v for k, v in os.environ.items() if k != "NVIM"}
    done = subprocess.run([*CLAUDE_NVIM, "claude", "--help"], env=env, capture_output=True,
                          text=True, timeout=WAIT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: claude-nvim claude [-h] [--nvim ADDR]")
    assert "--log-file" in done.stdout and "claude's own" in done.stdout


async def test_claude_command_options_go_before_claudes(nvim_address, tmp_path):
    env = {**os.environ, "CLAUDE_NVIM_CLAUDE": str(fake_claude(tmp_path)),
           "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    env.pop("NVIM", None)
    env.pop("CLAUDE_CODE_SSE_PORT", None)
    log_file = tmp_path / "claude-nvim.log"
    done = await trio.run_process(
        [*CLAUDE_NVIM, "claude", "--log-file", str(log_file), "--nvim", nvim_address,
         "-p", "x", "--log-file", "claude's"], env=env, check=False, capture_stderr=True)
    assert done.returncode == 7, done.stderr
    assert json.loads((tmp_path / "seen.json").read_text())["argv"][4:] == [
        "-p", "x", "--log-file", "claude's"]
    assert "listening on ws://127.0.0.1:" in log_file.read_text()
    # After `--`, all is claude's.
    done = await trio.run_process([*CLAUDE_NVIM, "claude", f"--nvim={nvim_address}", "--",
                                   "--help"], env=env, check=False, capture_stderr=True)
    assert done.returncode == 7, done.stderr
    assert json.loads((tmp_path / "seen.json").read_text())["argv"][4:] == ["--help"]
    # A `--` of claude's own: what follows is its prompt, and --mcp-config comes before it.
    done = await trio.run_process([*CLAUDE_NVIM, "claude", f"--nvim={nvim_address}", "-p",
                                   "--", "--some text"], env=env, check=False,
                                  capture_stderr=True)
    assert done.returncode == 7, done.stderr
    argv = json.loads((tmp_path / "seen.json").read_text())["argv"]
    assert argv[0] == "--mcp-config" and argv[4:] == ["-p", "--", "--some text"]


def test_claude_command_failures_are_one_line(nvim_address, tmp_path):
    config_file = tmp_path / "a-file"
    config_file.write_text("")
    env = {**os.environ, "CLAUDE_NVIM_CLAUDE": str(fake_claude(tmp_path)),
           "CLAUDE_CONFIG_DIR": str(config_file)}
    for address, cause in ((str(tmp_path / "none.sock"), "cannot reach Neovim at"),
                           (nvim_address, f"cannot write the lock file in {config_file}/ide")):
        done = subprocess.run([*CLAUDE_NVIM, "claude", "--nvim", address], env=env,
                              capture_output=True, text=True, timeout=WAIT)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.splitlines()) == 1
        assert done.stderr.startswith(f"claude-nvim: {cause}")
        assert not (tmp_path / "seen.json").exists()  # claude never ran


@pytest.mark.parametrize("options", ["", "set cmdheight=0", "set shortmess-=T"])
async def test_a_message_wider_than_the_screen_never_stops_neovim_at_a_prompt(
        app, nvim, options):
    await nvim.request("nvim_ui_attach", 80, 24, {"ext_linegrid": True})
    if options:
        await nvim.request("nvim_command", options)
    said = "Claude's edit of " + "/very/long/path" * 10 + " is not shown"
    with trio.fail_after(WAIT):  # a prompt would hold this call
        await nvim.exec_lua("package.loaded['claude_nvim.core'].tell(...)", said, "WARN")
    assert (await nvim.request("nvim_get_mode"))["blocking"] is False
    messages = await nvim.exec_lua("return vim.api.nvim_exec2('messages', {output=true}).output")
    assert "claude-nvim: Claude's edit of /very/long/path" in messages  # cut at worst
