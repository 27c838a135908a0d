"""Buffers follow their files (lua/bufsync.lua) against a real headless Neovim with
a UI attached: files written behind Neovim's back, as Claude Code writes them in its auto and
acceptEdits modes, show up in their buffers with no prompt; a buffer with unsaved changes is
never touched."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
from functools import partial
from pathlib import Path

import pytest
import trio

import claude_nvim
from claude_nvim._nvim.headless import find_nvim
from claude_nvim.testing import running_app
from helpers import WAIT, Gate, edit, inotify_watches, messages

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


async def eventually_lines(nvim, buf: int, expected: list[str], timeout: float = WAIT) -> None:
    with trio.fail_after(timeout):
        while await lines(nvim, buf) != expected:
            await trio.sleep(0.01)


async def eventually_message(nvim, text: str, timeout: float = WAIT) -> str:
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
    with trio.fail_after(WAIT):
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
    with trio.fail_after(WAIT):  # Neovim's own check would stall a second on its message
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
      return bufs""", [str(p) for p in paths], timeout=5 * WAIT)  # a busy machine: minutes
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
    # Its 'noautoread' (Neovim's own checks come to bufsync) is gone with it.
    assert await ui.exec_lua("return vim.api.nvim_buf_call(..., function() return "
                             "vim.api.nvim_get_option_value('autoread', { scope = 'local' })"
                             " end)", buf) is None


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


# A reload is the smallest change, one undo step (issue 18)


async def undo(nvim, buf: int) -> None:
    await nvim.exec_lua("vim.api.nvim_buf_call(..., function() vim.cmd('undo') end)", buf)


async def test_a_reload_is_one_undo_step_after_the_users_own(app, ui, tmp_path):
    path = tmp_path / "main.py"
    path.write_text(numbered(30))
    buf = await edit(ui, path)
    await ui.request("nvim_command", "set undoreload=10")  # a "big" file: old reloads wiped undo
    await ui.request("nvim_input", "ggdd:w<CR>")  # the user's own change, saved
    await eventually_lines(ui, buf, [f"line {i}" for i in range(2, 31)])
    with path.open("a") as log:
        log.write("appended\n")
    await eventually_lines(ui, buf, [f"line {i}" for i in range(2, 31)] + ["appended"])
    assert await ui.exec_lua("return vim.bo[...].modified", buf) is False
    await undo(ui, buf)  # takes back the reload, and only it
    assert await lines(ui, buf) == [f"line {i}" for i in range(2, 31)]
    assert await ui.exec_lua("return vim.bo[...].modified", buf) is True  # not the file now
    await undo(ui, buf)  # the user's history is still there
    assert await lines(ui, buf) == [f"line {i}" for i in range(1, 31)]


async def test_a_reload_keeps_marks_cursor_and_folds_on_their_lines(app, ui, tmp_path):
    path = tmp_path / "main.py"
    path.write_text(numbered(40))
    buf = await edit(ui, path)
    await ui.request("nvim_command", "20 | mark a | 30,32fold | 25")
    path.write_text("".join(f"new {i}\n" for i in range(5)) + numbered(40))  # 5 lines above
    await eventually_lines(ui, buf, [f"new {i}" for i in range(5)] + numbered(40).splitlines())
    state = await ui.exec_lua("""return { mark = vim.fn.line("'a"), cursor = vim.fn.line('.'),
                                         fold = vim.fn.foldclosed(36) }""")
    assert state == {"mark": 25, "cursor": 30, "fold": 35}


async def test_an_append_is_told_to_attached_clients_as_the_appended_lines(app, ui, tmp_path):
    # LSP clients follow nvim_buf_attach's on_lines; a whole reload is one on_reload instead.
    path = tmp_path / "app.log"
    path.write_text(numbered(100))
    buf = await edit(ui, path)
    await ui.exec_lua("""
      _G.told = {}
      vim.api.nvim_buf_attach(..., false, {
        on_lines = function(_, _, _, first, last, new_last)
          table.insert(_G.told, { first, last, new_last })
        end,
        on_reload = function() table.insert(_G.told, 'reload') end,
      })""", buf)
    with path.open("a") as log:
        log.write("line 101\nline 102\n")
    await eventually_lines(ui, buf, numbered(102).splitlines())
    assert await ui.exec_lua("return _G.told") == [[100, 100, 102]]


