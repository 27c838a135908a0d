"""Plan review: a Claude asking to leave plan mode (the PermissionRequest hook of ExitPlanMode)
gets its plan shown in Neovim and the user's answer as the hook's output; with a stand-in
claude running the hooks of its --settings (helpers.HookedClaude) against a real Neovim."""

from __future__ import annotations

import json

import pytest
import trio

from claude_nvim._hooks import PLAN_TOOL
from helpers import HookedClaude, eventually, hooked_claude

PLAN = "# Plan\n\n1. Read the config\n2. Parse it with json\n3. Write the tests\n"
SHOWN = """local buf = vim.api.nvim_get_current_buf()
return vim.b[buf].claude_nvim_plan ~= nil and { lines = vim.api.nvim_buf_get_lines(buf, 0, -1,
  false), ft = vim.bo[buf].filetype, tabs = #vim.api.nvim_list_tabpages() }"""
GONE = ("return #vim.api.nvim_list_tabpages() == 1 and not vim.tbl_contains(vim.tbl_map("
        "function(b) return vim.b[b].claude_nvim_plan ~= nil end, vim.api.nvim_list_bufs()), "
        "true)")


@pytest.fixture
async def claude(app, client, tmp_path):
    return await hooked_claude(app, client, tmp_path)


async def asking(claude: HookedClaude, answers: list, *, task_status=trio.TASK_STATUS_IGNORED):
    """claude asks to leave plan mode and waits for its hooks (the plan's waits for the user)."""
    task_status.started()
    event = claude._event("PermissionRequest", tool_name="ExitPlanMode",
                          tool_input={"plan": PLAN, "planFilePath": "/w/.claude/plans/p.md"},
                          permission_suggestions=[])
    answers.extend(await claude.fire(event))


async def review(ui, claude, act) -> dict:
    answers: list = []
    async with trio.open_nursery() as nursery:
        await nursery.start(asking, claude, answers)
        shown = await eventually(ui, SHOWN)
        assert shown["lines"] == PLAN.rstrip("\n").split("\n")
        assert shown["ft"] == "markdown" and shown["tabs"] == 2
        await act()
    await eventually(ui, GONE)  # answered: the plan's buffer and tab are gone
    (plan,) = [c for c in claude.calls[-len(answers):] if c["name"] == PLAN_TOOL]
    assert plan["arguments"]["plan"] == PLAN
    return json.loads(plan["result"]["content"][0]["text"])


async def test_a_plan_is_approved_into_a_mode(claude, ui):
    answer = await review(ui, claude, lambda: ui.request("nvim_command",
                                                         "ClaudeNvimPlanApprove acceptEdits"))
    given = {"plan": PLAN, "planFilePath": "/w/.claude/plans/p.md"}  # claude wants it back
    assert answer == {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {
        "behavior": "allow", "updatedInput": given, "updatedPermissions": [
            {"type": "setMode", "mode": "acceptEdits", "destination": "session"}]}}}
    answer = await review(ui, claude, lambda: ui.request("nvim_command", "ClaudeNvimPlanApprove"))
    assert answer == {"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                                             "decision": {"behavior": "allow",
                                                          "updatedInput": given}}}


async def test_comments_send_the_plan_back_quoting_their_lines(claude, ui):
    async def comment():
        await ui.exec_lua("vim.api.nvim_buf_set_lines(0, 4, 4, false, { 'Use tomllib: it is "
                          "TOML.' }); vim.api.nvim_buf_set_lines(0, -1, -1, false, "
                          "{ '', 'And for the errors.' })")
        await ui.request("nvim_command", "write")

    answer = await review(ui, claude, comment)
    decision = answer["hookSpecificOutput"]["decision"]
    assert decision["behavior"] == "deny"
    assert decision["message"].endswith(
        "\n\n> 2. Parse it with json\n\nUse tomllib: it is TOML.\n\n---\n\n"
        "> 3. Write the tests\n\n\nAnd for the errors.")
    assert "Keep planning" in decision["message"]


async def test_quitting_leaves_it_to_claudes_dialog(claude, ui):
    assert await review(ui, claude, lambda: ui.request("nvim_command", "quit")) == {}
