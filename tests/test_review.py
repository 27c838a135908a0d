"""The review of Claude's turns: what each turn changed (from claude's hooks, and from bufsync
for changes the hooks do not name), :ClaudeNvimReview, :ClaudeNvimRevert, the signs; with a
stand-in claude that runs the hooks as claude 2.1.331 does (helpers.HookedClaude) against a
real Neovim with a UI."""

from __future__ import annotations

import os
import shutil

import pytest
import trio

from claude_nvim._paths import PathMap
from claude_nvim.testing import mcp_client, running_app
from helpers import WAIT, HookedClaude, edit, eventually, published_settings

MINUS = "\N{MINUS SIGN}"  # the window bars and the quickfix list count "+12 \N{MINUS SIGN}3"
# The review on screen: its quickfix list, the windows of the current tab and what they show.
REVIEW = """
local qf = vim.fn.getqflist({ title = 1, items = 1 })
local wins = {}
for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
  local buf = vim.api.nvim_win_get_buf(win)
  wins[#wins + 1] = { name = vim.api.nvim_buf_get_name(buf), diff = vim.wo[win].diff,
                      lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false),
                      winbar = vim.wo[win].winbar,
                      before = vim.b[buf].claude_nvim_review_before ~= nil }
end
local items = vim.tbl_map(function(i) return { file = vim.api.nvim_buf_get_name(i.bufnr),
  lnum = i.lnum, text = i.text } end, qf.items)
return { title = qf.title, items = items, wins = wins, tabs = #vim.api.nvim_list_tabpages() }
"""


@pytest.fixture
def ui_size() -> tuple[int, int]:
    return 160, 40


@pytest.fixture
async def claude(app, client, tmp_path):
    """A stand-in claude, once it listens (claude's first prompt comes long after)."""
    with trio.fail_after(WAIT):
        while not app.hooks.entries():
            await trio.sleep(0.02)
    return HookedClaude(client, published_settings(app.claude_args), tmp_path)


async def review(nvim, command: str = "ClaudeNvimReview", tabs: int = 2) -> dict:
    await nvim.request("nvim_command", command)
    return await eventually(nvim, f"local r = (function() {REVIEW} end)(); "
                                  f"return r.tabs == {tabs} and #r.items > 0 and r")


async def test_a_turn_that_edited_an_open_file_is_reviewed_and_taken_back(claude, ui, tmp_path):
    path = tmp_path / "a.py"
    path.write_text("one\ntwo\nthree\nfour\n")
    buf = await edit(ui, path)
    await claude.prompt("Make two a number.")
    await claude.read(path)
    await claude.edit(path, "two", "2")
    await claude.stop()
    await eventually(ui, "return vim.api.nvim_buf_get_lines(..., 1, 2, false)[1] == '2'", buf)
    shown = await review(ui)
    assert shown["title"] == (f"Claude's turn 1 (the Claude with pid {os.getpid()}): "
                              "Make two a number.")
    assert shown["items"] == [{"file": str(path), "lnum": 2, "text": f"+1 {MINUS}1  2"}]
    before, now = shown["wins"]
    assert before["before"] and before["diff"] and before["lines"] == ["one", "two", "three",
                                                                          "four"]
    assert now["name"] == str(path) and now["diff"] and now["lines"][1] == "2"
    assert "turn 1" in now["winbar"] and "1 hunk" in now["winbar"]
    # Back in the file's own window: take the hunk under the cursor back.
    await ui.request("nvim_command", "tabclose")
    await ui.exec_lua("vim.api.nvim_win_set_cursor(0, {2, 0})")
    await ui.request("nvim_command", "ClaudeNvimRevert")
    await eventually(ui, "return vim.api.nvim_buf_get_lines(..., 1, 2, false)[1] == 'two'", buf)
    assert path.read_text() == "one\ntwo\nthree\nfour\n"
    assert not await ui.exec_lua("return vim.bo[...].modified", buf)
    await ui.request("nvim_command", "undo")
    assert await ui.exec_lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf) == [
        "one", "2", "three", "four"]


async def wait_lines(nvim, buf: int, lines: list[str]) -> None:
    await eventually(nvim, "local buf, want = ...; return vim.deep_equal("
                           "vim.api.nvim_buf_get_lines(buf, 0, -1, false), want)", buf, lines)