async def test_after_a_reload_a_write_asks_nothing(app, ui, tmp_path):
    path = tmp_path / "main.py"
    path.write_text("one\n")
    buf = await edit(ui, path)
    await trio.sleep(0.02)  # the next write gets another mtime
    path.write_text("one\ntwo\n")
    await eventually_lines(ui, buf, ["one", "two"])
    await ui.request("nvim_input", "Gothree<Esc>:w<CR>")
    with trio.fail_after(WAIT):
        while path.read_text() != "one\ntwo\nthree\n":
            await trio.sleep(0.01)
    assert await not_blocked(ui)  # no "The file has been changed since reading it!!!"
    assert "WARNING" not in await messages(ui)
    # A touch alone, which Neovim's own check finds: nothing to reload, and still no prompt.
    os.utime(path, (1, 1))
    await ui.request("nvim_command", "checktime")
    # nvim_input is a fast call: its keys may go ahead of what the check scheduled, which a
    # user's keys never do (they come a round of the event loop later). One plain call first.
    await ui.request("nvim_eval", "1")
    await ui.request("nvim_input", "Gofour<Esc>:w<CR>")
    with trio.fail_after(WAIT):
        while path.read_text() != "one\ntwo\nthree\nfour\n":
            await trio.sleep(0.01)
    assert await not_blocked(ui)


@pytest.mark.parametrize(("written", "options", "shown"), [
    (b"one\r\ntwo\r\n", {"fileformat": "dos", "eol": True}, ["one", "two"]),
    (b"one\ntwo", {"fileformat": "unix", "eol": False}, ["one", "two"]),
    (b"\xef\xbb\xbfone\ntwo\n", {"bomb": True, "eol": True}, ["one", "two"]),
    (b"caf\xe9\ntwo\n", {"fileencoding": "latin1"}, ["café", "two"]),
    (b"two\nt\x00o\n", {"binary": True}, ["two", "t\x00o"]),
])
async def test_a_reload_reads_as_neovim_reads_the_file(app, ui, tmp_path, written, options,
                                                        shown):
    path = tmp_path / "f.txt"
    path.write_bytes(written.replace(b"two", b"old"))
    binary = "++bin " if options.get("binary") else ""
    await ui.request("nvim_command", f"edit {binary}{path}")
    buf = await ui.request("nvim_get_current_buf")
    path.write_bytes(written)
    await eventually_lines(ui, buf, shown)
    for name, value in options.items():
        assert await ui.request("nvim_get_option_value", name, {"buf": buf}) == value, name
    assert await ui.exec_lua("return vim.bo[...].modified", buf) is False
    await ui.request("nvim_command", "setlocal nofixeol | write")  # it writes back what it read
    assert path.read_bytes() == written


# Files that must not be read: never opened by path (issue 18)


def put_fifo_after_each_stat(path: Path) -> str:
    """Lua that makes a racing neighbour of ``path``: right after any stat of it, a FIFO takes
    its place, and before the next stat the regular file is back. Whatever checks the path and
    then opens it by path opens the FIFO."""
    return f"""
      local uv, path, fifo, file = vim.uv or vim.loop, {str(path)!r}, {str(path) + '.fifo'!r},
        {str(path) + '.file'!r}
      local fs_stat = uv.fs_stat
      _G.restore_stat = function() uv.fs_stat = fs_stat end
      uv.fs_stat = function(p, ...)
        if p ~= path then return fs_stat(p, ...) end
        if fs_stat(file) then uv.fs_rename(path, fifo); uv.fs_rename(file, path) end
        local stat = fs_stat(p, ...)
        uv.fs_rename(path, file); uv.fs_rename(fifo, path)
        return stat
      end"""


def release(fifo: Path) -> None:
    """Let go a Neovim stuck opening ``fifo`` (a writer came), so the test can end."""
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


async def test_a_file_swapped_for_a_fifo_after_its_check_never_blocks_neovim(app, ui, tmp_path):
    path = tmp_path / "main.py"
    path.write_text("one\n")
    buf = await edit(ui, path)
    (tmp_path / "main.py.file").write_text("one\ntwo\n")
    os.mkfifo(tmp_path / "main.py.fifo")
    os.replace(tmp_path / "main.py.fifo", path)
    os.mkfifo(tmp_path / "main.py.fifo")
    await ui.exec_lua(put_fifo_after_each_stat(path))
    try:
        with trio.fail_after(WAIT):
            await eventually_message(ui, "main.py is not a regular file (a FIFO); not reloaded")
            await ui.exec_lua("_G.restore_stat()")
    finally:
        release(path)
        release(tmp_path / "main.py.fifo")
    assert await lines(ui, buf) == ["one"]


