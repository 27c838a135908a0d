"""Nothing Claude writes or names freezes Neovim (issue 27, Neovim's side): claude's $VISUAL on a
FIFO, /dev/zero or a file over the limit is refused before Neovim opens it; a title of any
length names a Claude from its first bytes; the end of a turn of any size looks each buffer's
file up once, a slice a call; a flood of states makes a notice a second, and a Claude that
waits is told of when it goes out of sight. A real headless Neovim each; what these cost is
measured in benchmarks/freeze_nvim.py, not here."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest
import trio

import claude_nvim._review as review_feature
from claude_nvim._nvim.headless import find_nvim
from helpers import HookedClaude, edit, eventually, published_settings
from plugin_kit import ROOT

# A hang guard, not a timing target: before the fixes these calls took minutes to forever.
HANG = 60


def release(fifo: Path) -> None:
    """Let go a process stuck opening ``fifo`` (a writer came)."""
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


# -- $VISUAL ------------------------------------------------------------------------------------

async def editor_command(nvim) -> list[str]:
    env = await eventually(nvim, "local s = vim.g.claude_nvim_server\n"
                                 "return s and s.claude and s.claude.env")
    return env["VISUAL"].split(" ")


async def run_editor(command: list[str], address: str, path: Path | str
                     ) -> subprocess.CompletedProcess[str]:
    return await trio.to_thread.run_sync(lambda: subprocess.run(
        [*command, "+1", str(path)], env={**os.environ, "NVIM": address}, timeout=HANG,
        capture_output=True, text=True))


@pytest.mark.parametrize("kind", ["fifo", "device", "big"])
async def test_claudes_editor_refuses_what_a_reload_refuses(app, nvim, nvim_address, tmp_path,
                                                            kind):
    command = await editor_command(nvim)
    if kind == "fifo":
        path, why = tmp_path / "prompt.md", "is not a regular file (a FIFO)"
        os.mkfifo(path)
    elif kind == "device":
        path, why = Path("/dev/zero"), "is not a regular file (a character device)"
    else:
        path, why = tmp_path / "big.md", "is 2 KB, over claude-nvim's limit of 1 KB"
        path.write_text("x" * 2000)
        await nvim.exec_lua("require('claude_nvim.core').max_file_bytes = 1024")
    try:
        done = await run_editor(command, nvim_address, path)
    finally:
        release(path)
    assert done.returncode == 1
    assert f"claude-nvim: {path} {why}" in done.stderr and "not opened" in done.stderr
    # Neovim answers, and opened nothing.
    assert await nvim.exec_lua("return vim.fn.bufnr(...)", str(path)) == -1


async def test_claudes_editor_without_the_servers_lua_still_refuses_a_fifo(nvim, nvim_address,
                                                                          tmp_path):
    script = ROOT / "src" / "claude_nvim" / "_core" / "claude_editor.lua"
    path = tmp_path / "prompt.md"
    os.mkfifo(path)
    try:
        done = await run_editor([find_nvim(), "-l", str(script)], nvim_address, path)
    finally:
        release(path)
    assert done.returncode == 1 and f"{path} is not a regular file" in done.stderr


# -- titles -------------------------------------------------------------------------------------

async def plugin_lua(nvim) -> None:
    await nvim.exec_lua("vim.opt.rtp:prepend(...)", str(ROOT))


@pytest.mark.parametrize("word", ["fix the parser ", "\N{LATIN SMALL LETTER E WITH ACUTE}",
                                  "\N{CJK UNIFIED IDEOGRAPH-4E2D}"])
async def test_a_title_of_any_length_names_a_claude_by_its_start(nvim, word):
    await plugin_lua(nvim)
    title = "\N{EIGHT SPOKED ASTERISK} " + word * (1_000_000 // len(word.encode()))
    with trio.fail_after(HANG):
        name = await nvim.exec_lua("return require('claude_nvim.claudes').title_name(...)",
                                   title)
        width = await nvim.exec_lua("return vim.fn.strdisplaywidth(...)", name)
    assert name.endswith("\N{HORIZONTAL ELLIPSIS}") and title[2:].startswith(name[:-1])
    assert 39 <= width <= 40
    # Bytes that are no UTF-8 (claude sets what it likes): no error.
    assert await nvim.exec_lua("""
        local claudes = require('claude_nvim.claudes')
        local ok1, a = pcall(claudes.title_name, string.rep('\\128', 1000))
        local ok2, b = pcall(claudes.title_name, '\\226\\156\\179 ' .. string.rep('\\255', 999))
        return { ok1, tostring(a), ok2, type(b) }""") == [True, "nil", True, "string"]
    # Short titles are names as they are; claude's default is none.
    for title, expected in [("\N{EIGHT SPOKED ASTERISK} fix it", "fix it"),
                            ("\N{EIGHT SPOKED ASTERISK} Claude Code", None), ("zsh", None)]:
        assert await nvim.exec_lua("return require('claude_nvim.claudes').title_name(...)",
                                   title) == expected


async def test_the_users_long_name_is_cut_too(nvim):
    await plugin_lua(nvim)
    with trio.fail_after(HANG):
        label = await nvim.exec_lua("""
            local buf = vim.api.nvim_create_buf(false, true)
            vim.b[buf].claude_nvim_name = string.rep('parser work ', 100000)
            return require('claude_nvim.claudes').label({ n = 2, buf = buf })""")
    assert label.startswith("Claude 2 \N{MIDDLE DOT} parser work parser work")
    assert label.endswith("\N{HORIZONTAL ELLIPSIS}") and len(label) < 60


# -- notices --------------------------------------------------------------------------------------

# The plugin loaded from this checkout (select(1, ...)), the server's hooks module beside it,
# and _G.notified collecting what the user is told.
NOTICES = """
vim.opt.rtp:prepend(select(1, ...))
vim.cmd('runtime plugin/claude_nvim.lua')
local hooks = dofile(select(1, ...) .. '/src/claude_nvim/_hooks/hooks.lua')
vim.g.claude_nvim_server = { claudes = {} }
_G.notified = {}
vim.notify = function(msg) table.insert(_G.notified, msg) end
"""

# The server's Lua entry the hooks use (claude_nvim.hooks.update), fired as a flood: Claude 1
# alternating waiting and done, `count` times, all at once.
FLOOD = NOTICES + """
for i = 1, select(2, ...) do
  local state = i % 2 == 1 and 'done' or 'waiting'
  hooks.update({ id = 1, state = state, since = i, label = 'Claude 1' }, true)
