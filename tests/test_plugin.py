"""The repository as a Neovim plugin: a real headless Neovim with the checkout on 'runtimepath',
a UI attached from a second RPC client, and a stand-in `claude` on PATH that connects like the
CLI does (no real claude needed; plugin_kit.py's, with the fixtures `claude_dir` and `user`)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from claude_nvim import __version__
from claude_nvim._claudes.processes import parent_pid
from claude_nvim._errors import EditorError
from claude_nvim._nvim.headless import find_nvim, headless_nvim
from claude_nvim.testing import attached_editor, mcp_client, running_app
from helpers import WAIT, PendingDiff, diff_args, eventually, handed_over, type_into
from plugin_kit import (
    ROOT,
    TABLINE,
    alive,
    claude_started,
    claudes_started,
    plugin_args,
    plugin_user,
)

COMMANDS = ["ClaudeNvim", "ClaudeNvimNew", "ClaudeNvimSwitch", "ClaudeNvimFocus",
            "ClaudeNvimSend", "ClaudeNvimAdd", "ClaudeNvimDiffAccept", "ClaudeNvimDiffDeny",
            "ClaudeNvimHunkAccept", "ClaudeNvimHunkReject", "ClaudeNvimReview",
            "ClaudeNvimRevert", "ClaudeNvimInstall", "ClaudeNvimRename"]

# Whether the Claude of terminal buf runs (a held one's terminal has no job).
RUNS = """local function RUNS(buf)
  for _, c in ipairs(require('claude_nvim.terminal').list()) do
    if c.buf == buf then return true end
  end
  return false