@pytest.mark.parametrize("autoread", ["autoread", "noautoread"])
@pytest.mark.parametrize("check", ["checktime", "focus"])
async def test_neovims_own_checks_never_open_a_fifo(app, ui, tmp_path, autoread, check):
    path = tmp_path / "main.py"
    path.write_text("one\n")
    await ui.request("nvim_command", f"set {autoread}")
    buf = await edit(ui, path)
    os.mkfifo(tmp_path / "pipe")
    os.replace(tmp_path / "pipe", path)  # Neovim checks before bufsync's watcher settles
    try:
        with trio.fail_after(WAIT):
            for _ in range(2):  # and after
                if check == "checktime":
                    await ui.request("nvim_command", "checktime")
                else:
                    await ui.request("nvim_ui_set_focus", False)
                    await ui.request("nvim_ui_set_focus", True)
                await eventually_message(ui, "main.py is not a regular file (a FIFO)")
    finally:
        release(path)
    assert await lines(ui, buf) == ["one"]
    assert await not_blocked(ui)


@pytest.fixture
def unprivileged(monkeypatch, tmp_path) -> None:
    """Neovim without root's right to read any file (the tests may run as root): a file of
    mode 000 is unreadable to it. Request it before ``app``, ``nvim`` or ``ui``."""
    if os.geteuid() != 0:
        return
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: mode 000 files are readable")
    wrapper = tmp_path / "nvim-unprivileged"
    wrapper.write_text(f"#!/bin/sh\nexec {setpriv} --bounding-set -dac_override,"
                       f"-dac_read_search -- {find_nvim()} \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("CLAUDE_NVIM_NVIM", str(wrapper))


async def test_an_unreadable_replacement_leaves_the_buffer_untouched(unprivileged, app, ui,
                                                                     tmp_path):
    path = tmp_path / "main.py"
    path.write_text("one\n")
    buf = await edit(ui, path)
    locked = tmp_path / "locked"
    locked.write_text("secret\n")
    locked.chmod(0)
    os.replace(locked, path)
    shown = await eventually_message(ui, "main.py cannot be read (permission denied); "
                                         "not reloaded")
    await barrier(ui, tmp_path)
    await ui.request("nvim_command", "checktime")
    assert (await messages(ui)).count("cannot be read") == 1, shown
    assert await lines(ui, buf) == ["one"]
    assert await ui.exec_lua("return { vim.bo[...].modified, vim.bo[...].readonly }", buf,
                             buf) == [False, False]
    assert await not_blocked(ui)


# Many files at once (issue 18)


async def test_a_checkout_reloads_the_buffers_in_windows_first_and_all_in_the_end(
        app, ui, tmp_path):
    paths = [tmp_path / f"f{i:03}.py" for i in range(300)]
    for path in paths:
        path.write_text(numbered(30))
    bufs = await ui.exec_lua("""
      local bufs = {}
      for i, path in ipairs(...) do
        bufs[i] = vim.fn.bufadd(path)
        vim.fn.bufload(bufs[i])
      end
      return bufs""", [str(p) for p in paths], timeout=60)
    await ui.request("nvim_command", "set hidden")
    await edit(ui, paths[-1])  # the last one written is the one on screen
    await ui.exec_lua("""
      _G.reloaded = {}
      vim.api.nvim_create_autocmd('FileChangedShellPost', { callback = function(ev)
        table.insert(_G.reloaded, ev.buf)
      end })""")
    # A checkout writes them all at once: Neovim is held while they are written (on a busy
    # machine the writes would otherwise take longer than the watchers' quiet time).
    gate = Gate(tmp_path / "gate")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(ui.exec_lua, gate.HOLD, gate.path, timeout=None))
        await gate.held()
        for path in paths:
            path.write_text(numbered(30, "new"))
        await gate.release()
    with trio.fail_after(WAIT):
        while len(await ui.exec_lua("return _G.reloaded")) < len(paths):
            await trio.sleep(0.05)
    order = await ui.exec_lua("return _G.reloaded")
    assert order[0] == bufs[-1] and sorted(order) == sorted(bufs)
    assert all(line == "new 1" for line in await ui.exec_lua(
        "return vim.tbl_map(function(b) return vim.api.nvim_buf_get_lines(b, 0, 1, true)[1] end,"
        " ...)", bufs))


