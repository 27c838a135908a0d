"""openFile, getWorkspaceFolders, checkDocumentDirty and saveDocument on a real Neovim."""

from __future__ import annotations

import os
from urllib.parse import quote

import pytest
import trio

from claude_nvim._core import max_file_bytes
from helpers import WAIT


@pytest.fixture
def ui_size():
    # Wider than conftest's: at 80 columns, openFile of a file with a bad modeline stops Neovim
    # at a hit-enter prompt (test_a_bad_modeline_is_neovims_message_not_a_failed_open).
    return 100, 30


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "my file.py"
    path.write_text("def f():\n    return 1\n\nclass C:\n    pass\n")
    return path


async def state(nvim):
    return await nvim.exec_lua("""
      local win = vim.api.nvim_get_current_win()
      return {name = vim.api.nvim_buf_get_name(0), win = win,
              tab = vim.api.nvim_get_current_tabpage(),
              mode = vim.api.nvim_get_mode().mode, cursor = vim.api.nvim_win_get_cursor(win),
              wins = #vim.api.nvim_tabpage_list_wins(0)}""")


async def test_open_file_focuses_a_normal_window(client, ui, source):
    result = await client.call_tool("openFile", {"filePath": str(source)})
    assert result["content"][0]["text"] == f"Opened file: {source}"
    assert (await state(ui))["name"] == str(source)


@pytest.mark.parametrize("as_uri", [
    lambda p: "file://" + str(p),
    lambda p: "file://" + quote(str(p)),
    lambda p: "~/" + os.path.relpath(p, os.path.expanduser("~")),
])
async def test_open_file_takes_uris_and_home_paths(client, ui, source, as_uri):
    await client.call_tool("openFile", {"filePath": as_uri(source)})
    assert (await state(ui))["name"] == str(source)


async def test_a_missing_file_is_a_clear_error(client, ui, tmp_path):
    result = await client.call_tool("openFile", {"filePath": str(tmp_path / "nope.py")})
    assert result["isError"] is True
    assert result["content"][0]["text"] == f"File not found: {tmp_path / 'nope.py'}"


async def test_lines_are_selected_linewise(client, ui, source):
    result = await client.call_tool("openFile", {"filePath": str(source),
                                                 "startLine": 2, "endLine": 4})
    assert result["content"][0]["text"] == "Opened file and selected lines 2 to 4"
    selection = await client.call_json("getCurrentSelection")
    assert selection["text"] == "    return 1\n\nclass C:"
    assert selection["selection"]["start"] == {"line": 1, "character": 0}


async def test_text_is_selected_from_start_to_end_text(client, ui, source):
    result = await client.call_tool("openFile", {"filePath": str(source),
                                                 "startText": "return", "endText": "class"})
    assert result["content"][0]["text"] == 'Opened file and selected text from "return" to "class"'
    assert (await client.call_json("getCurrentSelection"))["text"] == "return 1\n\nclass"
    missing = await client.call_tool("openFile", {"filePath": str(source), "startText": "zzz"})
    assert missing["content"][0]["text"] == 'Opened file, but text "zzz" not found'
    no_end = await client.call_tool("openFile", {"filePath": str(source),
                                                 "startText": "class", "endText": "zzz"})
    assert no_end["content"][0]["text"] == \
        'Opened file and positioned at "class" (end text "zzz" not found)'
    assert (await state(ui))["cursor"] == [4, 0]


async def test_make_frontmost_false_loads_without_moving_the_user(client, ui, source, tmp_path):
    other = tmp_path / "other.txt"
    other.write_text("x\n")
    await ui.request("nvim_command", f"edit {other}")
    await ui.request("nvim_input", "i")
    before = await state(ui)
    answer = await client.call_json("openFile", {
        "filePath": "file://" + str(source), "preview": False, "startText": "", "endText": "",
        "selectToEndOfLine": False, "makeFrontmost": False})
    assert answer == {"success": True, "filePath": str(source), "languageId": "python",
                      "lineCount": 5}
    assert await state(ui) == before
    listed = await ui.exec_lua("return vim.fn.buflisted(...)", str(source))
    assert listed == 1