async def test_a_file_no_buffer_holds_is_reviewed_and_taken_back_from_the_review(
        claude, ui, tmp_path):
    path = tmp_path / "b.py"
    path.write_text("a = 1\nb = 2\nc = 3\n")
    await claude.prompt("Change b.")
    await claude.edit(path, "b = 2", "b = 20\nd = 4")
    await claude.stop()
    shown = await review(ui)
    assert shown["items"] == [{"file": str(path), "lnum": 2, "text": f"+2 {MINUS}1  b = 20"}]
    assert shown["wins"][1]["lines"] == ["a = 1", "b = 20", "d = 4", "c = 3"]
    # In the review, on the file's side: the cursor is on the hunk.
    await ui.request("nvim_command", "ClaudeNvimRevert")
    await eventually(ui, "return vim.api.nvim_buf_get_lines(0, 0, -1, false)[2] == 'b = 2'")
    assert path.read_text() == "a = 1\nb = 2\nc = 3\n"


async def test_bash_changes_to_an_open_file_belong_to_the_turn(claude, ui, tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("x\ny\n")
    buf = await edit(ui, path)
    await claude.prompt("Use sed.")
    await claude.bash(f"sed -i s/y/Y/ {path}")
    await wait_lines(ui, buf, ["x", "Y"])  # bufsync followed it (claude's next answer is later)
    await claude.stop()
    shown = await review(ui)
    assert shown["items"] == [{"file": str(path), "lnum": 2, "text": f"+1 {MINUS}1  Y"}]
    await ui.request("nvim_command", "ClaudeNvimRevert!")
    await wait_lines(ui, buf, ["x", "y"])
    assert path.read_text() == "x\ny\n"


async def test_a_claude_without_hooks_gets_a_review_of_what_changed_in_loaded_buffers(
        app, client, ui, tmp_path):
    # `client` runs no hooks: a plain `claude --ide` in another terminal. Its edits are seen
    # by bufsync in loaded buffers; they make turns of their own until the user reviews them.
    first, second = tmp_path / "d.txt", tmp_path / "e.txt"
    first.write_text("1\n2\n3\n")
    second.write_text("a\n")
    bufs = [await edit(ui, first), await edit(ui, second)]
    await eventually(ui, "return (vim.g.claude_nvim_server.claudes or {})[1] ~= nil")
    first.write_text("1\ntwo\n3\n")
    second.write_text("a\nb\n")
    await wait_lines(ui, bufs[0], ["1", "two", "3"])
    await wait_lines(ui, bufs[1], ["a", "b"])
    shown = await review(ui)
    assert shown["title"] == "Claude's turn 1 (changes on disk)"
    assert sorted((i["file"], i["lnum"], i["text"]) for i in shown["items"]) == [
        (str(first), 2, f"+1 {MINUS}1  two"), (str(second), 2, f"+1 {MINUS}0  b")]
    # The turn ended as it was reviewed: nothing left to review.
    await eventually(ui, "return require('claude_nvim.review').to_review() == 0")
    await ui.request("nvim_command", "tabclose")
    first.write_text("1\ntwo\nthree\n")  # after the review: a new turn
    await wait_lines(ui, bufs[0], ["1", "two", "three"])
    shown = await review(ui)
    assert shown["title"] == "Claude's turn 2 (changes on disk)"
    assert shown["items"] == [{"file": str(first), "lnum": 3, "text": f"+1 {MINUS}1  three"}]
    await ui.request("nvim_command", "ClaudeNvimRevert")
    await wait_lines(ui, bufs[0], ["1", "two", "3"])
    assert first.read_text() == "1\ntwo\n3\n"


async def test_without_hooks_a_file_without_last_newline_is_taken_back_byte_for_byte(
        app, client, ui, tmp_path):
    path = tmp_path / "noeol.txt"
    path.write_bytes(b"1\n2\n3")  # the text before comes from its buffer: 'eol' off
    buf = await edit(ui, path)
    await eventually(ui, "return (vim.g.claude_nvim_server.claudes or {})[1] ~= nil")
    path.write_bytes(b"1\ntwo\n3")  # a plain `claude --ide`'s Edit keeps the end as it was
    await wait_lines(ui, buf, ["1", "two", "3"])
    await review(ui)
    await ui.request("nvim_command", "tabclose")
    await ui.request("nvim_command", "ClaudeNvimRevert!")
    await wait_lines(ui, buf, ["1", "2", "3"])
    assert path.read_bytes() == b"1\n2\n3"


async def test_with_no_claude_connected_changes_on_disk_are_not_recorded(app, ui, tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("1\n")
    buf = await edit(ui, path)
    path.write_text("2\n")  # the user's own `git checkout`, say
    await wait_lines(ui, buf, ["2"])
    await ui.request("nvim_command", "ClaudeNvimReview")
    await eventually(ui, "return vim.api.nvim_exec2('messages', {output = true}).output"
                         ":find('nothing to review', 1, true)")


async def test_a_rejected_turn_ends_at_the_next_prompt(claude, ui, tmp_path):
    one, two = tmp_path / "one.txt", tmp_path / "two.txt"
    one.write_text("a\n")
    two.write_text("b\n")
    await claude.prompt("First.")
    await claude.edit(one, "a", "A")
    await claude.ask_permission("Edit", {"file_path": str(two)})  # the user says no: no Stop
    await claude.prompt("Second.")
    await claude.edit(two, "b", "B")
    await claude.stop()
    await ui.exec_lua("vim.ui.select = function(items, opts, choose) _G.offered = vim.tbl_map("
                      "opts.format_item, items); choose(items[2]) end")
    await ui.request("nvim_command", "ClaudeNvimReview list")
    shown = await eventually(ui, f"local r = (function() {REVIEW} end)(); "
                                 "return r.tabs == 2 and r")
    assert [i["file"] for i in shown["items"]] == [str(one)]
    offered = await ui.exec_lua("return _G.offered")
    assert offered[0].startswith("2  ") and "1 file" in offered[0] and "Second." in offered[0]
    assert offered[1].startswith("1  ") and "First." in offered[1]
    await ui.request("nvim_command", "tabclose")
    shown = await review(ui, "ClaudeNvimReview 2")
    assert [i["file"] for i in shown["items"]] == [str(two)]


async def test_a_turn_past_its_file_count_says_what_it_did_not_keep(
        claude, ui, tmp_path, monkeypatch):
    import claude_nvim._review as review_feature
    from claude_nvim._review import turns
    monkeypatch.setattr(turns, "MAX_FILES", 2)
    monkeypatch.setattr(review_feature, "MAX_FILES", 2)
    await claude.prompt("Make five files.")
    for n in range(5):
        await claude.write(tmp_path / f"f{n}.txt", f"{n}\n")
    await claude.stop()
    shown = await review(ui)
    assert [i["file"] for i in shown["items"]] == [str(tmp_path / "f0.txt"),
                                                   str(tmp_path / "f1.txt")]
    said = await ui.exec_lua("return vim.api.nvim_exec2('messages', {output = true}).output")
    assert "turn 1 changed 3 more file(s), not kept (a turn keeps 2)" in said


FIVE = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"


async def two_hunks(claude, path):
    """A turn that changes lines 2 and 8 of ``path``."""
    path.write_text(FIVE)
    await claude.prompt("Two changes.")
    await claude.write(path, FIVE.replace("2\n", "two\n").replace("8\n", "eight\n"))
    await claude.stop()


async def test_a_range_takes_back_the_hunks_in_it_and_bang_the_whole_file(claude, ui, tmp_path):
    path = tmp_path / "g.txt"
    buf = await edit(ui, path) if path.exists() else None
    await two_hunks(claude, path)
    buf = await edit(ui, path)
    await ui.request("nvim_command", "5,10ClaudeNvimRevert")
    await eventually(ui, "return vim.api.nvim_buf_get_lines(0, 7, 8, false)[1] == '8'")
    assert path.read_text() == FIVE.replace("2\n", "two\n")
    await ui.request("nvim_command", "4ClaudeNvimRevert")  # no change there
    await eventually(ui, "return vim.api.nvim_exec2('messages', {output = true}).output"
                         ":find('no change of Claude', 1, true)")
    await ui.request("nvim_command", "ClaudeNvimRevert!")
    await wait_lines(ui, buf, FIVE.splitlines())
    assert path.read_text() == FIVE


async def test_taking_back_leaves_a_last_line_without_newline_as_the_file_had_it(
        claude, ui, tmp_path):
    path = tmp_path / "noeol.txt"
    path.write_bytes(b"one\ntwo\nthree")  # no newline at the end (Claude's Edit keeps it so)
    buf = await edit(ui, path)
    await claude.prompt("Number one and three.")
    await claude.edit(path, "one", "1")
    await claude.edit(path, "three", "3")
    await claude.stop()
    await wait_lines(ui, buf, ["1", "two", "3"])
    await ui.exec_lua("vim.api.nvim_win_set_cursor(0, {1, 0})")
    await ui.request("nvim_command", "ClaudeNvimRevert")  # the first hunk: the end as it is
    await wait_lines(ui, buf, ["one", "two", "3"])
    assert path.read_bytes() == b"one\ntwo\n3"
    await ui.request("nvim_command", "ClaudeNvimRevert!")
    await wait_lines(ui, buf, ["one", "two", "three"])
    assert path.read_bytes() == b"one\ntwo\nthree"  # byte for byte as before the turn


async def test_taking_back_a_whole_file_gives_back_its_last_newline(claude, ui, tmp_path):
    path = tmp_path / "eol.txt"
    path.write_bytes(b"one\ntwo\n")
    buf = await edit(ui, path)
    await ui.request("nvim_command", "setlocal nofixeol")  # files' ends kept as they are
    await claude.prompt("Rewrite it.")
    await claude.write(path, "one\n2")
    await claude.stop()
    await wait_lines(ui, buf, ["one", "2"])
    await ui.request("nvim_command", "ClaudeNvimRevert!")
    await wait_lines(ui, buf, ["one", "two"])
    assert path.read_bytes() == b"one\ntwo\n"
    assert not await ui.exec_lua("return vim.bo[...].modified", buf)


async def test_unsaved_changes_are_never_overwritten_silently(claude, ui, tmp_path):
    path = tmp_path / "h.txt"
    await two_hunks(claude, path)
    buf = await edit(ui, path)
    await ui.exec_lua("vim.api.nvim_buf_set_lines(0, 4, 5, false, {'mine'})")  # unsaved
    await ui.exec_lua("vim.api.nvim_win_set_cursor(0, {2, 0})")
    await ui.request("nvim_command", "ClaudeNvimRevert")
    await eventually(ui, "return vim.api.nvim_buf_get_lines(0, 1, 2, false)[1] == '2'")
    assert path.read_text() == FIVE.replace("2\n", "two\n").replace("8\n", "eight\n")  # not
    lines = await ui.exec_lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf)
    assert lines[4] == "mine"  # the user's change is still there
    said = await ui.exec_lua("return vim.api.nvim_exec2('messages', {output = true}).output")
    assert "not written: it has unsaved changes" in said


async def test_a_file_claude_made_is_deleted_by_bang_only(claude, ui, tmp_path):
    path = tmp_path / "new.py"
    await claude.prompt("Make a file.")
    await claude.write(path, "print(1)\n")
    await claude.stop()
    await edit(ui, path)
    await ui.request("nvim_command", "ClaudeNvimRevert")
    await eventually(ui, "return vim.api.nvim_exec2('messages', {output = true}).output"
                         ":find(':ClaudeNvimRevert! deletes it', 1, true)")
    assert path.exists()
    await ui.request("nvim_command", "ClaudeNvimRevert!")
    with trio.fail_after(WAIT):
        while path.exists():
            await trio.sleep(0.02)


SIGNS = """
local ns = vim.api.nvim_get_namespaces().claude_nvim_review_signs
return vim.tbl_map(function(m) return { m[2] + 1, vim.trim(m[4].sign_text) } end,
  vim.api.nvim_buf_get_extmarks(..., ns, 0, -1, { details = true }))
"""


async def test_signs_mark_the_last_turns_lines_until_reviewed_or_edited(claude, ui, tmp_path):
    path, other = tmp_path / "i.txt", tmp_path / "j.txt"
    path.write_text(FIVE)
    other.write_text(FIVE)
    bufs = [await edit(ui, path), await edit(ui, other)]
    await claude.prompt("Change both.")
    await claude.write(path, "1\ntwo\n3\n4\n6\n7\n8\n8.5\n9\n10\n")
    await claude.edit(other, "3", "three")
    await claude.stop()
    signs = await eventually(ui, f"local s = (function(...) {SIGNS} end)(...); "
                                 "return #s > 0 and s", bufs[0])
    assert sorted(signs) == [[2, "~"], [4, "_"], [8, "+"]]
    assert await ui.exec_lua("return require('claude_nvim.review').to_review()") == 2
    # An edit ends them in that buffer; the review ends them everywhere.
    await ui.exec_lua("vim.api.nvim_buf_set_lines(..., 0, 1, false, {'x'})", bufs[0])
    await eventually(ui, f"return #(function(...) {SIGNS} end)(...) == 0", bufs[0])
    assert await ui.exec_lua(f"return (function(...) {SIGNS} end)(...)", bufs[1]) == [
        [3, "~"]]
    await review(ui)
    assert await ui.exec_lua(f"return (function(...) {SIGNS} end)(...)", bufs[1]) == []
    assert await ui.exec_lua("return require('claude_nvim.review').to_review()") == 0


async def test_the_quickfix_list_walks_the_hunks_and_the_review_follows_the_file(
        claude, ui, tmp_path):
    one, two = tmp_path / "k.txt", tmp_path / "l.txt"
    one.write_text("a\nb\n")
    two.write_text("c\nd\n")
    await claude.prompt("Both.")
    await claude.edit(one, "b", "B")
    await claude.edit(two, "c", "C")
    await claude.stop()
    shown = await review(ui)
    assert [(i["file"], i["lnum"]) for i in shown["items"]] == [(str(one), 2), (str(two), 1)]
    await ui.request("nvim_command", "cnext")
    now = await eventually(ui, f"local r = (function() {REVIEW} end)(); "
                               "return r.wins[1].lines[1] == 'c' and r")
    before, file = now["wins"]
    assert before["before"] and before["diff"] and file["name"] == str(two) and file["diff"]
    assert "file 2 of 2" in file["winbar"]
    assert await ui.exec_lua("return vim.api.nvim_win_get_cursor(0)[1]") == 1


@pytest.mark.parametrize("layout", ["horizontal", "inline"])
async def test_the_review_takes_the_diff_layout(claude, ui, tmp_path, layout):
    await ui.exec_lua(f"vim.g.claude_nvim_opts = {{ diff = {{ layout = '{layout}' }} }}")
    path = tmp_path / "m.txt"
    path.write_text("a\nb\nc\n")
    await claude.prompt("One.")
    await claude.edit(path, "b", "B")
    await claude.stop()
    shown = await review(ui)
    if layout == "horizontal":
        before, file = shown["wins"]
        assert before["before"] and file["name"] == str(path)
        assert await ui.exec_lua("local w = vim.api.nvim_tabpage_list_wins(0); return "
                                 "vim.api.nvim_win_get_position(w[1])[1] < "
                                 "vim.api.nvim_win_get_position(w[2])[1]")  # above
        return
    (file,) = shown["wins"]  # one window: the file, Claude's lines marked, the old ones virtual
    assert file["name"] == str(path) and not file["diff"] and file["lines"] == ["a", "B", "c"]
    marks = await ui.exec_lua("""
        local ns = vim.api.nvim_get_namespaces().claude_nvim_inline
        return vim.tbl_map(function(m) return { m[2], m[4].line_hl_group or vim.NIL,
          m[4].virt_lines and m[4].virt_lines[1][1][1] or vim.NIL } end,
          vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true }))""")
    assert sorted(marks, key=str) == sorted([[1, None, "b"], [1, "DiffAdd", None]], key=str)
    await ui.request("nvim_command", "tabclose")  # the marks go with the review
    await eventually(ui, "return #vim.api.nvim_buf_get_extmarks(vim.fn.bufnr(...), vim.api."
                         "nvim_get_namespaces().claude_nvim_inline, 0, -1, {}) == 0", str(path))


@pytest.fixture
async def claude_elsewhere(nvim_address, tmp_path):
    """A stand-in claude whose paths are not Neovim's: it works in ``there``, which Neovim knows
    as ``here`` (``serve --path-map there=here``). Two copies that the test keeps the same stand
    in for one mount (a symlink would not do: Neovim finds a buffer by its file's inode)."""
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    async with running_app(nvim_address, lock_directory=tmp_path / "ide",
                           paths=PathMap([(str(there), str(here))])) as app, \
            mcp_client(app.port, app.token) as client:
        with trio.fail_after(WAIT):
            while not app.hooks.entries():
                await trio.sleep(0.02)
        yield HookedClaude(client, published_settings(app.claude_args), there), here, there


async def test_a_claude_elsewhere_has_its_turn_reviewed_in_neovims_paths(claude_elsewhere, ui):
    claude, here, there = claude_elsewhere
    for side in (here, there):
        (side / "a.py").write_text("one\ntwo\nthree\n")
    buf = await edit(ui, here / "a.py")
    await claude.prompt("Make two a number.")
    await claude.edit(there / "a.py", "two", "2")
    shutil.copy(there / "a.py", here / "a.py")  # what the mount shows Neovim
    await claude.stop()
    await eventually(ui, "return vim.api.nvim_buf_get_lines(..., 1, 2, false)[1] == '2'", buf)
    # Neovim's buffer of the file is marked, and the review names it by Neovim's path.
    assert await eventually(ui, f"local s = (function(...) {SIGNS} end)(...); "
                                "return #s > 0 and s", buf) == [[2, "~"]]
    shown = await review(ui)
    assert shown["items"] == [{"file": str(here / "a.py"), "lnum": 2,
                               "text": f"+1 {MINUS}1  2"}]
    assert [w["name"] for w in shown["wins"]][1] == str(here / "a.py")
    await ui.request("nvim_command", "tabclose")
    await ui.exec_lua("vim.api.nvim_win_set_cursor(0, {2, 0})")
    await ui.request("nvim_command", "ClaudeNvimRevert")
    await eventually(ui, "return vim.api.nvim_buf_get_lines(..., 1, 2, false)[1] == 'two'", buf)
    assert (here / "a.py").read_text() == "one\ntwo\nthree\n"


@pytest.mark.parametrize(("edit_command", "before", "after", "lines_before", "lines_after"), [
    # A DOS file ending in CTRL-Z: Neovim drops that last "line" ('endoffile').
    ("edit", b"1\r\n2\r\n3\r\n\x1a", b"1\r\ntwo\r\n3\r\n\x1a", ["1", "2", "3"],
     ["1", "two", "3"]),
    # Mac line endings: a CR ends a line, a LF is a character of it (shown as a CR).
    ("edit ++ff=mac", b"1\r2\n2\r3\r", b"1\rtwo\n2\r3\r", ["1", "2\r2", "3"],
     ["1", "two\r2", "3"]),
    # A 'binary' buffer: the bytes as they are, a BOM and CRs included.
    ("edit ++bin", b"\xef\xbb\xbf1\r\n2\r\n3\r\n", b"\xef\xbb\xbf1\r\ntwo\r\n3\r\n",
     ["\ufeff1\r", "2\r", "3\r"], ["\ufeff1\r", "two\r", "3\r"]),
], ids=["dos-ctrl-z", "mac", "binary"])
async def test_the_review_reads_a_file_as_the_reload_does(
        app, client, ui, tmp_path, edit_command, before, after, lines_before, lines_after):
    # One decoder of a file's bytes (claude_nvim.codec) for the reload and the review: the
    # review shows the one line that changed, and the text before as the buffer had it.
    path = tmp_path / "f.txt"
    path.write_bytes(before)
    buf = await ui.exec_lua("vim.cmd(... .. ' ' .. vim.fn.fnameescape(select(2, ...))); "
                            "return vim.api.nvim_get_current_buf()", edit_command, str(path))
    await wait_lines(ui, buf, lines_before)
    await eventually(ui, "return (vim.g.claude_nvim_server.claudes or {})[1] ~= nil")
    path.write_bytes(after)
    await wait_lines(ui, buf, lines_after)
    shown = await review(ui)
    assert [(i["file"], i["lnum"]) for i in shown["items"]] == [(str(path), 2)]
    old, now = shown["wins"]
    assert old["before"] and old["lines"] == lines_before
    assert now["lines"] == lines_after
