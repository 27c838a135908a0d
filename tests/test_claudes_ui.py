"""Claudes the user can tell apart and reach: named by what they work on (the title claude gives
its terminal, or the user's name), listed in the Claude window's bar, picked by
:ClaudeNvimSwitch. Real headless Neovim with a UI, the plugin, stand-in claudes that set their
title with an escape sequence as claude does (plugin_kit's)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import trio

from claude_nvim.testing import mcp_client
from helpers import WAIT, PendingDiff, diff_args, eventually, handed_over, messages
from plugin_kit import TABLINE, claudes_started

# Type `text` (and Enter) into Claude `n`'s terminal.
TYPE = """for _, b in ipairs(vim.api.nvim_list_bufs()) do
  if vim.b[b].claude_nvim_terminal == select(1, ...) then
    require('claude_nvim.terminal').input(select(2, ...) .. '\\r', b)
  end
end"""

# The name of each Claude's terminal, by number.
NAMES = """local names = {}
for _, b in ipairs(vim.api.nvim_list_bufs()) do
  local n = vim.b[b].claude_nvim_terminal
  if n then names[n] = vim.fn.bufname(b) end
end
return names"""

# The Claude window's bar as drawn, and that window.
BAR = """local win = require('claude_nvim.terminal').info().win
return { vim.api.nvim_eval_statusline(vim.wo[win].winbar,
           { winid = win, use_winbar = true }).str, win }"""


async def json_file(path: Path) -> dict:
    """The JSON in ``path``, once it is there whole."""
    with trio.fail_after(WAIT):
        while True:
            try:
                return json.loads(path.read_text())
            except (OSError, ValueError):
                await trio.sleep(0.05)


async def two_claudes(user) -> None:
    await user.request("nvim_command", "ClaudeNvim")
    await user.request("nvim_input", "<C-\\><C-n>")
    await user.request("nvim_command", "ClaudeNvimNew")
    await eventually(user, "local s = vim.g.claude_nvim_server\n"
                           "return s and s.claude and s.clients == 2", timeout=WAIT)


async def test_a_claude_is_named_by_its_title_or_by_the_user(user, claude_dir):
    path = claude_dir / "main.py"
    path.write_text("old\n")
    await user.exec_lua("require('claude_nvim').config.terminal.position = 'tab'")
    await user.request("nvim_command", f"edit {path}")
    await two_claudes(user)
    await claudes_started(claude_dir, 2)
    second = await user.exec_lua("for _, b in ipairs(vim.api.nvim_list_bufs()) do\n"
                                 "  if vim.b[b].claude_nvim_terminal == 2 then\n"
                                 "    local v = vim.b[b]\n"
                                 "    return v.claude_nvim_pid or v.terminal_job_pid\n"
                                 "  end end")
    # claude's own title before a conversation has a topic is no name.
    assert await user.exec_lua(NAMES) == ["Claude 1", "Claude 2"]
    await user.exec_lua(TYPE, 2, "title \N{CIRCLE WITH LEFT HALF BLACK} fix the parser")
    named = await eventually(user, f"local n = (function() {NAMES} end)()\n"
                                   "return n[2] ~= 'Claude 2' and n")
    assert named == ["Claude 1", "Claude 2 \N{MIDDLE DOT} fix the parser"]
    # Its tab reads so; its bar lists both, it marked (the other by number).
    labels = [re.sub(r"^\d+ ", "", label.strip())
              for label in (await user.exec_lua(TABLINE)).split("  ")]
    assert labels[1] == "Claude 2 \N{MIDDLE DOT} fix the parser"
    bar, _win = await user.exec_lua(BAR)
    assert bar.split() == ["1", "\N{BLACK RIGHT-POINTING SMALL TRIANGLE}Claude", "2",
                           "\N{MIDDLE DOT}", "fix", "the", "parser"]
    # A mention sent from the file says which Claude got it, by name.
    await user.request("nvim_command", "tabfirst | ClaudeNvimSend")
    assert "sent to Claude 2 \N{MIDDLE DOT} fix the parser" in await eventually(
        user, "local m = vim.api.nvim_exec2('messages', {output = true}).output\n"
              "return m:find('sent to', 1, true) and m")
    # So does the bar of a diff it proposes (a client that says it is Claude 2's process), on a
    # screen wide enough for the name.
    await user.request("nvim_ui_try_resize", 200, 40)
    port = await user.exec_lua("return vim.g.claude_nvim_server.port")
    lock = claude_dir / "cfg" / "ide" / f"{port}.lock"
    token = json.loads(lock.read_text())["authToken"]
    async with handed_over(claude_dir / "hand") as receive:  # Claude 2's process holds it
        await user.exec_lua(TYPE, 2, f"hand over {claude_dir / 'hand'}")
        stream = await receive()
    async with mcp_client(port, token, pid=second, stream=stream) as client, \
            trio.open_nursery() as nursery:
        await eventually(user, "return vim.g.claude_nvim_server.clients == 3")
        nursery.start_soon(PendingDiff(client, diff_args(path, "new\n")).run)
        await eventually(user, "return vim.b.claude_nvim_proposal ~= nil")
        winbar = await user.exec_lua("return vim.api.nvim_eval_statusline(vim.wo.winbar, "
                                     "{use_winbar = true}).str")
        assert "proposal of Claude 2 \N{MIDDLE DOT} fix the parser for main.py" in winbar
        await user.request("nvim_command", "ClaudeNvimDiffDeny")
    # The user's name wins over the title; with no name, the title names it again.
    await user.request("nvim_command", "2tabnext | ClaudeNvimRename parser work")
    assert (await user.exec_lua(NAMES))[1] == "Claude 2 \N{MIDDLE DOT} parser work"
    await user.exec_lua(TYPE, 2, "title \N{EIGHT SPOKED ASTERISK} something else")
    await user.request("nvim_command", "ClaudeNvimRename")
    assert (await eventually(user, f"local n = (function() {NAMES} end)()\n"
                                   "return n[2]:find('else') and n"))[1] == (
        "Claude 2 \N{MIDDLE DOT} something else")


async def test_the_bar_lists_the_claudes_and_a_click_shows_one(user, claude_dir):
    await two_claudes(user)
    await user.exec_lua(TYPE, 1, "title \N{EIGHT SPOKED ASTERISK} write the docs")
    await eventually(user, f"return (function() {NAMES} end)()[1] ~= 'Claude 1'")
    bar, win = await user.exec_lua(BAR)
    assert bar.split()[:3] == ["1", "\N{MIDDLE DOT}", "write"]  # Claude 2 is shown
    # Click the first item, on the screen: Claude 1 is shown in the same window.
    row, col = await user.request("nvim_win_get_position", win)
    await user.request("nvim_input_mouse", "left", "press", "", 0, row, col + 2)
    await user.request("nvim_input_mouse", "left", "release", "", 0, row, col + 2)
    now = await eventually(user, "local i = require('claude_nvim.terminal').info()\n"
                                 "return vim.b[i.buf].claude_nvim_terminal == 1 and i")
    assert now["win"] == win
    bar, _ = await user.exec_lua(BAR)
    assert bar.split()[:2] == ["\N{BLACK RIGHT-POINTING SMALL TRIANGLE}Claude", "1"]
    assert bar.split()[-1] == "2"


async def test_switch_with_several_claudes_picks_one(user, claude_dir):
    await two_claudes(user)
    await user.exec_lua(TYPE, 1, "title \N{EIGHT SPOKED ASTERISK} write the docs")
    await eventually(user, f"return (function() {NAMES} end)()[1] ~= 'Claude 1'")
    # As a picker plugin sees it: vim.ui.select with every Claude, its name and age.
    offered = await user.exec_lua("""
        local offered
        local select = vim.ui.select
        vim.ui.select = function(items, opts, choose)
          offered = { prompt = opts.prompt, kind = opts.kind,
                      items = vim.tbl_map(opts.format_item, items) }
          choose(items[1])
        end
        vim.cmd('ClaudeNvimSwitch')
        vim.ui.select = select
        return offered""")
    assert offered["prompt"] == "Claude" and offered["kind"] == "claude_nvim"
    one, two = offered["items"]
    assert re.fullmatch(r"  Claude 1 · write the docs · started \d+ s ago", one), one
    assert re.fullmatch(r"▸ Claude 2 · started \d+ s ago", two), two
    assert await user.exec_lua("return require('claude_nvim.terminal').info().buf == "
                               "vim.fn.bufnr('Claude 1 · write the docs')")
    # Neovim's own vim.ui.select (a numbered list), answered with keys: Claude 2.
    await user.request("nvim_input", "<C-\\><C-n>:ClaudeNvimSwitch<CR>2<CR>")
    assert await eventually(user, "local i = require('claude_nvim.terminal').info()\n"
                                  "return vim.b[i.buf].claude_nvim_terminal == 2")
    await eventually(user, "return vim.api.nvim_get_mode().mode == 't'")
    # `next` takes turns, without a picker; a number goes straight there.
    for command, shown in [("ClaudeNvimSwitch next", 1), ("ClaudeNvimSwitch next", 2),
                           ("ClaudeNvimSwitch 1", 1)]:
        await user.request("nvim_input", "<C-\\><C-n>")
        await user.request("nvim_command", command)
        assert await user.exec_lua("local i = require('claude_nvim.terminal').info()\n"
                                   "return vim.b[i.buf].claude_nvim_terminal") == shown
        await eventually(user, "return vim.api.nvim_get_mode().mode == 't'")
    assert "next" in await user.exec_lua(
        "return vim.fn.getcompletion('ClaudeNvimSwitch ', 'cmdline')")
    assert "E5108" not in await messages(user)


async def test_claudes_editor_opens_over_the_claude_window(user, claude_dir):
    # claude's Ctrl+G (the stand-in's "edit"): the prompt in this Neovim, over Claude.
    await user.request("nvim_command", "ClaudeNvim")
    await claudes_started(claude_dir, 1)
    claude = await eventually(user, "local i = require('claude_nvim.terminal').info()\n"
                                    "return i and i.win")
    await user.exec_lua(TYPE, 1, "edit fix the parser")
    shown = await eventually(user, """
        local win = vim.api.nvim_get_current_win()
        local config = vim.api.nvim_win_get_config(win)
        return config.relative ~= '' and { config.win, config.title,
          vim.api.nvim_buf_get_lines(0, 0, -1, false) }""")
    over, title, lines = shown
    assert over == claude and lines == ["fix the parser"]
    assert "Claude 1 waits" in "".join(chunk[0] for chunk in title)
    await user.request("nvim_input", "A, please<Esc>:wq<CR>")
    assert await json_file(claude_dir / "edited.json") == {
        "code": 0, "text": "fix the parser, please\n"}
    assert await eventually(user, "return vim.api.nvim_get_mode().mode == 't' and "
                                  "vim.api.nvim_get_current_win()") == claude


# What the user's autocmds saw of the Claudes' states: { event, terminal, state } each.
EVENTS = """_G.events = {}
vim.api.nvim_create_autocmd('User', {
  pattern = { 'ClaudeNvimWorking', 'ClaudeNvimWaiting', 'ClaudeNvimDone' },
  callback = function(ev)
    table.insert(_G.events, { ev.match, ev.data.terminal, ev.data.state })
  end })"""

STATUS = "return require('claude_nvim').status()"


async def status_becomes(user, text: str) -> None:
    await eventually(user, f"return require('claude_nvim').status() == {text!r}")


async def told(user, text: str) -> int:
    """How many times :messages says ``text``."""
    return (await messages(user)).count(text)


# The statusline's colour for what status() says (the lualine component in README).
HIGHLIGHT = "return require('claude_nvim').status_highlight()"


async def test_waiting_and_done_are_shown_and_told_when_out_of_sight(user, claude_dir):
    await user.exec_lua(EVENTS)
    await user.request("nvim_command", "ClaudeNvim")
    await claudes_started(claude_dir, 1)
    buf = await eventually(user, "local i = require('claude_nvim.terminal').info()\n"
                                 "return i and i.job and i.buf")
    await status_becomes(user, "Claude")  # connected: no hook yet, nothing is known
    assert await user.exec_lua(HIGHLIGHT) is None
    # In sight: shown, not told.
    await user.exec_lua(TYPE, 1, "prompt fix the parser")
    await status_becomes(user, "Claude \N{MIDDLE DOT} working")
    assert await user.exec_lua(HIGHLIGHT) == "ClaudeNvimWorking"
    await user.exec_lua(TYPE, 1, "permission")  # a permission dialog, then its notification
    await status_becomes(user, "Claude \N{MIDDLE DOT} waiting")
    assert await user.exec_lua(HIGHLIGHT) == "ClaudeNvimWaiting"
    bar, _ = await user.exec_lua(BAR)
    assert bar.strip() == "\N{BLACK RIGHT-POINTING SMALL TRIANGLE}Claude 1 \N{MIDDLE DOT} waiting"
    await user.exec_lua(TYPE, 1, "stop")
    await status_becomes(user, "Claude")
    assert await user.exec_lua(HIGHLIGHT) == "ClaudeNvimDone"
    assert await user.exec_lua("return _G.events") == [
        ["ClaudeNvimWorking", buf, "working"], ["ClaudeNvimWaiting", buf, "waiting"],
        ["ClaudeNvimDone", buf, "done"]]
    assert await told(user, "Claude 1 is") == 0
    # Hidden: told, once each.
    await user.request("nvim_input", "<C-\\><C-n>")
    await user.request("nvim_command", "ClaudeNvim")  # hides it
    await user.exec_lua(TYPE, 1, "prompt go on")
    await user.exec_lua(TYPE, 1, "permission")
    await eventually(user, "local m = vim.api.nvim_exec2('messages', {output = true}).output\n"
                           "return m:find('Claude 1 is waiting for you', 1, true)")
    await user.exec_lua(TYPE, 1, "permission")  # still waiting: nothing new to tell
    await user.exec_lua(TYPE, 1, "stop")
    await eventually(user, "local m = vim.api.nvim_exec2('messages', {output = true}).output\n"
                           "return m:find('Claude 1 is done', 1, true)")
    assert await told(user, "Claude 1 is waiting for you") == 1
    # In view but Neovim without the focus (the terminal says so): told too, and through a
    # notification plugin when one replaced vim.notify; with opts.bell, the terminal rings.
    bells: list[str] = []
    user.on_notification("redraw", lambda args: bells.extend(
        event[0] for event in args if event and event[0] == "bell"))
    await user.exec_lua("require('claude_nvim').config.bell = true\n"
                        "_G.notified = {}\n"
                        "vim.notify = function(msg, level, opts)\n"
                        "  table.insert(_G.notified, { msg, level, opts.title }) end")
    await user.request("nvim_command", "ClaudeNvim")  # shown again
    await user.request("nvim_ui_set_focus", False)
    await user.exec_lua(TYPE, 1, "prompt more")
    await user.exec_lua(TYPE, 1, "stop")
    notified = await eventually(user, "return #_G.notified > 0 and _G.notified")
    assert notified == [["Claude 1 is done", 2, "claude-nvim"]]
    with trio.fail_after(WAIT):  # the bell comes with Neovim's next screen update
        while not bells:
            await trio.sleep(0.02)
    assert bells == ["bell"]
    await user.request("nvim_ui_set_focus", True)


async def test_with_several_claudes_the_waiting_one_is_named(user, claude_dir):
    await two_claudes(user)
    await user.exec_lua(TYPE, 2, "title \N{EIGHT SPOKED ASTERISK} parser")
    await eventually(user, f"return (function() {NAMES} end)()[2] ~= 'Claude 2'")
    await user.exec_lua(TYPE, 1, "prompt write the docs")
    await user.exec_lua(TYPE, 2, "prompt fix it")
    await user.exec_lua(TYPE, 2, "permission")
    await status_becomes(user, "Claude \N{MULTIPLICATION SIGN}2 \N{MIDDLE DOT} Claude 2 waiting "
                               "\N{MIDDLE DOT} 1 working")
    bar, _ = await user.exec_lua(BAR)
    assert bar.split() == ["1", "\N{MIDDLE DOT}", "working",
                           "\N{BLACK RIGHT-POINTING SMALL TRIANGLE}Claude", "2", "\N{MIDDLE DOT}",
                           "parser", "\N{MIDDLE DOT}", "waiting"]
    offered = await user.exec_lua("""
        local offered
        vim.ui.select = function(items, opts) offered = vim.tbl_map(opts.format_item, items) end
        vim.cmd('ClaudeNvimSwitch')
        return offered""")
    assert re.fullmatch(r"  Claude 1 · working \d+ s · started \d+ s ago", offered[0]), offered
    assert re.fullmatch(r"▸ Claude 2 · parser · waiting \d+ s · started \d+ s ago",
                        offered[1]), offered


async def test_a_claude_without_hooks_has_no_state(user, claude_dir):
    # A claude started some other way (no --settings): connected, its state unknown; never a
    # guess in status(), the bar or a message.
    await user.request("nvim_command", "ClaudeNvim")
    await claudes_started(claude_dir, 1)
    port = await eventually(user, "local s = vim.g.claude_nvim_server\n"
                                  "return s and s.claude and s.clients == 1 and s.port")
    token = json.loads((claude_dir / "cfg" / "ide" / f"{port}.lock").read_text())["authToken"]
    async with mcp_client(port, token, pid=4242):
        await status_becomes(user, "Claude \N{MULTIPLICATION SIGN}2")
        await user.exec_lua(TYPE, 1, "prompt go")
        await status_becomes(user, "Claude \N{MULTIPLICATION SIGN}2 \N{MIDDLE DOT} 1 working")
        states = await user.exec_lua("return vim.tbl_map(function(c) return c.state end, "
                                     "vim.g.claude_nvim_server.claudes)")
        assert states == ["working", "unknown"]
        assert "unknown" not in (await user.exec_lua(BAR))[0]