@pytest.mark.parametrize("setup", [
    "terminal",                                                  # a terminal window
    "enew | setlocal buftype=nofile | vertical leftabove 20vsplit | setlocal winfixwidth"
    " | setlocal filetype=NvimTree",                             # a sidebar beside a scratch
])
async def test_open_file_never_lands_in_a_terminal_or_sidebar(client, ui, source, setup):
    await ui.request("nvim_command", setup)
    refused = await ui.exec_lua(
        "return {vim.api.nvim_get_current_win(), vim.api.nvim_get_current_buf()}")
    await client.call_tool("openFile", {"filePath": str(source)})
    now = await state(ui)
    assert now["name"] == str(source)
    buf_in_refused = await ui.exec_lua("return vim.api.nvim_win_get_buf(...)", refused[0])
    assert buf_in_refused == refused[1]
    assert now["mode"] == "n"


async def test_workspace_folders(client, ui, tmp_path):
    answer = await client.call_json("getWorkspaceFolders")
    assert answer == {"success": True, "rootPath": str(tmp_path), "folders": [
        {"name": tmp_path.name, "uri": "file://" + str(tmp_path), "path": str(tmp_path),
         "index": 0}]}


async def test_check_document_dirty(client, ui, source, tmp_path):
    unopened = await client.call_json("checkDocumentDirty", {"filePath": str(tmp_path / "x")})
    assert unopened == {"success": False, "message": f"Document not open: {tmp_path / 'x'}"}
    await ui.request("nvim_command", f"edit {source.as_posix().replace(' ', chr(92) + ' ')}")
    clean = await client.call_json("checkDocumentDirty", {"filePath": str(source)})
    assert clean == {"success": True, "filePath": str(source), "isDirty": False,
                     "isUntitled": False}
    await ui.request("nvim_input", "ggdd")
    with trio.fail_after(WAIT):
        while not (await client.call_json("checkDocumentDirty",
                                          {"filePath": str(source)}))["isDirty"]:
            await trio.sleep(0.01)


async def test_save_document_writes_the_buffer_without_moving_the_user(client, ui, source,
                                                                        tmp_path):
    await ui.request("nvim_command", f"edit {source.as_posix().replace(' ', chr(92) + ' ')}")
    await ui.exec_lua("vim.api.nvim_buf_set_lines(0, 0, 1, false, {'def g():'})")
    await ui.request("nvim_command", f"vsplit {tmp_path / 'other.txt'}")
    before = await state(ui)
    answer = await client.call_json("saveDocument", {"filePath": str(source)})
    assert answer == {"success": True, "filePath": str(source), "saved": True,
                      "message": "Document saved successfully"}
    assert source.read_text().startswith("def g():\n")
    assert await state(ui) == before


async def test_save_document_reports_failures(client, ui, tmp_path):
    missing_dir = tmp_path / "gone" / "f.txt"
    await ui.request("nvim_command", f"edit {missing_dir}")
    await ui.exec_lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, {'x'})")
    answer = await client.call_json("saveDocument", {"filePath": str(missing_dir)})
    assert answer["success"] is False
    assert answer["filePath"] == str(missing_dir)
    assert answer["message"].startswith("Failed to save file: ")
    assert await ui.exec_lua("return vim.bo.modified") is True  # nothing lost
    unopened = await client.call_json("saveDocument", {"filePath": str(tmp_path / "x")})
    assert unopened == {"success": False, "message": f"Document not open: {tmp_path / 'x'}"}


async def test_listed_in_tools_list(client):
    names = {t["name"] for t in (await client.result("tools/list"))["tools"]}
    assert {"openFile", "getWorkspaceFolders", "checkDocumentDirty", "saveDocument"} <= names
    assert "close_tab" not in names


async def test_open_file_never_abandons_a_modified_buffer(client, ui, source, tmp_path):
    mine = tmp_path / "mine.txt"
    mine.write_text("saved\n")
    await ui.request("nvim_command", "set nohidden autowrite")
    await ui.request("nvim_command", f"edit {mine}")
    await ui.exec_lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, {'typing'})")
    result = await client.call_tool("openFile", {"filePath": str(source)})
    assert not result.get("isError"), result
    assert mine.read_text() == "saved\n"  # not written behind the user's back
    shown = await ui.exec_lua("return vim.tbl_map(function(w) return vim.api.nvim_buf_get_name("
                              "vim.api.nvim_win_get_buf(w)) end, vim.api.nvim_list_wins())")
    assert str(mine) in shown and str(source) in shown  # beside it, in a split


async def test_a_missing_file_without_focus_is_a_success_false_answer(client, tmp_path):
    answer = await client.call_json("openFile", {"filePath": str(tmp_path / "nope.py"),
                                                 "makeFrontmost": False})
    assert answer == {"success": False, "message": f"File not found: {tmp_path / 'nope.py'}"}


