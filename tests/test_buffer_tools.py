"""getBufferText and getQuickfixList (model endpoint) against a real headless Neovim."""

from __future__ import annotations

import os

import pytest
import trio

from claude_nvim.testing import mcp_client, model_client_of
from claude_nvim.tools import get_buffer_text, get_quickfix_list
from helpers import WAIT, call, edit, error

# getBufferText


async def test_the_buffer_text_with_unsaved_changes(model, nvim, tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("one\ntwo\nthree\n")
    await edit(nvim, path)
    await nvim.request("nvim_buf_set_lines", 0, 1, 2, False, ["zwei 😀"])
    answer = await call(model, "getBufferText", {"filePath": str(path)})
    assert answer == {"uri": f"file://{path}", "startLine": 0, "endLine": 2, "totalLines": 3,
                      "isDirty": True, "text": "one\nzwei 😀\nthree"}
    assert list(answer) == ["uri", "startLine", "endLine", "totalLines", "isDirty", "text"]


async def test_a_line_range(model, nvim, tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("".join(f"line {i}\n" for i in range(10)))
    await edit(nvim, path)
    answer = await call(model, "getBufferText",
                        {"filePath": f"file://{path}", "startLine": 3, "endLine": 4})
    assert (answer["text"], answer["startLine"], answer["endLine"]) == ("line 3\nline 4", 3, 4)
    assert answer["totalLines"] == 10 and answer["isDirty"] is False
    tail = await call(model, "getBufferText", {"filePath": "a.txt", "startLine": 8})  # relative
    assert (tail["text"], tail["endLine"]) == ("line 8\nline 9", 9)
    past = await call(model, "getBufferText", {"filePath": str(path), "endLine": 99})
    assert past["endLine"] == 9 and "truncated" not in past
    one = await call(model, "getBufferText",
                     {"filePath": str(path), "startLine": 5, "endLine": 5})
    assert one["text"] == "line 5"


async def test_bad_ranges_name_the_argument(model, nvim, tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("a\nb\n")
    await edit(nvim, path)
    cases = [
        ({"filePath": str(path), "startLine": 2}, f"'startLine' 2 is past the end of {path} "
                                                  "(2 lines)"),
        ({"filePath": str(path), "startLine": 1, "endLine": 0},
         "'endLine' must not be before 'startLine'"),
        ({"filePath": str(path), "startLine": -1}, "'startLine' must be at least 0"),
        ({"filePath": str(path), "endLine": 2**63}, "'endLine' must be at most 2147483647"),
        ({"filePath": str(path), "endLine": 1.5}, "'endLine' must be of type integer"),
        ({}, "missing required argument 'filePath'"),
        ({"filePath": ""}, "'filePath' must not be empty"),
    ]
    for arguments, expected in cases:
        message = await error(model, "getBufferText", arguments)
        assert expected in message, (arguments, message)


async def test_a_file_not_open_is_an_error(model, nvim, tmp_path):
    path = tmp_path / "closed.txt"
    path.write_text("x\n")
    assert await error(model, "getBufferText", {"filePath": str(path)}) == (
        f"{path} is not open in Neovim")
    # Listed but never loaded (:badd) is not open either: its text is the file's.
    await nvim.request("nvim_command", f"badd {path}")
    assert await error(model, "getBufferText", {"filePath": str(path)}) == (
        f"{path} is not open in Neovim")


async def test_an_unmodified_buffer_is_reloaded_from_disk_first(model, nvim, tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("old\n")
    await edit(nvim, path)
    path.write_text("new\n")  # as claude does, behind Neovim's back
    answer = await call(model, "getBufferText", {"filePath": str(path)})
    assert answer["text"] == "new" and answer["isDirty"] is False


async def test_a_file_replaced_by_a_fifo_is_not_reloaded(model, nvim, tmp_path, fifo):
    pipe = fifo.rename(tmp_path / "pipe")
    fifo.write_text("one\n")
    await edit(nvim, fifo)
    os.replace(pipe, fifo)  # a neighbour puts a FIFO in its place
    with trio.fail_after(WAIT):
        answer = await call(model, "getBufferText", {"filePath": str(fifo)})
        assert answer["text"] == "one"
        assert await model.call_json("getDiagnostics", {"uri": f"file://{fifo}"}) == \
            [{"uri": f"file://{fifo}", "diagnostics": []}]
    assert await nvim.exec_lua("return 1", timeout=WAIT) == 1


@pytest.mark.usefixtures("one_mb_file_limit")
async def test_a_file_grown_past_the_size_limit_is_not_reloaded(model, nvim, tmp_path, big_file):
    path = tmp_path / "a.txt"
    path.write_text("one\n")
    await edit(nvim, path)
    os.replace(big_file, path)
    answer = await call(model, "getBufferText", {"filePath": str(path)})
    assert answer["text"] == "one" and answer["totalLines"] == 1


async def test_caps_on_lines_and_bytes(nvim_address, nvim, tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("aaaa\nbbbb\ncccc\ndddd\n")
    await edit(nvim, path)

    def limited(**limits):
        tool = get_buffer_text.make_tool(**limits)
        return model_client_of(nvim_address, tmp_path / "ide", tool)

    async with limited(max_lines=3) as model:
        answer = await call(model, "getBufferText", {"filePath": str(path)})
        assert answer == {"uri": f"file://{path}", "startLine": 0, "endLine": 2,
                          "totalLines": 4, "isDirty": False, "truncated": True,
                          "text": "aaaa\nbbbb\ncccc"}
        more = await call(model, "getBufferText", {"filePath": str(path), "startLine": 3})
        assert more["text"] == "dddd" and "truncated" not in more
    async with limited(max_bytes=10) as model:
        answer = await call(model, "getBufferText", {"filePath": str(path)})
        assert (answer["text"], answer["endLine"], answer["truncated"]) == ("aaaa\nbbbb", 1, True)
    # A line longer than the cap is cut, never inside a UTF-8 sequence.
    await nvim.request("nvim_buf_set_lines", 0, 0, -1, False, ["ééééé"])
    async with limited(max_bytes=5) as model:
        answer = await call(model, "getBufferText", {"filePath": str(path)})
        assert (answer["text"], answer["endLine"], answer["truncated"]) == ("éé", 0, True)


async def test_the_tools_are_model_tools(app, model):
    names = {"getBufferText", "getQuickfixList"}
    listed = {t["name"]: t for t in (await model.result("tools/list"))["tools"]}
    for name in names:
        assert listed[name]["annotations"]["readOnlyHint"] is True
        assert listed[name]["annotations"]["openWorldHint"] is False
    async with mcp_client(app.port, app.token) as ide:
        assert not names & {t["name"] for t in (await ide.result("tools/list"))["tools"]}


# getQuickfixList

SET_QUICKFIX = """
local path, other = ...
vim.fn.setqflist({
  { filename = path, lnum = 2, col = 16, end_lnum = 2, end_col = 17, text = 'bad thing',
    type = 'E' },
  { filename = other, lnum = 1, col = 0, text = 'see here', type = 'w' },
  { text = 'make: *** [all] Error 1' },
}, 'r')
vim.fn.setqflist({}, 'a', { title = ':make', idx = 2 })
"""


async def test_the_quickfix_list(model, nvim, tmp_path):
    path, other = tmp_path / "a.c", tmp_path / "b.c"
    path.write_text("int x;\ns = \"é😀\" + y;\n")
    other.write_text("int y;\n")
    await nvim.exec_lua(SET_QUICKFIX, str(path), str(other))
    answer = await call(model, "getQuickfixList", {})
    assert answer == {"list": "quickfix", "title": ":make", "current": 1, "items": [
        # Byte column 16 (1-based) is "y", after "é" and "😀": UTF-16 character 12. The line
        # is read from the file, as no buffer holds it loaded.
        {"uri": f"file://{path}", "line": 1, "character": 12, "endLine": 1,
         "endCharacter": 13, "type": "Error", "text": "bad thing"},
        {"uri": f"file://{other}", "line": 0, "type": "Warning", "text": "see here"},
        {"valid": False, "text": "make: *** [all] Error 1"},
    ]}
    assert list(answer) == ["list", "title", "current", "items"]


async def test_an_empty_quickfix_list(model):
    assert await call(model, "getQuickfixList", {"list": "quickfix"}) == {
        "list": "quickfix", "title": "", "items": []}


async def test_the_location_list_of_the_active_editor_window(model, nvim, tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("first\nsecond\n")
    await edit(nvim, path)
    await nvim.exec_lua("""
      vim.fn.setloclist(0, { { filename = ..., lnum = 2, col = 1, text = 'here' } }, 'r')
      vim.fn.setloclist(0, {}, 'a', { title = 'mine' })
    """, str(path))
    expected = {"list": "location", "title": "mine", "current": 0, "items": [
        {"uri": f"file://{path}", "line": 1, "character": 0, "text": "here"}]}
    assert await call(model, "getQuickfixList", {"list": "location"}) == expected
    # From a window that is no editor (like Claude's terminal): the window the user came from.
    await nvim.request("nvim_command", "new | setlocal buftype=nofile")
    assert await call(model, "getQuickfixList", {"list": "location"}) == expected
    await nvim.request("nvim_command", "only")
    assert await error(model, "getQuickfixList", {"list": "location"}) == (
        "No editor window: a location list belongs to a window")


async def test_the_quickfix_list_is_capped(nvim_address, nvim, tmp_path):
    await nvim.exec_lua("""
      local items = {}
      for i = 1, 5 do items[i] = { text = ('item %d %s'):format(i, ('x'):rep(50)) } end
      vim.fn.setqflist(items, 'r')
    """)
    small = get_quickfix_list.make_tool(max_items=2, max_text_bytes=6)
    async with model_client_of(nvim_address, tmp_path / "ide", small) as model:
        answer = await call(model, "getQuickfixList", {})
    assert answer["truncated"] is True and answer["total"] == 5
    assert [item["text"] for item in answer["items"]] == ["item 1", "item 2"]


async def test_a_bad_list_name(model):
    message = await error(model, "getQuickfixList", {"list": "loclist"})
    assert "'list' must be one of 'quickfix', 'location'" in message