async def test_a_reload_while_an_autocmd_waits_writes_nothing(app, client, ui, tmp_path):
    # In an autocmd (without `nested`) no other autocmd runs: had the reload's ":write" that a
    # BufWriteCmd answers run there, it would have written the file.
    path = tmp_path / "main.py"
    path.write_text("one\n")
    buf = await edit(ui, path)
    await ui.request("nvim_command", "autocmd User Busy lua vim.wait(1500, function() end)")
    await ui.request("nvim_input", ":doautocmd User Busy<CR>")
    await trio.sleep(0.1)
    path.write_text("one\ntwo\n")
    written = os.stat(path)
    answer = await client.call_json("checkDocumentDirty", {"filePath": str(path)})
    assert answer["isDirty"] is False
    await eventually_lines(ui, buf, ["one", "two"])
    with trio.fail_after(WAIT):
        while not await not_blocked(ui) or await ui.exec_lua("return vim.bo[...].modified", buf):
            await trio.sleep(0.05)
    now = os.stat(path)
    assert (now.st_ino, now.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    await ui.request("nvim_input", "Gothree<Esc>:w<CR>")  # and Neovim knows the file it shows
    with trio.fail_after(WAIT):
        while path.read_text() != "one\ntwo\nthree\n":
            await trio.sleep(0.01)
    assert await not_blocked(ui)


async def test_a_file_name_with_a_newline_still_gets_its_warning(app, ui, tmp_path):
    path = tmp_path / "odd\nname.py"
    path.write_text("foo()\n")
    await ui.exec_lua("vim.cmd.edit(vim.fn.fnameescape(...))", str(path))
    buf = await ui.request("nvim_get_current_buf")
    await ui.request("nvim_buf_set_lines", buf, 0, -1, True, ["mine()"])
    path.write_text("claude()\n")
    await eventually_message(ui, "odd^Jname.py changed on disk, but its buffer has unsaved")
    assert "E115" not in await messages(ui)


async def test_save_document_and_bufsync_judge_a_file_by_one_record(app, client, ui, tmp_path):
    # A file replaced by one with the same mtime (cp -p, rsync -t, a checkout that keeps
    # times): bufsync saw a new file; saveDocument must not write the buffer over it either.
    path = tmp_path / "main.py"
    path.write_text("foo()\n")
    buf = await edit(ui, path)
    await ui.request("nvim_buf_set_lines", buf, 0, -1, True, ["mine()"])
    before = os.stat(path)
    other = tmp_path / "other.py"
    other.write_text("theirs()\n")
    os.utime(other, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(other, path)
    await eventually_message(ui, "main.py changed on disk, but its buffer has unsaved changes")
    answer = await client.call_json("saveDocument", {"filePath": str(path)})
    assert answer["success"] is False and "changed on disk" in answer["message"]
    assert path.read_text() == "theirs()\n"


@pytest.mark.parametrize("big", [False, True])  # a big buffer's reload compares its last text
async def test_any_sequence_of_versions_shows_each_exactly(app, ui, tmp_path, big):
    # The reload applies only what changed: whatever the changes, the buffer is the file.
    rng = random.Random(18)
    filler = ["filler"] * 20_000 if big else []
    path = tmp_path / "main.py"
    versions = [[], [""], ["a"], [], ["", ""], ["x", "", "y"]]
    current = [f"line {i}" for i in range(40)]
    for _ in range(60):
        current = list(current)
        for _ in range(rng.randint(1, 4)):
            at = rng.randint(0, len(current))
            op = rng.choice(("insert", "delete", "change"))
            if op == "insert":
                current[at:at] = [rng.choice(("same", "", f"new {rng.random():.4f}"))
                                  for _ in range(rng.randint(1, 5))]  # repeated lines too
            elif op == "delete":
                del current[at:at + rng.randint(1, 5)]
            elif current:
                current[min(at, len(current) - 1)] = f"changed {rng.random():.4f}"
        versions.append(current)
    path.write_text("seed\n")
    buf = await edit(ui, path)
    reloads = "return vim.g.reloads[tostring(...)] or 0"
    for number, version in enumerate(versions):
        version = filler + version if number % 2 else version + filler
        text = "\n".join(version) + ("\n" if version and number % 3 != 1 else "")
        before = await ui.exec_lua(reloads, buf)
        await trio.sleep(0.005)  # a new mtime, whatever the size
        path.write_text(text)
        eol = text == "" or text.endswith("\n")  # and the lines Neovim reads:
        version = (text[:-1] if eol else text).split("\n")
        with trio.fail_after(WAIT):
            while await ui.exec_lua(reloads, buf) == before:
                await trio.sleep(0.005)
        assert await lines(ui, buf) == version
        assert await ui.exec_lua("return vim.bo[...].eol", buf) is eol, (number, version)
    assert await ui.exec_lua("return vim.bo[...].modified", buf) is False
