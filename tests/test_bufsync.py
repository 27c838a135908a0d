"""Buffers follow their files (lua/bufsync.lua) against a real headless Neovim with
a UI attached: files written behind Neovim's back, as Claude Code writes them in its auto and
acceptEdits modes, show up in their buffers with no prompt; a buffer with unsaved changes is
never touched."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import trio

import claude_nvim
from claude_nvim.testing import running_app
from helpers import edit, inotify_watches, messages

BUFSYNC_LUA = Path(claude_nvim.__file__).parent / "_bufsync" / "bufsync.lua"


async def watches(nvim) -> int:
    return inotify_watches(await nvim.request("nvim_call_function", "getpid", []))


# Counts the reloads of each buffer: Neovim's FileChangedShellPost follows every one.
COUNT_RELOADS = """
vim.g.reloads = {}
vim.api.nvim_create_autocmd('FileChangedShellPost', { callback = function(ev)
  local reloads = vim.g.reloads
  reloads[tostring(ev.buf)] = (reloads[tostring(ev.buf)] or 0) + 1
  vim.g.reloads = reloads
end })
"""


@pytest.fixture
async def ui(ui):
    """The UI (a prompt would really stop Neovim), with each buffer's reloads counted."""
    await ui.exec_lua(COUNT_RELOADS)
    return ui


def numbered(count: int, word: str = "line") -> str:
    return "".join(f"{word} {i}\n" for i in range(1, count + 1))


def rename_over(path: Path, text: str) -> None:
    """Write as editors and formatters save atomically: a new file renamed over the old."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


async def lines(nvim, buf: int) -> list[str]:
    return await nvim.request("nvim_buf_get_lines", buf, 0, -1, False)


async def eventually_lines(nvim, buf: int, expected: list[str], timeout: float = 5.0) -> None:
    with trio.fail_after(timeout):
        while await lines(nvim, buf) != expected:
            await trio.sleep(0.01)


async def eventually_message(nvim, text: str, timeout: float = 5.0) -> str:
    with trio.fail_after(timeout):
        while text not in (found := await messages(nvim)):
            await trio.sleep(0.01)
    return found


async def not_blocked(nvim) -> bool:
    """Neovim waits for no answer: no dialog, no hit-enter prompt."""
    return await nvim.request("nvim_get_mode") == {"mode": "n", "blocking": False}


async def barrier(nvim, directory: Path) -> None:
    """Wait until the events of the writes made so far in ``directory`` were handled: a
    marker file's buffer there is reloaded after them (one watcher, events in order)."""
    marker = directory / "marker.txt"
    marker.write_text("0\n")
    buf = await nvim.exec_lua("local b = vim.fn.bufadd(...); vim.fn.bufload(b); return b",
                              str(marker))
    marker.write_text("1\n")
    await eventually_lines(nvim, buf, ["1"])


async def test_a_file_written_in_place_shows_up_keeping_every_view(app, ui, tmp_path):
    path = tmp_path / "main.py"
    path.write_text(numbered(100))
    buf = await edit(ui, path)
    await ui.request("nvim_command", "normal! 50Gzt")  # cursor on line 50, at the window's top
    await ui.request("nvim_command", "tab split | 80")  # another tab, cursor on line 80
    await ui.request("nvim_command", "tabprevious | split | 20 | wincmd p")  # and a split: 20
    path.write_text(numbered(100, "LINE"))  # in place: truncate and write the same inode
    await eventually_lines(ui, buf, [f"LINE {i}" for i in range(1, 101)])
    views = await ui.exec_lua("""
      local out = {}
      for _, win in ipairs(vim.api.nvim_list_wins()) do
        out[#out + 1] = vim.api.nvim_win_call(win, vim.fn.winsaveview)
      end
      return out""")
    assert [(v["lnum"], v["topline"]) for v in views] == [
        (20, views[0]["topline"]), (50, 50), (80, views[2]["topline"])]
    assert await ui.exec_lua("return vim.bo[...].modified", buf) is False
    assert await not_blocked(ui)
    path.write_text(numbered(30, "short"))  # the cursor's line is gone: it stays in the text
    await eventually_lines(ui, buf, [f"short {i}" for i in range(1, 31)])
    assert (await ui.request("nvim_win_get_cursor", 0))[0] == 30
    assert "claude-nvim" not in await messages(ui)


async def test_a_file_replaced_by_rename_shows_up_every_time(app, ui, tmp_path):
    path = tmp_path / "main.py"
    path.write_text("foo()\n")
    buf = await edit(ui, path)
    for text in ("bar()", "baz()", "qux()"):  # the watch outlives each replaced inode
        rename_over(path, text + "\n")
        await eventually_lines(ui, buf, [text])
    assert await not_blocked(ui)
    assert await ui.exec_lua("return vim.g.reloads[tostring(...)]", buf) == 3


