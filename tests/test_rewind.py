""":ClaudeNvimRewind: every change of Claude's turns N..last taken back, from the review's
records, with a stand-in claude running the hooks (helpers.HookedClaude) and a real Neovim."""

from __future__ import annotations

import pytest

from helpers import edit, eventually, hooked_claude, messages


@pytest.fixture
def ui_size() -> tuple[int, int]:
    return 200, 40


@pytest.fixture
async def claude(app, client, tmp_path):
    return await hooked_claude(app, client, tmp_path)


async def lines(nvim, buf: int) -> list[str]:
    return await nvim.exec_lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf)


async def test_a_rewind_of_two_turns_after_its_preview(claude, ui, tmp_path):
    a, b, c, kept, unsaved = (tmp_path / f"{n}.txt" for n in ("a", "b", "c", "kept", "unsaved"))
    made = tmp_path / "made.txt"
    for path in (a, b, c, kept, unsaved):
        path.write_text(f"{path.stem} 1\n{path.stem} 2\n")
    buf_a, buf_unsaved = await edit(ui, a), await edit(ui, unsaved)
    await claude.prompt("Turn 1: not rewound.")
    await claude.edit(kept, "kept 1", "KEPT")
    await claude.stop()
    await claude.prompt("Turn 2.")
    await claude.edit(a, "a 1", "A")
    await claude.edit(b, "b 2", "B")
    await claude.edit(unsaved, "unsaved 1", "U")
    await claude.stop()
    await claude.prompt("Turn 3.")
    await claude.edit(a, "a 2", "AA")
    await claude.edit(c, "c 1", "C")
    await claude.write(made, "new\n")
    await claude.stop()
    await eventually(ui, "return vim.api.nvim_buf_get_lines(..., 0, -1, false)[2] == 'AA'", buf_a)
    await eventually(ui, "return vim.api.nvim_buf_get_lines(..., 0, 1, false)[1] == 'U'",
                     buf_unsaved)
    await ui.exec_lua("vim.api.nvim_buf_set_lines(..., 1, 2, false, { 'mine' })", buf_unsaved)

    # The preview: the review of the combined change, then the question.
    await ui.exec_lua("""vim.ui.select = function(items, opts, choose)
        local qf = vim.fn.getqflist({ title = 1, items = 1 })
        _G.asked = { prompt = opts.prompt, tabs = #vim.api.nvim_list_tabpages(),
                     title = qf.title, files = #vim.tbl_filter(function(i) return i.lnum > 0
                     end, qf.items) }
        choose(items[1])
    end""")
    await ui.request("nvim_command", "ClaudeNvimRewind 2")
    asked = await eventually(ui, "return _G.asked")
    assert asked["prompt"] == "Rewind turns 2-3: 5 files back as before turn 2?"
    assert asked["tabs"] == 2 and asked["title"].startswith("Claude's turn 2 (turns 2-3)")
    await eventually(ui, "return vim.g.claude_nvim_rewound ~= nil")

    assert a.read_text() == "a 1\na 2\n" and b.read_text() == "b 1\nb 2\n"
    assert c.read_text() == "c 1\nc 2\n"
    assert not made.exists()  # Claude made it, and it still held what Claude wrote
    assert kept.read_text() == "KEPT\nkept 2\n"  # turn 1's change stays
    assert unsaved.read_text() == "U\nunsaved 2\n"  # its buffer has unsaved changes: untouched
    assert await lines(ui, buf_unsaved) == ["U", "mine"]
    assert await lines(ui, buf_a) == ["a 1", "a 2"]
    assert not await ui.exec_lua("return vim.bo[...].modified", buf_a)
    assert await ui.exec_lua("return #vim.api.nvim_list_tabpages()") == 1  # the preview closed
    said = await messages(ui)
    assert "rewound turns 2-3: 3 files as before turn 2" in said
    assert "1 made by Claude deleted" in said and "unsaved: unsaved.txt" in said
    # One `u` undoes it in a buffer.
    await ui.request("nvim_set_current_buf", buf_a)
    await ui.request("nvim_command", "undo")
    assert await lines(ui, buf_a) == ["A", "AA"]


async def test_rewind_bang_takes_back_the_last_turn_at_once(claude, ui, tmp_path):
    a, made = tmp_path / "a.txt", tmp_path / "made.txt"
    a.write_text("one\n")
    await claude.prompt("Change it.")
    await claude.edit(a, "one", "two")
    await claude.write(made, "Claude's\n")
    await claude.stop()
    made.write_text("the user's since\n")  # a file Claude made, changed since: kept
    await ui.exec_lua("vim.ui.select = function() error('no preview with !') end")
    await ui.request("nvim_command", "ClaudeNvimRewind!")
    await eventually(ui, "return vim.g.claude_nvim_rewound ~= nil")
    assert a.read_text() == "one\n"
    assert made.read_text() == "the user's since\n"
    assert "kept, changed since Claude made them: made.txt" in await messages(ui)
    assert await ui.exec_lua("return #vim.api.nvim_list_tabpages()") == 1


async def test_nothing_to_rewind_is_said(app, ui):
    await ui.request("nvim_command", "ClaudeNvimRewind")
    await eventually(ui, "return vim.api.nvim_exec2('messages', {output = true}).output"
                         ":find('nothing to rewind', 1, true)")