async def test_save_document_never_prompts_or_overwrites_a_newer_file(client, ui, tmp_path):
    path = tmp_path / "shared.txt"
    path.write_text("original\n")
    await ui.request("nvim_command", f"edit {path}")
    await ui.exec_lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, {'my edit'})")
    path.write_text("written by claude\n")
    os.utime(path, (os.stat(path).st_atime, os.stat(path).st_mtime + 5))
    answer = await client.call_json("saveDocument", {"filePath": str(path)})
    assert answer["success"] is False
    assert "changed on disk" in answer["message"]
    assert path.read_text() == "written by claude\n"
    assert await ui.request("nvim_get_mode") == {"mode": "n", "blocking": False}
    assert await ui.exec_lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == ["my edit"]


# Files that would block or swamp Neovim are refused before it touches them (issue 11).


async def test_open_file_refuses_a_fifo_and_neovim_stays_responsive(client, ui, fifo):
    for frontmost in (True, False):
        with trio.fail_after(WAIT):
            result = await client.call_tool("openFile", {"filePath": str(fifo),
                                                         "makeFrontmost": frontmost})
        assert result["isError"] is True
        assert result["content"][0]["text"] == f"{fifo} is not a regular file (a FIFO)"
    # Neovim answers at once and kept no buffer for it.
    assert await ui.exec_lua("return vim.fn.bufnr(...)", str(fifo), timeout=WAIT) == -1


@pytest.mark.usefixtures("one_mb_file_limit")
async def test_open_file_refuses_a_file_over_the_size_limit(client, ui, big_file, source):
    for frontmost in (True, False):
        result = await client.call_tool("openFile", {"filePath": str(big_file),
                                                     "makeFrontmost": frontmost})
        assert result["isError"] is True
        assert result["content"][0]["text"] == (
            f"{big_file} is 1.5 MB, over claude-nvim's limit of 1 MB for opening files "
            "(CLAUDE_NVIM_MAX_FILE_MB)")
    assert await ui.exec_lua("return vim.fn.bufnr(...)", str(big_file)) == -1
    assert not (await client.call_tool("openFile", {"filePath": str(source)})).get("isError")
    # A file the user has open already is just shown.
    await ui.request("nvim_command", f"edit {big_file} | enew")
    result = await client.call_tool("openFile", {"filePath": str(big_file), "startLine": 3})
    assert result["content"][0]["text"] == "Opened file and selected lines 3 to 3"


def test_the_file_size_limit_setting(monkeypatch, caplog):
    monkeypatch.delenv("CLAUDE_NVIM_MAX_FILE_MB", raising=False)
    assert max_file_bytes() == 50 * 2**20
    assert max_file_bytes(0.5) == 2**19
    monkeypatch.setenv("CLAUDE_NVIM_MAX_FILE_MB", "200")
    assert max_file_bytes() == 200 * 2**20
    for bad in ("lots", "0", "-1", "inf", "nan"):
        monkeypatch.setenv("CLAUDE_NVIM_MAX_FILE_MB", bad)
        assert max_file_bytes() == 50 * 2**20
        assert f"CLAUDE_NVIM_MAX_FILE_MB={bad!r} is not a number of megabytes" in caplog.text
    with pytest.raises(ValueError, match="positive number of MB"):
        max_file_bytes(0)


BAD_MODELINES = {"e518.c": "int x;\n/* vim: set nosuchoption: */\n",
                 "e992.txt": "text\n# vim: set foldexpr=1:\n"}


async def test_a_bad_modeline_is_neovims_message_not_a_failed_open(client, ui, tmp_path):
    await ui.request("nvim_command", "set modeline")  # the default, but not under --clean
    for (name, text), frontmost in zip(BAD_MODELINES.items(), (True, False), strict=True):
        path = tmp_path / name
        path.write_text(text)
        result = await client.call_tool("openFile", {"filePath": str(path),
                                                     "makeFrontmost": frontmost})
        assert not result.get("isError"), result
        assert await ui.exec_lua(
            "local b = vim.fn.bufnr(...); return vim.api.nvim_buf_is_loaded(b) "
            "and vim.bo[b].buflisted and vim.api.nvim_buf_get_lines(b, 0, -1, false)",
            str(path)) == text.splitlines()
    assert await ui.exec_lua("return vim.api.nvim_buf_get_name(0)") == \
        str(tmp_path / "e518.c")
    assert await ui.request("nvim_get_mode") == {"mode": "n", "blocking": False}  # no prompt
    messages = await ui.request("nvim_exec2", "messages", {"output": True})
    assert "E518: Unknown option: nosuchoption" in messages["output"]
    assert "E992: Not allowed in a modeline" in messages["output"]
