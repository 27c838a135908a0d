"""Follow (:ClaudeNvimFollow, opts.follow): the file a Claude writes shows in the editor window,
the cursor on what changed, and never while the user types; with a stand-in claude running the
hooks (helpers.HookedClaude) against a real Neovim with a UI."""

from __future__ import annotations

import pytest
import trio

from claude_nvim._follow import FollowFeature, changed_lines
from helpers import edit, eventually, hooked_claude

SHOWN = """
local buf = vim.api.nvim_win_get_buf(0)
return { name = vim.api.nvim_buf_get_name(buf), line = vim.api.nvim_win_get_cursor(0)[1],
         mode = vim.api.nvim_get_mode().mode,
         text = vim.api.nvim_buf_get_lines(buf, 0, -1, false) }
"""


@pytest.fixture
async def claude(app, client, tmp_path):
    return await hooked_claude(app, client, tmp_path)


def test_the_changed_lines_are_the_ones_between_a_common_head_and_tail():
    assert changed_lines(b"a\nb\nc\n", b"a\nB\nc\n") == (2, 2)
    assert changed_lines(b"a\nc\n", b"a\nb1\nb2\nc\n") == (2, 3)
    assert changed_lines(b"a\nb\nc\n", b"a\nc\n") == (2, 2)  # a deletion: the line after it
    assert changed_lines(None, b"new\n") == (1, 1)
    assert changed_lines(b"same\n", b"same\n") is None


async def test_follow_shows_the_file_being_written_and_waits_while_the_user_types(
        app, claude, ui, tmp_path):
    mine, theirs, later = tmp_path / "mine.txt", tmp_path / "theirs.txt", tmp_path / "later.txt"
    mine.write_text("my text\n")
    theirs.write_text("".join(f"line {i}\n" for i in range(1, 41)))
    later.write_text("one\ntwo\n")
    await edit(ui, mine)
    await claude.prompt("Not followed yet.")
    await claude.edit(theirs, "line 2\n", "LINE 2\n")
    assert (await ui.exec_lua(SHOWN))["name"] == str(mine)  # follow is off by default

    await ui.request("nvim_command", "ClaudeNvimFollow")
    (follow,) = [f for f in app.features if isinstance(f, FollowFeature)]
    with trio.fail_after(5):
        while not follow.on:  # the server hears of it: it reads the files for it from now
            await trio.sleep(0.02)
    await claude.edit(theirs, "line 30\n", "line thirty\n")
    shown = await eventually(ui, f"local s = (function() {SHOWN} end)(); "
                                 f"return s.name == {str(theirs)!r} and s.line == 30 and s")
    assert shown["text"][29] == "line thirty"
    assert (await ui.exec_lua("return vim.bo.modified")) is False

    # The user types: the editor window stays as it is until they pause.
    await ui.request("nvim_command", f"edit {mine}")
    await ui.request("nvim_input", "Otyping")
    await eventually(ui, "return vim.api.nvim_get_mode().mode == 'i'")
    await claude.edit(later, "two", "TWO")
    await eventually(ui, "return vim.deep_equal(vim.fn.getbufline(..., 1, '$'), {'one', 'TWO'})",
                     str(later))  # written, and shown in its buffer: not in the window
    now = await ui.exec_lua(SHOWN)
    assert now["name"] == str(mine) and now["mode"] == "i" and now["text"][0] == "typing"
    await ui.request("nvim_input", "<Esc>")
    shown = await eventually(ui, f"local s = (function() {SHOWN} end)(); "
                                 f"return s.name == {str(later)!r} and s", timeout=10)
    assert shown["line"] == 2 and shown["text"] == ["one", "TWO"]
    await claude.stop()


async def test_a_hidden_claude_in_a_terminal_is_not_followed_unless_asked(app, ui, tmp_path):
    await ui.request("nvim_command", "ClaudeNvimFollow on")
    entry = {"id": 1, "state": "working", "terminal": await ui.exec_lua(
        "local buf = vim.api.nvim_create_buf(false, true); return buf")}  # in no window
    target = str(tmp_path / "hidden.txt")
    await ui.exec_lua("require('claude_nvim.follow').writing(...)", entry, target)
    assert await ui.exec_lua("return vim.fn.bufnr(...)", target) == -1
    await ui.request("nvim_command", "ClaudeNvimFollow all")
    await ui.exec_lua("require('claude_nvim.follow').writing(...)", entry, target)
    assert await ui.exec_lua("return vim.fn.bufnr(...) > 0", target)