end
return _G.notified"""


async def test_a_flood_of_states_makes_at_most_a_notice_a_second(nvim):
    first = await nvim.exec_lua(FLOOD, str(ROOT), 2000)
    assert first == ["Claude 1 is done"]
    # At the end of the second, the state it is in (once).
    notified = await eventually(nvim, "return #_G.notified > 1 and _G.notified")
    assert notified == ["Claude 1 is done", "Claude 1 is waiting for you"]


# A Claude shown in a window of this tab, which starts waiting in sight (not told).
IN_SIGHT = NOTICES + """
vim.cmd('vsplit')
local buf = vim.api.nvim_create_buf(false, true)
vim.api.nvim_win_set_buf(0, buf)
vim.api.nvim_buf_set_lines(buf, 0, -1, false, { 'Claude' })  -- not reused by :edit
vim.b[buf].claude_nvim_terminal = 1
hooks.update({ id = 1, state = 'working', since = 1, terminal = buf }, true)
hooks.update({ id = 1, state = 'waiting', since = 2, terminal = buf }, true)
return _G.notified"""


@pytest.mark.parametrize("hide", ["close", "other buffer", "tab", "focus"])
async def test_a_claude_that_waits_is_told_of_when_it_goes_out_of_sight(ui, hide):
    assert await ui.exec_lua(IN_SIGHT, str(ROOT)) == []
    if hide == "close":
        await ui.request("nvim_command", "close")
    elif hide == "other buffer":
        await ui.request("nvim_command", "edit other.txt")
    elif hide == "tab":
        await ui.request("nvim_command", "tabnew")
    else:
        await ui.request("nvim_ui_set_focus", False)
    told = await eventually(ui, "return #_G.notified > 0 and _G.notified")
    assert told == ["Claude 1 is waiting for you"]
    # Once: shown and hidden again, it is the same wait.
    await ui.request("nvim_ui_set_focus", True)
    await ui.request("nvim_command", "tabnew | tabclose | doautocmd WinClosed")
    await ui.exec_lua("vim.wait(0)")
    assert await ui.exec_lua("return _G.notified") == told


# -- the end of a turn --------------------------------------------------------------------------

# realpath()s counted while review.recorded looks `paths` up among the buffers.
RECORDED = """
local real, count = vim.uv.fs_realpath, 0
vim.uv.fs_realpath = function(...) count = count + 1; return real(...) end
local ok, loaded = pcall(require('claude_nvim.review').recorded,
                         { number = 1, label = 'x', files = #select(1, ...) }, select(1, ...))
vim.uv.fs_realpath = real
assert(ok, loaded)
return { loaded = loaded, realpaths = count }"""


async def test_the_end_of_a_big_turn_looks_each_buffer_up_once(app, nvim, tmp_path):
    files = [tmp_path / f"f{i}.txt" for i in range(600)]
    for path in files:
        path.write_text("x\n")
    # 200 loaded buffers (50 of them the turn's, one reached through a symbolic link), named
    # otherwise than the turn's paths for some: the lookup has to resolve them.
    (tmp_path / "link").symlink_to(tmp_path)
    opened = [tmp_path / "link" / "f0.txt", *files[1:50],
              *(tmp_path / f"other{i}.txt" for i in range(150))]
    for at in range(0, len(opened), 20):  # bufsync watches each: a few at a time
        await nvim.exec_lua("for _, p in ipairs(...) do vim.fn.bufload(vim.fn.bufadd(p)) end",
                            [str(p) for p in opened[at:at + 20]])
    with trio.fail_after(HANG):
        got = await nvim.exec_lua(RECORDED, [str(p) for p in files])
    assert sorted(got["loaded"]) == sorted(str(p) for p in files[:50])
    assert got["realpaths"] <= len(files) + len(opened)


async def test_a_big_turn_is_told_to_neovim_a_slice_a_call(app, client, ui, tmp_path,
                                                           monkeypatch):
    monkeypatch.setattr(review_feature, "PATHS_PER_CALL", 2)
    monkeypatch.setattr(review_feature, "MARK_BYTES_PER_CALL", 10)
    with trio.fail_after(5):
        while not app.hooks.entries():
            await trio.sleep(0.02)
    claude = HookedClaude(client, published_settings(app.claude_args), tmp_path)
    paths = [tmp_path / f"f{i}.py" for i in range(5)]
    for path in paths:
        path.write_text("one\ntwo\n")
    bufs = [await edit(ui, path) for path in paths[:3]]
    await ui.exec_lua("""
        local review = require('claude_nvim.review')
        _G.calls = {}
        for _, name in ipairs({ 'recorded', 'mark' }) do
          local real = review[name]
          review[name] = function(a, b)
            table.insert(_G.calls, { name, vim.tbl_count(b) })
            return real(a, b)
          end
        end""")
    await claude.prompt("Number them.")
    for path in paths:
        await claude.edit(path, "two", "2")
    await claude.stop()
    signs = "return #vim.api.nvim_buf_get_extmarks(..., -1, 0, -1, { type = 'sign' }) > 0"
    for buf in bufs:
        await eventually(ui, signs, buf)
    calls = await ui.exec_lua("return _G.calls")
    assert calls == [["recorded", 2], ["recorded", 2], ["recorded", 1],
                     ["mark", 1], ["mark", 1], ["mark", 1]]
