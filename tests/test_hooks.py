"""Claude Code's hooks: what a claude started by claude-nvim is given (--settings), and each
Claude's state in Neovim from them, with a stand-in claude that runs the hooks as claude 2.1.331
does (helpers.HookedClaude) over real WebSockets, against a real Neovim."""

from __future__ import annotations

import datetime
import json
import os
import time

import pytest
import trio

from claude_nvim._hooks import (
    GUARD_SECONDS,
    GUARDS,
    NOTICE_SECONDS,
    PLAN_TIMEOUT_SECONDS,
    PLAN_TOOL,
    TOOL,
)
from claude_nvim.testing import McpError, mcp_client
from helpers import (
    WAIT,
    Gate,
    HookedClaude,
    claude_in_a_terminal,
    diff_args,
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
    hooks = [(event, hook) for event, groups in events.items() for group in groups
             for hook in group["hooks"]]
    # A plan waits for the user (tools/claude_nvim_plan.py); every other hook answers at once.
    plan = [h for _, h in hooks if h["tool"] == PLAN_TOOL]
    assert [h["timeout"] for h in plan] == [PLAN_TIMEOUT_SECONDS]
    hooks = [(e, h) for e, h in hooks if h["tool"] != PLAN_TOOL]
    assert all(h["type"] == "mcp_tool" and h["server"] == "ide" and h["tool"] == TOOL
               for _, h in hooks)
    # A PreToolUse that times out refuses the tool call (claude 2.1.332's Code Mode): a slow
    # but alive server is waited for 5 s; the others cost a frozen or dead server less.
    assert {e: h["timeout"] for e, h in hooks if e in GUARDS} == {"PreToolUse": GUARD_SECONDS}
    assert GUARD_SECONDS >= 5 and NOTICE_SECONDS <= GUARD_SECONDS
    assert all(h["timeout"] == NOTICE_SECONDS for e, h in hooks if e not in GUARDS)
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
    gate = Gate(tmp_path / "gate")
    async with trio.open_nursery() as nursery:
        # Neovim stuck (a slow plugin, a :!command) until the hooks are answered: claude's
        # tool calls go on.
        nursery.start_soon(lambda: nvim.exec_lua(gate.HOLD, gate.path, timeout=None))
        await gate.held()
        with trio.fail_after(WAIT):
            await claude.prompt("Go.")
            await claude.stop()
        await gate.release()
    await state_of(nvim, "done")  # told once Neovim could listen


async def test_a_failed_tool_a_refused_one_and_an_interrupt_end_as_claude_does(
        app, client, nvim, tmp_path):
    await listed(nvim)
    claude = HookedClaude(client, published_settings(app.claude_args), tmp_path)
    await claude.prompt("Go.")
    await claude.ask_permission("Bash", {"command": "ls /nowhere"})
    await state_of(nvim, "waiting")
    failure = claude._tool("Bash", {"command": "ls /nowhere"})  # allowed, and it failed
    await claude.fire(claude._event("PostToolUseFailure", **failure, error="Exit code 2",
                                    is_interrupt=False))
    await state_of(nvim, "working")  # claude goes on
    await claude.ask_permission("Bash", {"command": "sleep 100"})
    await state_of(nvim, "waiting")
    await claude.fire(claude._event("PermissionDenied", **claude._tool("Bash", {}),
                                    reason="auto mode"))
    await state_of(nvim, "working")
    await claude.fire(claude._event("PostToolUseFailure", **claude._tool("Bash", {}),
                                    error="interrupted", is_interrupt=True))
    await state_of(nvim, "done")  # an interrupt ends the turn


async def test_a_rejected_diff_ends_the_turn(app, client, nvim, tmp_path):
    # The real claude 2.1.332 runs no hook after a rejected diff (nor Stop, nor a failure):
    # it is at its prompt again, done.
    await listed(nvim)
    claude = HookedClaude(client, published_settings(app.claude_args), tmp_path)
    path = tmp_path / "new.txt"
    await claude.prompt("Write it.")
    await claude.fire(claude._event("PreToolUse", **claude._tool(
        "Write", {"file_path": str(path), "content": "x\n"})))
    await claude.ask_permission("Write", {"file_path": str(path), "content": "x\n"})
    await state_of(nvim, "waiting")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.call_tool, "openDiff", diff_args(path, "x\n"))
        await eventually(nvim, "return #vim.api.nvim_list_tabpages() == 2")
        await nvim.request("nvim_command", "ClaudeNvimDiffDeny")
    await state_of(nvim, "done")
    # A Claude without hooks stays unknown: never a guess.
    async with mcp_client(app.port, app.token, pid=999999) as other:
        await listed(nvim, 2)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(other.call_tool, "openDiff", diff_args(path, "y\n"))
            await eventually(nvim, "return #vim.api.nvim_list_tabpages() == 2")
            await nvim.request("nvim_command", "ClaudeNvimDiffDeny")
        assert (await listed(nvim, 2))[1]["state"] == "unknown"


COUNT_UPDATES = """
local hooks = require('claude_nvim.hooks')
local update = hooks.update
_G.updates = 0
hooks.update = function(...) _G.updates = _G.updates + 1; return update(...) end
"""


async def test_a_flood_of_hooks_is_not_a_flood_of_messages(app, client, nvim, tmp_path):
    await listed(nvim)
    await nvim.exec_lua(COUNT_UPDATES)
    claude = HookedClaude(client, published_settings(app.claude_args), tmp_path)
    await claude.prompt("Go.")
    hooks = 1000
    for _ in range(hooks // 2):  # waiting, working, waiting, ...: each a change of state
        await claude.ask_permission("Bash", {"command": "true"})
        await claude.fire(claude._event("PostToolUse", **claude._tool("Bash", {})))
    await claude.stop()
    await state_of(nvim, "done")  # the latest state wins
    updates = await nvim.exec_lua("return _G.updates")
    assert updates <= hooks // 4, updates  # before: one a change, 1,001


def transcript_line(kind: str, content: object, when: float) -> str:
    """One line of claude's session transcript, as 2.1.332 writes it."""
    stamp = datetime.datetime.fromtimestamp(when, datetime.UTC).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")
    return json.dumps({"type": kind, "message": {"role": kind, "content": content},
                       "timestamp": stamp, "sessionId": "s"}) + "\n"


async def test_an_interrupt_seen_in_the_transcript_ends_the_turn(app, client, nvim, tmp_path):
    # The real claude 2.1.332 runs no hook after an interrupt (Esc) or a permission refused in
    # its terminal: it only writes the interrupt to the session's transcript.
    await listed(nvim)
    claude = HookedClaude(client, published_settings(app.claude_args), tmp_path)
    transcript = tmp_path / "session.jsonl"
    claude.transcript = str(transcript)
    interrupt = [{"type": "text", "text": "[Request interrupted by user for tool use]"}]
    # One of an earlier turn does not end this one.
    transcript.write_text(transcript_line("user", interrupt, time.time() - 60))
    await claude.prompt("Go.")
    (claude_id,) = [c["id"] for c in app.hooks.entries()]
    with trio.fail_after(10):  # the server looked at it since
        while app.claudes.get(claude_id).transcript_size != transcript.stat().st_size:
            await trio.sleep(0.05)
    assert app.claudes.get(claude_id).state == "working"
    await claude.ask_permission("Bash", {"command": "sleep 100"})
    await state_of(nvim, "waiting")
    with transcript.open("a") as f:
        f.write(transcript_line("assistant", [{"type": "tool_use", "name": "Bash"}],
                                time.time()))
        f.write(transcript_line("user", interrupt, time.time() + 0.01))
    await state_of(nvim, "done")