async def test_a_buffer_with_unsaved_changes_is_left_alone_with_one_warning(app, ui, tmp_path):
    path = tmp_path / "main.py"
    path.write_text("foo()\n")
    buf = await edit(ui, path)
    await ui.request("nvim_buf_set_lines", buf, 0, -1, True, ["mine()"])
    path.write_text("claude()\n")
    shown = await eventually_message(ui, "main.py changed on disk")
    assert ":e! loads the file" in shown and ":w writes your version" in shown
    assert await not_blocked(ui)
    rename_over(path, "claude_again()\n")  # still the same conflict: no second warning
    await barrier(ui, tmp_path)
    # Neovim's own check (as on focus gained, after :!cmd) stops at no dialog either.
    with trio.fail_after(5):
        await ui.request("nvim_command", "checktime")
    assert await not_blocked(ui)
    assert await lines(ui, buf) == ["mine()"]
    assert await ui.exec_lua("return vim.bo[...].modified", buf) is True
    assert (await messages(ui)).count("main.py changed on disk") == 1
    assert path.read_text() == "claude_again()\n"  # nor was the file written


async def test_a_deleted_file_keeps_its_buffer_with_a_warning(app, ui, tmp_path):
    path = tmp_path / "main.py"
    path.write_text("foo()\n")
    buf = await edit(ui, path)
    path.unlink()
    await eventually_message(ui, "main.py was deleted on disk; the buffer keeps its text")
    assert await lines(ui, buf) == ["foo()"]
    assert await ui.request("nvim_buf_is_loaded", buf)
    with trio.fail_after(5):  # Neovim's own check would stall a second on its message
        await ui.request("nvim_command", "checktime")
    assert await not_blocked(ui)
    path.write_text("back()\n")  # the file comes back: the buffer follows it again
    await eventually_lines(ui, buf, ["back()"])


async def test_a_hidden_buffer_follows_its_file(app, ui, tmp_path):
    hidden, shown = tmp_path / "hidden.py", tmp_path / "shown.py"
    hidden.write_text(numbered(20))
    shown.write_text("x\n")
    buf = await edit(ui, hidden)
    await ui.request("nvim_command", "12")
    await ui.request("nvim_command", "set hidden")
    await edit(ui, shown)
    assert await ui.exec_lua("return vim.fn.bufwinid(...)", buf) == -1
    hidden.write_text(numbered(20, "new"))
    await eventually_lines(ui, buf, [f"new {i}" for i in range(1, 21)])
    assert await not_blocked(ui)
    await edit(ui, hidden)  # shown again, where the user left it
    assert (await ui.request("nvim_win_get_cursor", 0))[0] == 12


async def test_saving_in_neovim_reloads_nothing_and_warns_nothing(app, ui, tmp_path):
    path = tmp_path / "main.py"
    path.write_text("foo()\n")
    buf = await edit(ui, path)
    await ui.request("nvim_buf_set_lines", buf, 0, -1, True, ["mine()"])
    await ui.request("nvim_command", "write")
    await ui.request("nvim_command", "saveas " + str(tmp_path / "other.py"))
    await barrier(ui, tmp_path)
    assert await ui.exec_lua("return vim.g.reloads[tostring(...)]", buf) is None
    assert "claude-nvim" not in await messages(ui)
    # Renamed by :saveas: the buffer now follows other.py, and not main.py.
    path.write_text("main()\n")
    (tmp_path / "other.py").write_text("other()\n")
    await eventually_lines(ui, buf, ["other()"])


async def test_a_thousand_buffers_take_one_watcher_per_directory(app, ui, tmp_path):
    directories = [tmp_path / f"d{i}" for i in range(4)]
    paths = []
    for number in range(1000):
        directory = directories[number % 4]
        directory.mkdir(exist_ok=True)
        paths.append(directory / f"f{number}.txt")
        paths[-1].write_text(f"{number}\n")
    bufs = await ui.exec_lua("""
      local bufs = {}
      for i, path in ipairs(...) do
        bufs[i] = vim.fn.bufadd(path)
        vim.fn.bufload(bufs[i])
      end
      return bufs""", [str(p) for p in paths], timeout=60)
    assert await watches(ui) == 4
    for index in (0, 999):
        paths[index].write_text("changed\n")
        await eventually_lines(ui, bufs[index], ["changed"])
    await ui.exec_lua("for _, b in ipairs(...) do vim.api.nvim_buf_delete(b, {}) end", bufs,
                      timeout=60)
    assert await watches(ui) == 0


