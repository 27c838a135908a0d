"""What claude-nvim tells the user (core.tell) against a real Neovim with a UI attached: one
line of data on any screen, never a hit-enter prompt, never Ex source made of the text."""

from __future__ import annotations

import pytest
import trio

from helpers import WAIT

TELL = "package.loaded['claude_nvim.core'].tell(...)"
LONG_PATH = "/very/long/path" * 267  # 4,005 characters


async def messages(nvim) -> str:
    return (await nvim.request("nvim_exec2", "messages", {"output": True}))["output"]


async def not_blocked(nvim) -> bool:
    return await nvim.request("nvim_get_mode") == {"mode": "n", "blocking": False}


# Where no message fits at all, core.tell puts it in the server's log: expected here.
@pytest.mark.lua_errors
@pytest.mark.parametrize("columns", [12, 13, 20, 80])
@pytest.mark.parametrize("options", ["set cmdheight=0", "set shortmess-=T",
                                     "set cmdheight=0 shortmess-=T", "set ruler showcmd"])
async def test_any_message_on_any_screen_returns_at_once_without_a_prompt(app, nvim, columns,
                                                                           options):
    await nvim.request("nvim_ui_attach", columns, 10, {"ext_linegrid": True})
    await nvim.request("nvim_command", options)
    for said in ("short", f"Claude's edit of {LONG_PATH}/a.py is not shown", "é" * 2000):
        with trio.fail_after(WAIT):  # the old cut-to-fit loop never ended on a 0-1 column room
            await nvim.exec_lua(TELL, said, "WARN")
        assert await not_blocked(nvim)


async def test_a_long_message_is_kept_whole_in_messages_where_neovim_can_cut_it(app, nvim):
    await nvim.request("nvim_ui_attach", 80, 24, {"ext_linegrid": True})
    said = f"Claude's edit of {LONG_PATH}/a.py is not shown"
    await nvim.exec_lua(TELL, said, "WARN")
    assert await not_blocked(nvim)
    assert f"claude-nvim: {said}" in await messages(nvim)


async def test_a_message_is_data_whatever_it_holds(app, nvim):
    await nvim.request("nvim_ui_attach", 80, 24, {"ext_linegrid": True})
    for said in ("a.py\n| echo 'ran'", "'\" | call system('x') | \"'", "\\", "%s %d"):
        await nvim.exec_lua(TELL, said, "WARN")
        assert await not_blocked(nvim)
    shown = await messages(nvim)
    assert "claude-nvim: a.py^J| echo 'ran'" in shown  # one line: the newline shown as ^J
    assert "claude-nvim: '\" | call system('x') | \"'" in shown
    assert "claude-nvim: \\" in shown and "claude-nvim: %s %d" in shown
    assert "E115" not in shown and "\nran" not in shown
