"""Claude Code's hooks: what a claude started by claude-nvim is given (--settings), and each
Claude's state in Neovim from them, with a stand-in claude that runs the hooks as claude 2.1.331
does (helpers.HookedClaude) over real WebSockets, against a real Neovim."""

from __future__ import annotations

import json
import os

import pytest
import trio

from claude_nvim._hooks import PLAN_TIMEOUT_SECONDS, PLAN_TOOL, TIMEOUT_SECONDS, TOOL
from claude_nvim.testing import McpError, mcp_client
from helpers import (
    HookedClaude,
    claude_in_a_terminal,
    eventually,
    handed_over,
    published_settings,
)

# What Neovim's User autocmds saw, in order: {event, data}.
RECORD_EVENTS = """
_G.seen = {}
vim.api.nvim_create_autocmd('User', {
  pattern = { 'ClaudeNvimWorking', 'ClaudeNvimWaiting', 'ClaudeNvimDone' },
  callback = function(ev) table.insert(_G.seen, { event = ev.match, data = ev.data }) end,
})
"""
CLAUDES = "(vim.g.claude_nvim_server or {}).claudes"


async def listed(nvim, count: int = 1) -> list[dict]:
    """The Claudes in Neovim's record, once there are ``count``."""
    return (await eventually(
        nvim, f"local c = ({CLAUDES}) or {{}}; return #c == {count} and {{c}}"))[0]


async def state_of(nvim, state: str) -> dict:
    return (await eventually(
        nvim, f"local c = ({CLAUDES}) or {{}}; return c[1] and c[1].state == '{state}' and c[1]"))


async def test_a_claude_is_given_hooks_on_its_ide_connection(app, nvim):
    settings = published_settings(app.claude_args)
    published = await nvim.exec_lua("return vim.g.claude_nvim_server.claude.args")
    assert published_settings(published) == settings  # the plugin's claudes get the same
    events = settings["hooks"]
    assert {"UserPromptSubmit", "PreToolUse", "PostToolUse", "PermissionRequest",
            "Notification", "Stop"} <= set(events)
    hooks = [hook for groups in events.values() for group in groups for hook in group["hooks"]]
    # A plan waits for the user (tools/claude_nvim_plan.py); every other hook answers at once.
    plan = [h for h in hooks if h["tool"] == PLAN_TOOL]
    assert [h["timeout"] for h in plan] == [PLAN_TIMEOUT_SECONDS]
    hooks = [h for h in hooks if h not in plan]
    assert all(h["type"] == "mcp_tool" and h["server"] == "ide" and h["tool"] == TOOL
               and h["timeout"] == TIMEOUT_SECONDS <= 5 for h in hooks)
    assert "token" not in json.dumps(settings).lower()  # nothing secret on a command line
    (pre,) = events["PreToolUse"]
    assert pre["matcher"] == "Edit|Write|MultiEdit|NotebookEdit"


async def test_the_hook_tool_is_hidden_and_only_for_the_ide(app, client, model):
    assert TOOL not in {t["name"] for t in (await client.result("tools/list"))["tools"]}
    with pytest.raises(McpError, match="Tool not found"):
        await model.call_tool(TOOL, {"event": "Stop"})
    answer = await client.result("tools/call", {"name": TOOL, "arguments": {"event": "Stop"}})
    # claude reads the text as the hook's output: an empty JSON object asks for nothing.
    assert answer == {"content": [{"type": "text", "text": "{}"}]}


async def test_bad_hook_arguments_are_an_error_result(client):
    result = await client.result("tools/call", {"name": TOOL, "arguments": {"event": 5}})
    assert result["isError"] and "event" in result["content"][0]["text"]
    result = await client.result("tools/call", {"name": TOOL, "arguments": {}})
    assert result["isError"]


async def test_a_claudes_state_follows_its_hooks(app, client, nvim, tmp_path):
    await nvim.exec_lua(RECORD_EVENTS)
    (entry,) = await listed(nvim)
    assert entry["state"] == "unknown" and entry["pid"] == os.getpid() and "terminal" not in entry
    claude = HookedClaude(client, published_settings(app.claude_args), tmp_path)
    path = tmp_path / "a.py"
    path.write_text("one\ntwo\n")

    await claude.prompt("Fix it.")
    working = await state_of(nvim, "working")
    assert working["turns"] == 1 and working["since"] >= entry["since"]
    await claude.ask_permission("Edit", {"file_path": str(path)})
    await state_of(nvim, "waiting")
    await claude.edit(path, "two", "2")  # allowed: it works again
    await state_of(nvim, "working")
    await claude.stop()
    done = await state_of(nvim, "done")
    seen = await eventually(nvim, "return #_G.seen == 4 and _G.seen")
    assert [s["event"] for s in seen] == ["ClaudeNvimWorking", "ClaudeNvimWaiting",
                                         "ClaudeNvimWorking", "ClaudeNvimDone"]
    assert seen[-1]["data"] == done  # the event carries that Claude's entry
    # A permission prompt left unanswered, then a finished turn seen as idle.
    await claude.prompt("Again.")
    await claude.notify("permission_prompt")
    assert (await state_of(nvim, "waiting"))["turns"] == 2
    await claude.notify("idle_prompt")
    await state_of(nvim, "done")
    # Tools that change nothing (Read) while working change nothing either.
    await claude.prompt("Read it.")
    await claude.read(path)
    await state_of(nvim, "working")
    # Read's PreToolUse has no hook (only file tools have); its PostToolUse has.
    assert [c["arguments"]["event"] for c in claude.calls][-2:] == ["UserPromptSubmit",
                                                                    "PostToolUse"]


async def test_each_claude_has_its_own_state_and_a_claude_in_a_terminal_its_buffer(
        app, nvim, tmp_path):
    # A terminal running a process that stands for claude (it holds its connection): the
    # Claude connecting with its pid runs in that terminal.
    async with handed_over(tmp_path / "hand") as receive:
        _, buffer, pid, stream = await claude_in_a_terminal(nvim, app.port, receive, tmp_path,
                                                            "claude")
    settings = published_settings(app.claude_args)
    async with mcp_client(app.port, app.token, pid=pid, stream=stream) as first, \
            mcp_client(app.port, app.token, pid=999999) as second:
        one, two = await listed(nvim, 2)
        assert one["terminal"] == buffer and "terminal" not in two
        assert one["pid"] == pid and "pid" not in two  # 999999 holds no connection
        await HookedClaude(second, settings, tmp_path).prompt("Go.")
        one, two = await eventually(
            nvim, f"local c = {CLAUDES}; return c[2].state == 'working' and c")
        assert one["state"] == "unknown"  # never a guess
        await HookedClaude(first, settings, tmp_path).stop()
        await eventually(nvim, f"return ({CLAUDES})[1].state == 'done'")
    await listed(nvim, 0)  # gone with their connections


async def test_a_hook_is_answered_while_neovim_is_busy(app, client, nvim, tmp_path):
    await listed(nvim)
    claude = HookedClaude(client, published_settings(app.claude_args), tmp_path)
    async with trio.open_nursery() as nursery:
        # Neovim stuck for 4 s (a slow plugin, a :!command): claude's tool calls go on.
        nursery.start_soon(lambda: nvim.exec_lua("os.execute('sleep 4')", timeout=10))
        await trio.sleep(0.3)
        with trio.fail_after(3):
            await claude.prompt("Go.")
            await claude.stop()
    await state_of(nvim, "done")  # told once Neovim could listen