async def test_a_stopped_server_leaves_no_watcher_behind(nvim_address, ui, tmp_path):
    path = tmp_path / "main.py"
    path.write_text("foo()\n")
    buf = await edit(ui, path)
    assert await watches(ui) == 0
    async with running_app(nvim_address, lock_directory=tmp_path / "ide"):
        assert await watches(ui) == 1
        rename_over(path, "bar()\n")
        await eventually_lines(ui, buf, ["bar()"])
    assert await watches(ui) == 0
    assert await ui.exec_lua(
        "return #vim.api.nvim_get_autocmds({ event = 'FileChangedShell' })") == 0


async def test_after_a_reload_the_tools_see_the_new_text(app, client, ui, tmp_path):
    path = tmp_path / "main.py"
    path.write_text("foo()\n")
    buf = await edit(ui, path)
    await ui.exec_lua("vim.diagnostic.set(vim.api.nvim_create_namespace('t'), ..., "
                      "{{ lnum = 0, col = 0, end_col = 3, message = 'm' }})", buf)
    end = {"line": 0, "character": 3}
    [before] = await client.call_json("getDiagnostics", {"uri": path.as_uri()})
    assert before["diagnostics"][0]["range"]["end"] == end
    path.write_text("bä()\n")  # byte 3 is now after "bä": UTF-16 character 2
    await eventually_lines(ui, buf, ["bä()"])
    [after] = await client.call_json("getDiagnostics", {"uri": path.as_uri()})
    assert after["diagnostics"][0]["range"]["end"] == {"line": 0, "character": 2}
    await ui.request("nvim_input", "0vl")
    assert (await client.call_json("getCurrentSelection"))["text"] == "bä"


async def test_a_new_file_buffer_shows_the_file_once_it_is_written(app, ui, tmp_path):
    path = tmp_path / "new.py"
    buf = await edit(ui, path)
    path.write_text("created()\n")
    await eventually_lines(ui, buf, ["created()"])


async def test_a_hidden_new_file_buffer_shows_the_file_once_it_is_written(app, ui, tmp_path):
    path = tmp_path / "new.py"
    buf = await ui.exec_lua("local b = vim.fn.bufadd(...); vim.fn.bufload(b); return b",
                            str(path))
    path.write_text("created()\n")
    await eventually_lines(ui, buf, ["created()"])
    assert await ui.exec_lua("return vim.bo[...].modified", buf) is False
    assert await not_blocked(ui)


async def test_the_lua_module_names_its_file(app, ui):
    source = await ui.exec_lua(
        "return debug.getinfo(require('claude_nvim.bufsync').setup, 'S').source")
    assert source == "@" + str(BUFSYNC_LUA)
    assert BUFSYNC_LUA.is_file()


async def test_a_directory_removed_and_brought_back_is_followed_again(app, ui, tmp_path):
    # As `git checkout` does to a directory the other branch lacks.
    directory = tmp_path / "pkg"
    directory.mkdir()
    path = directory / "mod.py"
    path.write_text("one()\n")
    buf = await edit(ui, path)
    shutil.rmtree(directory)
    await eventually_message(ui, "pkg/mod.py was deleted on disk")
    directory.mkdir()
    path.write_text("two()\n")
    await eventually_lines(ui, buf, ["two()"])
    path.write_text("three()\n")  # and the new directory is watched for good
    await eventually_lines(ui, buf, ["three()"])
    assert await watches(ui) == 1


async def test_a_file_in_a_directory_yet_to_be_made_shows_up_once_written(app, ui, tmp_path):
    path = tmp_path / "new" / "deeper" / "mod.py"
    buf = await edit(ui, path)
    path.parent.mkdir(parents=True)
    path.write_text("made()\n")
    await eventually_lines(ui, buf, ["made()"])


async def test_many_files_changed_at_once_warn_without_a_prompt(app, ui, tmp_path):
    # git checkout under three buffers with unsaved changes, and one deleted file.
    paths = [tmp_path / f"m{i}.py" for i in range(4)]
    bufs = []
    for path in paths:
        path.write_text("old()\n")
        bufs.append(await edit(ui, path))
        await ui.request("nvim_buf_set_lines", bufs[-1], 0, -1, True, ["mine()"])
    await ui.request("nvim_command", "set hidden")
    for path in paths[:3]:
        path.write_text("theirs()\n")
    paths[3].unlink()
    await eventually_message(ui, "m3.py")
    await barrier(ui, tmp_path)
    assert await not_blocked(ui)
    shown = await messages(ui)
    assert all(f"m{i}.py" in shown for i in range(4))
    assert [await lines(ui, buf) for buf in bufs] == [["mine()"]] * 4
