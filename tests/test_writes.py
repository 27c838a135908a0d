"""Files Claude writes on its host reach Neovim's buffers when Neovim's file is another copy
(sshfs, scp://): the server there reports each write of a file Neovim has open (its watcher;
an accepted diff's close_tab), and Neovim shows it. Here both sides are directories of this
machine: ``claude/`` is Claude's copy, ``nvim/`` Neovim's, joined by the path map."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from claude_nvim._paths import PathMap
from claude_nvim._writes.watcher import Watcher
from claude_nvim.testing import mcp_client, running_app
from helpers import WAIT, PendingDiff, diff_args, edit, eventually, messages

SHOWS = """
local buf, lines = vim.fn.bufnr(select(1, ...)), select(2, ...)
return buf > 0 and not vim.bo[buf].modified
  and vim.deep_equal(vim.api.nvim_buf_get_lines(buf, 0, -1, false), lines)
"""


@pytest.fixture
def copies(tmp_path):
    claude, nvim = tmp_path / "claude", tmp_path / "nvim"
    for side in (claude, nvim):
        side.mkdir()
        (side / "a.py").write_text("one\ntwo\n")
    return claude, nvim


@pytest.fixture
async def remote_app(nvim_address, tmp_path, copies):
    claude, nvim = copies
    async with running_app(nvim_address, lock_directory=tmp_path / "ide", remote=True,
                           paths=PathMap([(str(claude), str(nvim))])) as app:
        yield app


async def told_open(app, path: Path) -> None:
    """Once Neovim has told the server that it has ``path`` (Claude's) open."""
    with trio.fail_after(WAIT):
        while str(path) not in app.writes._open:
            await trio.sleep(0.01)


async def test_a_write_there_shows_in_neovims_copy(remote_app, ui, copies):
    claude, nvim = copies
    buf = await edit(ui, nvim / "a.py")
    await ui.exec_lua("vim.api.nvim_win_set_cursor(0, {2, 0})")
    await told_open(remote_app, claude / "a.py")
    (claude / "a.py").write_text("one\ntwo\nthree\n")
    await eventually(ui, SHOWS, str(nvim / "a.py"), ["one", "two", "three"])
    assert (nvim / "a.py").read_text() == "one\ntwo\n"  # Neovim's copy is not written
    # One undo step takes it back; the cursor stayed on its line.
    assert await ui.exec_lua("return vim.api.nvim_win_get_cursor(0)[1]") == 2
    await ui.request("nvim_command", "undo")
    assert await ui.request("nvim_buf_get_lines", buf, 0, -1, False) == ["one", "two"]


async def test_unsaved_changes_are_kept_and_the_user_told_once(remote_app, ui, copies):
    claude, nvim = copies
    await edit(ui, nvim / "a.py")
    await ui.exec_lua("vim.api.nvim_buf_set_lines(0, 0, 1, false, {'mine'})")
    await told_open(remote_app, claude / "a.py")
    (claude / "a.py").write_text("x\n")
    await eventually(ui, "return vim.fn.execute('messages'):find('a.py changed where Claude', "
                         "1, true) ~= nil")
    (claude / "a.py").write_text("y\n")
    await trio.sleep(0.3)  # told again meanwhile, it would be now
    assert await ui.exec_lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == [
        "mine", "two"]
    said = await messages(ui)
    assert said.count("a.py changed where Claude runs; your unsaved changes here are kept") == 1


@pytest.fixture
def no_watcher(monkeypatch):
    """Servers started from now on have no file watcher, as off Linux."""
    monkeypatch.setattr(Watcher, "available", property(lambda self: False))


@pytest.mark.usefixtures("no_watcher")
async def test_an_accepted_diff_shows_what_the_cli_wrote(remote_app, ui, copies):
    claude, nvim = copies
    await edit(ui, nvim / "a.py")
    async with mcp_client(remote_app.port, remote_app.token) as client:
        async with trio.open_nursery() as nursery:
            diff = PendingDiff(client, diff_args(claude / "a.py", "one\n2\n"))
            nursery.start_soon(diff.run)
            await eventually(ui, "for _, b in ipairs(vim.api.nvim_list_bufs()) do "
                                 "if vim.b[b].claude_nvim_proposal then return true end end")
            await ui.request("nvim_command", "ClaudeNvimDiffAccept")
            assert await diff.outcome() == ["FILE_SAVED", "one\n2\n"]
        (claude / "a.py").write_text("one\n2\n")  # as the CLI does, then close_tab
        await client.call_tool("close_tab", {"tab_name": diff.args["tab_name"]})
    await eventually(ui, SHOWS, str(nvim / "a.py"), ["one", "2"])


async def test_a_buffer_of_a_url_shows_the_write(nvim_address, tmp_path, ui, copies):
    """netrw's scp:// buffers (and oil-ssh's) are no file here: they are given the text."""
    claude, _ = copies
    url = "scp://box//srv/app"
    async with running_app(nvim_address, lock_directory=tmp_path / "ide", remote=True,
                           paths=PathMap([(str(claude), url)])) as app:
        await ui.exec_lua("""
          local buf = vim.api.nvim_create_buf(true, false)
          vim.api.nvim_buf_set_name(buf, ...)
          vim.api.nvim_buf_set_lines(buf, 0, -1, false, { 'one', 'two' })
          vim.bo[buf].modified = false
          vim.api.nvim_set_current_buf(buf)""", f"{url}/a.py")
        await ui.exec_lua("vim.api.nvim_exec_autocmds('BufReadPost', { buffer = 0 })")
        await told_open(app, claude / "a.py")
        (claude / "a.py").write_text("one\ntwo\nthree\n")
        await eventually(ui, SHOWS, f"{url}/a.py", ["one", "two", "three"])


async def test_a_local_server_reports_nothing(app, ui):
    """Neovim on this host sees the files itself (bufsync): nothing is watched or sent."""
    assert not app.writes.enabled
    assert await ui.exec_lua("return vim.fn.exists('#claude_nvim_writes')") == 0