end
"""

TERMINAL = RUNS + """
local info = require('claude_nvim.terminal').info()
if info == nil or info.job == nil then return vim.NIL end  -- none, or waiting for its server
local win = info.win
return { buf = info.buf, job = info.job, shown = win ~= nil,
         current = win ~= nil and win == vim.api.nvim_get_current_win(),
         pos = win and vim.api.nvim_win_get_position(win), width = win and
         vim.api.nvim_win_get_width(win), height = win and vim.api.nvim_win_get_height(win),
         float = win and vim.api.nvim_win_get_config(win).relative ~= '',
         tabs = #vim.api.nvim_list_tabpages(), running = RUNS(info.buf) }
"""


async def terminal_mode(nvim) -> None:
    """Wait for Terminal mode: started from a callback (claude started once its server is
    ready), :startinsert takes effect when Neovim next waits for input."""
    await eventually(nvim, "return vim.api.nvim_get_mode().mode == 't'")


async def test_the_commands_exist_at_start_up(user):
    exists = await user.exec_lua("return vim.tbl_map(function(c) return vim.fn.exists(':' .. c) "
                                 "end, {...})", *COMMANDS)
    assert exists == [2] * len(COMMANDS)
    assert await user.exec_lua("return vim.g.claude_nvim_server") is None  # no server yet
    await user.request("nvim_command", "ClaudeNvimDiffAccept")  # no E492: says why not
    messages = await user.exec_lua("return vim.api.nvim_exec2('messages', {output=true}).output")
    assert "no pending diff here" in messages
    assert await user.exec_lua("return require('claude_nvim').status()") == ""


# README's keys, mapped as lazy.nvim maps a spec's `keys` (vim.keymap.set, `desc`, `mode`).
MAP_README_KEYS = """
for _, key in ipairs(...) do
  vim.keymap.set(key.mode, key.lhs, key.rhs, { desc = key.desc })
end
"""


def readme_keys() -> list[dict]:
    """The `keys` of README's lazy.nvim spec, as Lua would read them."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"^  keys = \{\n(.*?)^  \},", readme, re.M | re.S)
    assert block, "README's full lazy.nvim spec has no `keys = { ... },`"
    keys = []
    for lhs, rhs, rest in re.findall(r'\{ "([^"]+)", "([^"]*)",(.*)\},', block.group(1)):
        modes = re.search(r"mode = \{ (.*?) \}", rest)
        keys.append({"lhs": lhs, "rhs": rhs, "desc": re.search(r'desc = "([^"]+)"', rest).group(1),
                     "mode": re.findall(r'"(\w)"', modes.group(1)) if modes else ["n"]})
    return keys


async def test_the_readmes_keys_reach_the_commands_through_plug_mappings(user, claude_dir):
    keys = readme_keys()
    assert {"<leader>cc", "<leader>cs", "<leader>ca"} <= {k["lhs"] for k in keys}
    assert all(k["desc"] for k in keys)  # which-key names them
    await user.exec_lua(MAP_README_KEYS, keys)
    for key in keys:
        for m in key["mode"]:
            if key["rhs"].startswith("<Plug>"):  # each exists, and runs a command that exists
                rhs = await user.exec_lua("return vim.fn.maparg(...)", key["rhs"], m)
                assert re.fullmatch(r"(<Cmd>|:)ClaudeNvim\w*!?<CR>", rhs), (key, m, rhs)
                name = re.search(r"ClaudeNvim\w*", rhs).group(0)
                assert await user.exec_lua("return vim.fn.exists(':' .. ...)", name) == 2
            else:
                assert key["rhs"] == "" and key["desc"] == "+claude"  # the group, for which-key
    path = claude_dir / "a.py"
    path.write_text("".join(f"line {i}\n" for i in range(1, 11)))
    await user.request("nvim_command", f"edit {path}")
    await user.request("nvim_input", "\\cc")  # <leader>cc: Claude opens, focused
    started = await eventually(user, TERMINAL)
    assert started["shown"] and started["current"]
    await terminal_mode(user)
    await user.request("nvim_input", "<C-\\><C-n>")
    await user.request("nvim_command", "wincmd p")
    await user.request("nvim_win_set_cursor", 0, [3, 0])
    await user.request("nvim_input", "Vj\\cs")  # <leader>cs on two lines in Visual mode
    mentions = claude_dir / "mentions.jsonl"
    with trio.fail_after(20):
        while not (mentions.exists() and mentions.read_text().endswith("\n")):
            await trio.sleep(0.05)
    assert json.loads(mentions.read_text()) == {"filePath": str(path), "lineStart": 2,
                                                "lineEnd": 3}


STATE_GROUPS = {"ClaudeNvimWorking": "DiagnosticInfo", "ClaudeNvimWaiting": "DiagnosticWarn",
                "ClaudeNvimDone": "DiagnosticOk", "ClaudeNvimToReview": "DiagnosticHint"}
LINKS = ("return vim.tbl_map(function(name) return vim.api.nvim_get_hl(0, { name = name }) "
         "end, { ... })")


async def test_the_states_highlight_groups_are_defaults_that_survive_a_colorscheme(tmp_path):
    """Defined at start-up as defaults: a user's own definition wins, and :colorscheme (which
    clears every group) leaves them defined."""
    mine = ("--cmd", "highlight ClaudeNvimWaiting guifg=#ff0000")
    with headless_nvim(cwd=tmp_path, args=(*mine, *plugin_args())) as (address, _process):
        async with attached_editor(address) as nvim:
            groups = dict(zip(STATE_GROUPS, await nvim.exec_lua(LINKS, *STATE_GROUPS),
                              strict=True))
            await nvim.request("nvim_command", "colorscheme default")
            again = await nvim.exec_lua(LINKS, *STATE_GROUPS)
    assert groups.pop("ClaudeNvimWaiting") == {"fg": 0xFF0000}  # the user's
    assert {name: g.get("link") for name, g in groups.items()} == {
        name: STATE_GROUPS[name] for name in groups}
    assert [g.get("link") for g in again] == list(STATE_GROUPS.values())


async def test_toggle_hides_and_shows_the_same_running_claude(user, claude_dir):
    await user.request("nvim_command", "ClaudeNvim --resume")
    first = await eventually(user, TERMINAL)
    assert first["current"] and first["running"]
    assert first["pos"] == [0, 120 - 48] and first["width"] == 48  # right, 40 %
    await terminal_mode(user)
    started = await claude_started(claude_dir)
    assert started["argv"][0] == "--mcp-config"  # what the server published, then the user's
    assert started["argv"][2] == "--settings"  # its hooks (test_hooks.py)
    assert started["argv"][4:] == ["--resume"]
    await user.request("nvim_input", "<C-\\><C-n>")
    await user.request("nvim_command", "ClaudeNvim")  # hide: claude keeps running
    hidden = await user.exec_lua(TERMINAL)
    assert not hidden["shown"] and hidden["running"] and alive(started["pid"])
    assert hidden["buf"] == first["buf"]
    assert await user.exec_lua("return #vim.api.nvim_list_wins()") == 1
    await user.request("nvim_command", "ClaudeNvim")  # the same terminal, back
    shown = await user.exec_lua(TERMINAL)
    assert shown["current"] and shown["buf"] == first["buf"] and shown["job"] == first["job"]
    await eventually(user, "return vim.api.nvim_get_mode().mode == 't'")
    await user.request("nvim_command", "ClaudeNvimFocus")  # back to the file
    assert not (await user.exec_lua(TERMINAL))["current"]
    await user.request("nvim_command", "ClaudeNvimFocus")
    assert (await user.exec_lua(TERMINAL))["current"]
    await type_into(user, first["buf"], "exit\r")
    await eventually(user, "return require('claude_nvim.terminal').info() == nil")
    assert await user.exec_lua("return {#vim.api.nvim_list_wins(), "
                               "vim.api.nvim_buf_is_valid(select(1, ...))}", first["buf"]) == [
        1, False]  # its window and buffer are gone with it


async def test_a_claude_the_plugin_starts_tells_its_state_through_its_hooks(user, claude_dir):
    await user.exec_lua("_G.seen = {}; vim.api.nvim_create_autocmd('User', { pattern = "
                        "{ 'ClaudeNvimWorking', 'ClaudeNvimDone' }, callback = function(ev) "
                        "table.insert(_G.seen, { ev.match, ev.data.terminal }) end })")
    await user.request("nvim_command", "ClaudeNvim")
    started = await eventually(user, TERMINAL)
    await claude_started(claude_dir)
    first = "local c = ((vim.g.claude_nvim_server or {}).claudes or {})[1]; return c and "
    assert (await eventually(user, first + "c"))["state"] == "unknown"  # no hook came yet
    await type_into(user, started["buf"], "prompt Fix it\r")
    working = await eventually(user, first + "c.state == 'working' and c")
    assert working["terminal"] == started["buf"] and working["label"] == "Claude 1"
    await type_into(user, started["buf"], "stop\r")
    seen = await eventually(user, "return #_G.seen == 2 and _G.seen")
    assert seen == [["ClaudeNvimWorking", started["buf"]], ["ClaudeNvimDone", started["buf"]]]


async def test_the_status_says_when_claudes_last_turn_is_to_review(user, claude_dir):
    path = claude_dir / "a.py"
    path.write_text("one\ntwo\n")
    await user.request("nvim_command", f"edit {path}")
    await user.request("nvim_command", "ClaudeNvim")
    started = await eventually(user, TERMINAL)
    await eventually(user, "return require('claude_nvim').status() == 'Claude'")
    for line in ("prompt Fix it", f"write {path} two 2", "stop"):
        await type_into(user, started["buf"], line + "\r")
    await eventually(user, "return require('claude_nvim').status() == "
                           "'Claude · 1 file to review'")
    assert await user.exec_lua("return require('claude_nvim').status_highlight()") == (
        "ClaudeNvimToReview")
    await user.request("nvim_input", "<C-\\><C-n>")
    await user.request("nvim_command", "ClaudeNvimReview")
    await eventually(user, "return #vim.api.nvim_list_tabpages() == 2")
    assert await user.exec_lua("return require('claude_nvim').status()") == "Claude"


# The Claude window (the window showing the current Claude) and every Claude terminal.
CLAUDES = RUNS + """
local info = require('claude_nvim.terminal').info()
local claudes = {}
for _, b in ipairs(vim.api.nvim_list_bufs()) do
  if vim.b[b].claude_nvim_terminal then
    claudes[#claudes + 1] = { name = vim.fn.bufname(b), buf = b,
      running = RUNS(b) }
  end
end
return { current = info and info.buf, win = info and info.win or vim.NIL, claudes = claudes,
         here = vim.api.nvim_get_current_win(), wins = #vim.api.nvim_list_wins(),
         bufs = #vim.api.nvim_list_bufs(), status = require('claude_nvim').status() }
"""


async def test_several_claudes_take_turns_in_the_claude_window(user, claude_dir):
    await user.request("nvim_command", "ClaudeNvim")
    one = await eventually(user, CLAUDES)
    await claudes_started(claude_dir, 1)
    await user.request("nvim_command", "ClaudeNvimNew --two")  # in the same window, focused
    two = await user.exec_lua(CLAUDES)
    assert two["win"] == two["here"] == one["win"] and two["wins"] == 2
    assert [c["name"] for c in two["claudes"]] == ["Claude 1", "Claude 2"]
    assert two["current"] == two["claudes"][1]["buf"]
    await eventually(user, "return vim.api.nvim_get_mode().mode == 't'")
    assert two["bufs"] == one["bufs"] + 1  # naming it left no buffer behind
    first, second = await claudes_started(claude_dir, 2)
    assert second["argv"][4:] == ["--two"] and alive(first["pid"]) and alive(second["pid"])
    both = "local s = require('claude_nvim').status() return s:find('2') and s"
    assert await eventually(user, both) == "Claude \N{MULTIPLICATION SIGN}2"
    assert await user.exec_lua("return vim.fn.getcompletion('ClaudeNvimSwitch ', 'cmdline')"
                               ) == ["1", "2", "next"]
    for command, shown in [("ClaudeNvimSwitch next", 0), ("ClaudeNvimSwitch next", 1),
                           ("ClaudeNvimSwitch 1", 0)]:
        await user.request("nvim_input", "<C-\\><C-n>")
        await user.request("nvim_command", command)
        now = await user.exec_lua(CLAUDES)
        assert now["current"] == now["claudes"][shown]["buf"], command
        assert now["win"] == now["here"] == one["win"] and now["wins"] == 2, command
        await eventually(user, "return vim.api.nvim_get_mode().mode == 't'")
    assert all(c["running"] for c in now["claudes"])
    await user.request("nvim_command", "ClaudeNvimSwitch 7")
    assert await user.exec_lua(MESSAGES_WITH, "no Claude 7 (running: 1, 2)")
    await user.request("nvim_input", "<C-\\><C-n>")
    await user.request("nvim_command", "ClaudeNvim")  # hides the current one: Claude 1
    hidden = await user.exec_lua(CLAUDES)
    assert hidden["win"] is None and hidden["wins"] == 1 and hidden["current"] == one["current"]
    assert all(c["running"] for c in hidden["claudes"])
    await user.request("nvim_command", "ClaudeNvim")  # and shows it again
    shown = await user.exec_lua(CLAUDES)
    assert shown["win"] == shown["here"] and shown["current"] == one["current"]
    await eventually(user, "return vim.api.nvim_get_mode().mode == 't'")
    # Claude 1 exits: its window closes; Claude 2 runs on and is the one :ClaudeNvim shows.
    first_buf = next(c["buf"] for c in shown["claudes"] if c["name"] == "Claude 1")
    await type_into(user, first_buf, "exit\r")
    left = await eventually(user, "local s = loadstring(select(1, ...))()\n"
                                  "return #s.claudes == 1 and s", CLAUDES)
    assert left["wins"] == 1 and left["win"] is None and not alive(first["pid"])
    assert left["claudes"][0]["name"] == "Claude 2" and alive(second["pid"])
    # Still connected: a mention reaches it.
    (claude_dir / "a.py").write_text("a\n")
    await user.request("nvim_command", "ClaudeNvimAdd a.py")
    mentions = claude_dir / "mentions.jsonl"
    with trio.fail_after(WAIT):
        while not (mentions.exists() and mentions.read_text().endswith("\n")):  # written whole
            await trio.sleep(0.05)
    assert json.loads(mentions.read_text())["filePath"] == str(claude_dir / "a.py")
    await user.request("nvim_command", "ClaudeNvim")
    back = await user.exec_lua(CLAUDES)
    assert back["current"] == left["claudes"][0]["buf"] == back["claudes"][0]["buf"]
    assert back["win"] == back["here"]
    await eventually(user, "return vim.api.nvim_get_mode().mode == 't'")
    await type_into(user, back["claudes"][0]["buf"], "exit\r")
    await eventually(user, "return require('claude_nvim.terminal').info() == nil")
    assert not alive(second["pid"])


async def test_a_mention_goes_to_the_claude_last_shown(user, claude_dir):
    path = claude_dir / "a.py"
    path.write_text("one\ntwo\n")
    await user.request("nvim_command", f"edit {path} | ClaudeNvim")
    await claudes_started(claude_dir, 1)
    await user.request("nvim_command", "ClaudeNvimNew")
    claudes = await claudes_started(claude_dir, 2)
    both = "local s = require('claude_nvim').status() return s:find('2') and s"
    await eventually(user, both)
    every = claude_dir / "mentions.jsonl"
    for sent, (line, claude) in enumerate([(1, claudes[0]), (2, claudes[1]), (1, claudes[0])]):
        await user.request("nvim_input", "<C-\\><C-n>")
        await user.request("nvim_command", f"ClaudeNvimSwitch {line} | ClaudeNvimFocus")
        await user.request("nvim_command", f"{line}ClaudeNvimSend")  # from the file: back
        with trio.fail_after(WAIT):
            while (every.read_text().count("\n") if every.exists() else 0) <= sent:
                await trio.sleep(0.05)
        mentions = (claude_dir / f"mentions-{claude['pid']}.jsonl").read_text().splitlines()
        assert json.loads(mentions[-1])["lineStart"] == line - 1
    received = [(claude_dir / f"mentions-{c['pid']}.jsonl").read_text().count("\n")
                for c in claudes]
    assert received == [2, 1]  # each mention reached one Claude


READY_SERVER = "local s = require('claude_nvim').server() return s and s.claude and s.pid"


async def test_the_server_outlives_its_claudes_and_a_dead_one_is_replaced(user, claude_dir):
    await user.request("nvim_command", "ClaudeNvim")
    first = (await claudes_started(claude_dir, 1))[0]
    server = await eventually(user, READY_SERVER)
    await eventually(user, "return require('claude_nvim').status() ~= ''")
    await type_into(user, (await eventually(user, TERMINAL))["buf"], "exit\r")
    await eventually(user, "return require('claude_nvim.terminal').info() == nil")
    await user.request("nvim_command", "ClaudeNvim")  # the same server, at once
    second = (await claudes_started(claude_dir, 2))[1]
    await eventually(user, "return require('claude_nvim').status() ~= ''")
    assert await user.exec_lua(READY_SERVER) == server and alive(server)
    assert alive(second["pid"]) and not alive(first["pid"])
    assert await user.exec_lua(SERVER_APART)
    # A server killed outright leaves its record: the next Claude gets a new server.
    os.kill(server, signal.SIGKILL)
    await eventually(user, "return require('claude_nvim').server() == nil")
    await user.request("nvim_input", "<C-\\><C-n>")
    await user.request("nvim_command", "ClaudeNvimNew")
    await claudes_started(claude_dir, 3)
    try:
        await eventually(user, "return require('claude_nvim').status() == 'Claude'")
    except trio.TooSlowError:  # what it is instead (a rare failure, not yet understood)
        pytest.fail(repr(await user.exec_lua(
            "return {require('claude_nvim').status(), require('claude_nvim').server(),"
            " require('claude_nvim.terminal').info(), vim.g.claude_nvim_server}")))
    assert await user.exec_lua(READY_SERVER) not in (None, server)


# The server runs apart from the current Claude: not in its terminal's job.
SERVER_APART = """local info = require('claude_nvim.terminal').info()
local v = vim.b[info.buf]
return vim.g.claude_nvim_server.pid ~= (v.claude_nvim_pid or v.terminal_job_pid)"""


@pytest.mark.parametrize("position", ["left", "bottom", "float", "tab"])
async def test_the_terminal_opens_where_asked(user, claude_dir, position):
    await user.exec_lua("require('claude_nvim').config.terminal = {position = select(1, ...),"
                        " size = 0.5}", position)
    await user.request("nvim_command", "ClaudeNvim")
    where = await eventually(user, TERMINAL)
    assert where["current"]
    await terminal_mode(user)
    expected = {"left": lambda w: w["pos"] == [0, 0] and w["width"] == 60,
                "bottom": lambda w: w["pos"][0] > 0 and w["width"] == 120 and not w["float"],
                "float": lambda w: w["float"] and w["width"] == 60,
                "tab": lambda w: w["tabs"] == 2}[position]
    assert expected(where), where
    await claude_started(claude_dir)
    await type_into(user, where["buf"], "exit\r")
    await eventually(user, "return require('claude_nvim.terminal').info() == nil")


@pytest.mark.parametrize("start_server", ["startup", "first_use"])
async def test_send_with_no_claude_starts_one_and_the_mention_reaches_it(claude_dir,
                                                                         start_server):
    path = claude_dir / "a.py"
    path.write_text("".join(f"line {i}\n" for i in range(1, 11)))
    async with plugin_user(claude_dir, start_server=start_server) as user:
        await user.exec_lua("""
            vim.g.events = {}
            vim.api.nvim_create_autocmd('User', { pattern = { 'ClaudeNvimConnected',
                                                               'ClaudeNvimDisconnected' },
              callback = function(ev)
                vim.g.events = vim.list_extend(vim.g.events, { { ev.match, ev.data } }) end })""")
        await user.request("nvim_command", f"edit {path}")
        await user.request("nvim_win_set_cursor", 0, [3, 0])
        await user.request("nvim_command", "ClaudeNvimSend")
        await user.request("nvim_command", "ClaudeNvimAdd a.py 5 6")
        mentions = claude_dir / "mentions.jsonl"
        with trio.fail_after(WAIT):
            while len(mentions.read_text().splitlines() if mentions.exists() else []) < 2:
                await trio.sleep(0.05)
        assert [json.loads(line) for line in mentions.read_text().splitlines()] == [
            {"filePath": str(path), "lineStart": 2, "lineEnd": 2},
            {"filePath": str(path), "lineStart": 4, "lineEnd": 5}]
        assert await eventually(user, "return require('claude_nvim').status()") == "Claude"
        events = await user.exec_lua("return vim.g.events")
        assert events == [["ClaudeNvimConnected", {"clients": 1}]]
        # Connected, the commands go straight to the server.
        await user.request("nvim_command", "wincmd p | 7ClaudeNvimSend")
        with trio.fail_after(WAIT):
            while len(mentions.read_text().splitlines()) < 3:
                await trio.sleep(0.05)
        assert json.loads(mentions.read_text().splitlines()[2])["lineStart"] == 6
        await type_into(user, (await user.exec_lua(TERMINAL))["buf"], "exit\r")
        await eventually(user, "return require('claude_nvim').status() == ''")
        assert (await user.exec_lua("return vim.g.events"))[-1] == [
            "ClaudeNvimDisconnected", {"clients": 0}]
        # The server runs on, for the next Claude; when it stops, the commands stay.
        os.kill(await user.exec_lua("return vim.g.claude_nvim_server.pid"), signal.SIGTERM)
        await eventually(user, "return vim.g.claude_nvim_server == nil")
        exists = await user.exec_lua("return vim.tbl_map(function(c) "
                                     "return vim.fn.exists(':' .. c) end, {...})", *COMMANDS)
        assert exists == [2] * len(COMMANDS)


async def test_a_claude_that_cannot_start_stays_on_screen_saying_why(claude_dir, monkeypatch):
    monkeypatch.setenv("PATH", without_claude())
    path = claude_dir / "a.py"
    path.write_text("a\n")
    with headless_nvim(cwd=claude_dir, args=plugin_args()) as (address, _process):
        async with attached_editor(address) as nvim:
            # A narrow screen: each message is wider than it, and none may hold Neovim at a
            # hit-enter prompt (this test's calls would wait there).
            await nvim.request("nvim_ui_attach", 50, 20, {"ext_linegrid": True})
            await nvim.request("nvim_command", f"edit {path} | ClaudeNvimSend")
            messages = await eventually(nvim, MESSAGES_WITH, "dropped", timeout=WAIT)
            assert "Claude 1 did not start: `claude` is not on PATH" in messages
            # The server kept the mention for a Claude, as long as it keeps one.
            assert "no Claude connected within 10 s: 1 mention(s) dropped" in messages
            assert (await nvim.request("nvim_get_mode"))["blocking"] is False
            screen = "\n".join(await nvim.exec_lua(
                "return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
            assert "`claude` is not on PATH; install Claude Code" in screen
            assert await nvim.exec_lua("return require('claude_nvim.terminal').running()") is False


MESSAGES_WITH = """local m = vim.api.nvim_exec2('messages', {output = true}).output
return m:find(..., 1, true) and m"""


def without_claude(command: str = "claude") -> str:
    """$PATH without a `claude` (or `command`)."""
    return os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                           if not os.access(os.path.join(d, command), os.X_OK))


async def test_with_no_claude_nvim_to_run_both_say_how_to_get_one(claude_dir, monkeypatch):
    monkeypatch.setenv("PATH", without_claude("claude-nvim"))
    monkeypatch.setenv("XDG_DATA_HOME", str(claude_dir / "data"))  # no private install
    args = [a.replace('"cmd": [', '"cmd_unused": [') for a in plugin_args()]
    with headless_nvim(cwd=claude_dir, args=args) as (address, _process):
        async with attached_editor(address) as nvim:
            await nvim.request("nvim_command", "checkhealth claude_nvim", timeout=WAIT)
            text = "\n".join(await nvim.request("nvim_buf_get_lines", 0, 0, -1, False))
            await nvim.request("nvim_command", "ClaudeNvim")
            said = await nvim.exec_lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
            assert "Claude 1 did not start: no claude-nvim: run :ClaudeNvimInstall" in (
                await nvim.exec_lua(MESSAGES_WITH, "did not start"))
    assert "ERROR no claude-nvim to run" in text and "run :ClaudeNvimInstall" in text
    assert said[0].startswith("claude-nvim: no claude-nvim: run :ClaudeNvimInstall")


async def test_checkhealth_shows_the_doctors_checks(claude_dir):
    async with plugin_user(claude_dir, start_server="first_use") as user:
        await checkhealth_shows_the_doctors_checks(user, claude_dir)


async def checkhealth_shows_the_doctors_checks(user, claude_dir: Path) -> None:
    await user.request("nvim_command", "checkhealth claude_nvim", timeout=WAIT)
    text = "\n".join(await user.request("nvim_buf_get_lines", 0, 0, -1, False))
    assert f"OK {sys.executable} -m claude_nvim (opts.cmd)" in text
    # The plugin's version (this checkout's) and the one it runs, the same.
    assert f"claude-nvim {__version__}, this plugin" in text
    assert f"OK claude-nvim {__version__}, Python " in text and f"at {sys.executable}" in text
    assert f"at {claude_dir / 'bin' / 'claude'}" in text  # the stand-in, on PATH
    version = await user.exec_lua("local v = vim.version() "
                                  "return ('%d.%d.%d'):format(v.major, v.minor, v.patch)")
    # Neovim's state once, as this Neovim has it; the doctor checks the rest.
    assert text.count("Neovim ") == 1 and f"OK Neovim {version}, this one" in text
    assert "OK no claude-nvim server runs for it yet (:ClaudeNvim starts one)" in text
    assert "ERROR" not in text, text
    async with running_app(user.address, lock_directory=claude_dir / "ide") as app, \
            mcp_client(app.port, app.token):
        await eventually(user, "return require('claude_nvim').status() ~= ''")
        await user.request("nvim_command", "checkhealth claude_nvim", timeout=WAIT)
        text = "\n".join(await user.request("nvim_buf_get_lines", 0, 0, -1, False))
    assert f"OK a claude-nvim server runs for it on port {app.port}, 1 Claude(s) connected" in (
        text)
    # One that has taken this Neovim and not yet said its port (socket activation makes that
    # moment likely): starting, not an error.
    channel = (await user.request("nvim_get_api_info"))[0]  # an open one: this test's
    await user.exec_lua("vim.g.claude_nvim_server = { channel = ..., port = vim.NIL }", channel)
    assert await user.exec_lua("return require('claude_nvim').server() ~= nil")
    await user.request("nvim_command", "checkhealth claude_nvim", timeout=WAIT)
    text = "\n".join(await user.request("nvim_buf_get_lines", 0, 0, -1, False))
    assert "OK a claude-nvim server is starting for it" in text and "ERROR" not in text, text
    assert "Claude starts in auto mode" in text


async def test_checkhealth_warns_when_it_runs_another_version(claude_dir):
    """After an update whose build did not run, the plugin runs an older claude-nvim."""
    older = claude_dir / "older-claude-nvim"
    report = {"ok": True, "checks": [
        {"ok": True, "what": "claude-nvim 0.0.1, Python 3.11.7 at /old/python", "fix": ""}]}
    older.write_text(f"#!/bin/sh\necho '{json.dumps(report)}'\n")
    older.chmod(0o755)
    with headless_nvim(cwd=claude_dir, args=plugin_args(cmd=[str(older)])) as (address, _process):
        async with attached_editor(address) as nvim:
            await nvim.request("nvim_command", "checkhealth claude_nvim", timeout=60)
            text = "\n".join(await nvim.request("nvim_buf_get_lines", 0, 0, -1, False))
    assert "WARNING claude-nvim 0.0.1, Python 3.11.7 at /old/python" in text, text
    assert f"this plugin is claude-nvim {__version__}: run :ClaudeNvimInstall" in text


async def test_checkhealth_gives_advice_for_what_is_missing(claude_dir, monkeypatch):
    monkeypatch.setenv("PATH", without_claude())
    with headless_nvim(cwd=claude_dir, args=plugin_args()) as (address, _process):
        async with attached_editor(address) as nvim:
            await nvim.request("nvim_command", "checkhealth claude_nvim", timeout=WAIT)
            text = "\n".join(await nvim.request("nvim_buf_get_lines", 0, 0, -1, False))
    assert "ERROR `claude` is not on PATH" in text
    assert "npm install -g @anthropic-ai/claude-code" in text


@contextlib.asynccontextmanager
async def plugin_client(user, claude_dir: Path):
    """An MCP client (as a claude is) of the server the plugin starts (at first use, as now),
    once it is ready."""
    await user.exec_lua("local p = require('claude_nvim'); if not p.server() then p.serve() end")
    port = await eventually(user, "local s = require('claude_nvim').server()\n"
                                  "return s and s.claude and s.port", timeout=WAIT)
    lock = claude_dir / "cfg" / "ide" / f"{port}.lock"
    async with mcp_client(port, json.loads(lock.read_text())["authToken"]) as client:
        yield client


WINDOWS = """return vim.tbl_map(function(w) local b = vim.api.nvim_win_get_buf(w)
  return { vim.api.nvim_buf_get_name(b), vim.wo[w].diff } end, vim.api.nvim_tabpage_list_wins(0))"""


@pytest.mark.parametrize("open_in", ["tab", "current"])
async def test_the_proposal_says_what_it_is_and_how_to_answer(user, claude_dir, open_in):
    path = claude_dir / "a.py"
    path.write_text("old\n")
    await user.exec_lua("local p = require('claude_nvim')\n"
                        "p.setup(vim.tbl_deep_extend('force', p.config, "
                        "{diff = {open_in = select(1, ...)}}))", open_in)
    await user.request("nvim_ui_try_resize", 200, 40)
    await user.request("nvim_command", f"edit {path} | vsplit | enew")  # like a terminal beside
    before = await user.exec_lua("return {vim.api.nvim_get_current_win(), "
                                 "#vim.api.nvim_list_wins()}")
    async with plugin_client(user, claude_dir) as client, trio.open_nursery() as nursery:
        pending = PendingDiff(client, diff_args(path, "new\n"))
        nursery.start_soon(pending.run)
        proposal = await eventually(user, "return vim.b.claude_nvim_proposal and "
                                          "{vim.api.nvim_eval_statusline(vim.wo.winbar, "
                                          "{use_winbar = true}).str, "
                                          "#vim.api.nvim_list_tabpages()}")
        winbar, tabs = proposal[0].rstrip(), proposal[1]
        counts = "+1 \N{MINUS SIGN}1 · 1 of 1 hunk"
        whole = f":w accepts · :q rejects · Claude's proposal for a.py · {counts}"
        width = await user.exec_lua("return vim.api.nvim_win_get_width(0)")
        # Where it fits, all of it; else the file and the counts (the buffer's name says
        # "a.py (Claude's proposal)").
        assert winbar == (whole if len(whole) <= width else
                          f":w accepts · :q rejects · a.py · {counts}")
        assert await eventually(user, "return require('claude_nvim').status()") == (
            "Claude · 1 diff")
        if open_in == "current":
            # In this tab: the file in the window it was in (the previous one), then Claude's.
            assert tabs == 1
            assert await user.exec_lua(WINDOWS) == [
                ["", False], [str(path), True], [f"{path} (Claude's proposal)", True]]
        else:
            assert tabs == 2
        await user.request("nvim_command", "quit")  # :q rejects
        assert await pending.outcome() == ["DIFF_REJECTED", "✻ [Claude Code] a.py (f8942c) ⧉"]
        await client.call_tool("close_tab", {"tab_name": "✻ [Claude Code] a.py (f8942c) ⧉"})
        after = await user.exec_lua("return {vim.api.nvim_get_current_win(), "
                                    "#vim.api.nvim_list_wins(), #vim.api.nvim_list_tabpages()}")
        assert after[1:] == [before[1], 1]  # the windows as they were
        assert await user.exec_lua(WINDOWS) == [["", False], [str(path), False]]


async def test_keep_focus_leaves_the_cursor_in_the_terminal(user, claude_dir):
    path = claude_dir / "a.py"
    path.write_text("old\n")
    await user.exec_lua("local p = require('claude_nvim')\n"
                        "p.setup(vim.tbl_deep_extend('force', p.config, {diff = {open_in = "
                        "'current', keep_focus = true}}))")
    await user.request("nvim_command", f"edit {path} | botright vsplit | terminal")
    await user.request("nvim_command", "startinsert")
    terminal = await user.exec_lua("return vim.api.nvim_get_current_win()")
    async with plugin_client(user, claude_dir) as client, trio.open_nursery() as nursery:
        nursery.start_soon(PendingDiff(client, diff_args(path, "new\n")).run)
        await eventually(user, "for _, b in ipairs(vim.api.nvim_list_bufs()) do "
                               "if vim.b[b].claude_nvim_proposal then return true end end")
        assert await user.exec_lua("return vim.api.nvim_get_current_win()") == terminal
        await eventually(user, "return vim.api.nvim_get_mode().mode == 't'")
        nursery.cancel_scope.cancel()


def test_build_lua_makes_the_private_install(tmp_path):
    data = tmp_path / "data"
    env = {**os.environ, "XDG_DATA_HOME": str(data)}
    done = subprocess.run([find_nvim(), "-l", "build.lua"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    venv = data / "nvim" / "claude-nvim" / "venv"
    assert f"claude-nvim: creating a venv in {venv}" in done.stdout
    assert f"claude-nvim: installing claude-nvim from {ROOT} (pip)" in done.stdout
    assert f"installed in {venv}" in done.stdout
    version = subprocess.run([venv / "bin" / "claude-nvim", "--version"], capture_output=True,
                             text=True, timeout=60)
    assert version.stdout.startswith("claude-nvim 0.")
    # The plugin runs it, with no opts.cmd.
    runs = subprocess.run([find_nvim(), "--clean", "--headless", "--cmd",
                           f"set runtimepath^={ROOT}", "-c",
                           "lua io.stdout:write(require('claude_nvim').command()[1])", "-c", "qa!"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert runs.stdout == str(venv / "bin" / "claude-nvim")
    # As lazy.nvim runs it, at an update: in a coroutine it resumes now and then, which yields
    # its progress; the install is redone.
    driver = tmp_path / "lazy.lua"
    driver.write_text(LAZY_LIKE.replace("BUILD", str(ROOT / "build.lua")))
    lazy = subprocess.run([find_nvim(), "--clean", "--headless", "-c", f"luafile {driver}",
                           "-c", "qa!"], env=env, capture_output=True, text=True, timeout=600)
    assert lazy.stdout.splitlines() == [  # one line per step
        f"installing claude-nvim from {ROOT} (pip)",
        f"{version.stdout.strip()} installed in {venv}", "done"], lazy.stdout + lazy.stderr


# Drive build.lua as lazy.nvim does: loadfile, then call it in a coroutine resumed from the
# event loop (a libuv check handle, through vim.schedule), logging every value it yields (lazy's
# log gets a line for each); say "done" when it ends.
LAZY_LIKE = r"""
local log, finished = {}, false
local task = coroutine.create(function() assert(loadfile('BUILD'))() end)
local check = assert((vim.uv or vim.loop).new_check())
check:start(vim.schedule_wrap(function()
  if finished then return end
  local ok, msg = coroutine.resume(task)
  if not ok then log[#log + 1] = 'error: ' .. tostring(msg) elseif msg then log[#log + 1] = msg end
  if coroutine.status(task) == 'dead' then finished = true; check:stop() end
end))
vim.wait(600000, function() return finished end, 10)
io.stdout:write(table.concat(log, '\n') .. '\ndone\n')
"""


def test_the_plugin_lua_is_checked_on_this_neovim(tmp_path):
    """Every Lua file of the plugin loads (syntax) on the Neovim under test."""
    files = [str(p) for p in [ROOT / "build.lua", *sorted((ROOT / "lua").rglob("*.lua")),
                              *sorted((ROOT / "plugin").glob("*.lua"))]]
    script = tmp_path / "check.lua"
    script.write_text("for _, f in ipairs(arg) do assert(loadfile(f)) end")
    done = subprocess.run([find_nvim(), "-l", str(script), *files], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and parent_pid(int(entry.name)) == pid:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("outlive", [False, True])
async def test_one_claude_nvim_process_beside_any_number_of_claudes(claude_dir, outlive):
    async with plugin_user(claude_dir, claude={"outlive": outlive}) as user:
        for command in ("ClaudeNvim", "ClaudeNvimNew", "ClaudeNvimNew"):
            await user.request("nvim_input", "<C-\\><C-n>")
            await user.request("nvim_command", command)
        server = await eventually(user, READY_SERVER, timeout=WAIT)
        claudes = {c["pid"] for c in await claudes_started(claude_dir, 3)}
        status = await eventually(user, "local s = require('claude_nvim').status()\n"
                                        "return s:find('3') and s")
        assert status == "Claude \N{MULTIPLICATION SIGN}3"
        nvim_pid = await user.exec_lua("return vim.fn.getpid()")
        if not outlive:  # each claude runs right under Neovim, beside the one server
            assert set(children_of(nvim_pid)) == claudes | {server}
        else:  # each under its holder, under Neovim (until it quits), which is its client
            holders = {parent_pid(pid) for pid in claudes}
            assert len(holders) == 3
            assert set(children_of(nvim_pid)) == holders | {server}


# The current tab and window, how many tabs and windows in this tab, the mode.
WINDOWS_NOW = """return { tab = vim.api.nvim_get_current_tabpage(),
  win = vim.api.nvim_get_current_win(), tabs = #vim.api.nvim_list_tabpages(),
  wins = #vim.api.nvim_tabpage_list_wins(0), mode = vim.api.nvim_get_mode().mode }"""


@pytest.mark.parametrize("answer", [":w", ":q", ":tabclose", ":bd"])
async def test_after_a_diff_the_cursor_is_back_in_claude_pinned_there(user, claude_dir, answer):
    path = claude_dir / "a.py"
    path.write_text("old\n")
    await user.request("nvim_command", f"edit {path} | ClaudeNvim")
    await claudes_started(claude_dir, 1)
    claude = await eventually(user, "return vim.api.nvim_get_mode().mode == 't' and "
                                    "vim.api.nvim_get_current_win()")
    async with plugin_client(user, claude_dir) as client, trio.open_nursery() as nursery:
        pending = PendingDiff(client, diff_args(path, "new\n"))
        nursery.start_soon(pending.run)
        await eventually(user, "return vim.b.claude_nvim_proposal ~= nil")
        await user.request("nvim_input", f"{answer}<CR>")
        outcome = await pending.outcome()
        if answer == ":w":
            assert outcome[0] == "FILE_SAVED"
            path.write_text("new\n")  # as the CLI does, and then:
            await client.call_tool("close_tab", {"tab_name": diff_args(path, "")["tab_name"]})
        else:
            assert outcome[0] == "DIFF_REJECTED"
        back = await eventually(user, f"local w = (function() {WINDOWS_NOW} end)()\n"
                                      "return w.tabs == 1 and w.mode == 't' and w")
    assert back["win"] == claude and back["wins"] == 2  # in Claude, in Terminal mode
    # Claude's window is pinned to its terminal: :edit there is refused, and Claude stays.
    await user.request("nvim_input", "<C-\\><C-n>")
    with pytest.raises(EditorError, match="E1513"):
        await user.request("nvim_command", f"edit {path}")
    await user.request("nvim_command", "ClaudeNvimFocus")  # to the file
    await user.request("nvim_command", "ClaudeNvimFocus")  # and back: no second Claude window
    # :startinsert takes effect when Neovim next waits for input.
    now = await eventually(user, f"local w = (function() {WINDOWS_NOW} end)()\n"
                                 "return w.mode == 't' and w")
    assert now["win"] == claude and now["wins"] == 2


async def test_the_file_window_the_user_was_in_last_is_the_active_editor(user, claude_dir):
    one, two = claude_dir / "one.py", claude_dir / "two.py"
    one.write_text("1\n")
    two.write_text("a\nb\n")
    await user.request("nvim_command", f"edit {one} | vsplit {two} | 2")
    await user.request("nvim_command", "ClaudeNvim")  # the cursor goes to Claude's terminal
    await eventually(user, "return vim.bo.buftype == 'terminal'")
    async with plugin_client(user, claude_dir) as client:
        tabs = (await client.call_json("getOpenEditors"))["tabs"]
        assert [t["fileName"] for t in tabs if t["isActive"]] == [str(two)]
        selection = await client.call_json("getCurrentSelection")
        assert selection["filePath"] == str(two)
        assert selection["selection"]["start"] == {"line": 1, "character": 0}


async def test_tabs_read_as_names(user, claude_dir):
    path = claude_dir / "main.py"
    path.write_text("old\n")
    await user.exec_lua("require('claude_nvim').config.terminal.position = 'tab'")
    await user.request("nvim_command", f"edit {path} | ClaudeNvim")
    await claudes_started(claude_dir, 1)
    async with plugin_client(user, claude_dir) as client, trio.open_nursery() as nursery:
        nursery.start_soon(PendingDiff(client, diff_args(path, "new\n")).run)
        await eventually(user, "return vim.b.claude_nvim_proposal ~= nil")
        # Each label: the number of windows when more than one, then the current one's name.
        labels = [re.sub(r"^\d+ ", "", label.strip())
                  for label in (await user.exec_lua(TABLINE)).split("  ")]
        assert labels[1:3] == ["Claude 1", "main.py (Claude's proposal)"]
        await user.request("nvim_command", "ClaudeNvimDiffDeny")
    await eventually(user, "return #vim.api.nvim_list_tabpages() == 2")
    # The names are not all: claude-nvim finds its buffers by their variables.
    assert await user.exec_lua("return vim.fn.bufname(require('claude_nvim.terminal')"
                               ".info().buf)") == "Claude 1"


async def test_a_claudes_number_is_the_lowest_free_one(user, claude_dir):
    await user.request("nvim_command", "ClaudeNvim")
    await user.request("nvim_input", "<C-\\><C-n>")
    await user.request("nvim_command", "ClaudeNvimNew")
    await claudes_started(claude_dir, 2)
    first = next(c for c in (await eventually(user, CLAUDES))["claudes"] if c["name"] == "Claude 1")
    await eventually(user, RUNS + "return RUNS(...)", first["buf"])
    await type_into(user, first["buf"], "exit\r")
    await eventually(user, "return #require('claude_nvim.terminal').numbers() == 1")
    await user.request("nvim_input", "<C-\\><C-n>")
    await user.request("nvim_command", "ClaudeNvimNew")
    await claudes_started(claude_dir, 3)
    assert await eventually(user, "local n = require('claude_nvim.terminal').numbers()\n"
                                  "return #n == 2 and n") == ["2", "1"]


async def test_with_two_claudes_the_diff_window_bar_is_whole(user, claude_dir):
    path = claude_dir / "a.py"
    path.write_text("old\n")
    await user.request("nvim_command", f"edit {path} | ClaudeNvim")
    await user.request("nvim_input", "<C-\\><C-n>")
    await user.request("nvim_command", "ClaudeNvimNew")
    await claudes_started(claude_dir, 2)
    second = await eventually(user, "for _, b in ipairs(vim.api.nvim_list_bufs()) do\n"
                                    "  if vim.b[b].claude_nvim_terminal == 2 then\n"
                                    "    local v = vim.b[b]\n"
                                    "    return v.claude_nvim_pid or v.terminal_job_pid\n"
                                    "  end end")
    server = await eventually(user, "local s = require('claude_nvim').server()\n"
                                    "return s and s.claude and (s.clients or 0) >= 2 and s.port")
    token = json.loads((claude_dir / "cfg" / "ide" / f"{server}.lock").read_text())["authToken"]
    # Claude 2 proposes (through a connection Claude 2's process holds), in a 120-column UI.
    buf = await user.exec_lua("for _, b in ipairs(vim.api.nvim_list_bufs()) do\n"
                              "  if vim.b[b].claude_nvim_terminal == 2 then return b end end")
    async with handed_over(claude_dir / "hand") as receive:
        await type_into(user, buf, f"hand over {claude_dir / 'hand'}\r")
        stream = await receive()
    async with mcp_client(server, token, pid=second, stream=stream) as client, \
            trio.open_nursery() as nursery:
        await eventually(user, "return vim.g.claude_nvim_server.clients == 3")  # it is known
        nursery.start_soon(PendingDiff(client, diff_args(path, "new\n")).run)
        await eventually(user, "return vim.b.claude_nvim_proposal ~= nil")
        bar = await user.exec_lua("return {vim.api.nvim_eval_statusline(vim.wo.winbar, "
                                  "{use_winbar = true}).str, vim.api.nvim_win_get_width(0)}")
        # Half the screen: Claude 2 named shortly, the file's name cut, not the keys or counts.
        assert bar[1] <= 60 and len(bar[0].rstrip()) <= bar[1]
        assert bar[0].startswith(":w accepts · :q rejects · Claude 2: ")
        assert bar[0].rstrip().endswith(" · +1 \N{MINUS SIGN}1 · 1 of 1 hunk"), bar
        await user.request("nvim_command", "ClaudeNvimDiffDeny")


async def test_a_plugin_loaded_while_a_server_runs_keeps_its_commands(nvim_address, nvim,
                                                                     tmp_path):
    # The server defined the commands first (no plugin then); lazy-loaded later, the plugin
    # defines them its way, and the server leaves them when it stops.
    async with running_app(nvim_address, lock_directory=tmp_path / "ide"):
        await nvim.request("nvim_command", f"set runtimepath^={ROOT} | "
                                           "runtime plugin/claude_nvim.lua")
    assert await nvim.exec_lua("return vim.g.claude_nvim_server") is None
    exists = await nvim.exec_lua("return vim.tbl_map(function(c) return vim.fn.exists(':' .. c) "
                                 "end, {...})", *COMMANDS)
    assert exists == [2] * len(COMMANDS)
