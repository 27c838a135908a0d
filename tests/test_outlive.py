"""Claudes that outlive Neovim, end to end (issue 29): the holders (``hold``), the lingering
server (``linger``) and the server started at first use (``activate``) together, with stand-in
claudes in the terminals of real headless Neovims. Quit Neovim with two Claudes, one named;
the next Neovim in the project shows both, by name, and they are connected to it on the same
WebSocket connection; a Neovim elsewhere sees nothing; once they exit and Neovim quits, nothing
is left. With ``outlive = false`` all ends with Neovim."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
import trio

from claude_nvim._project import project_dir
from helpers import WAIT, eventually
from plugin_kit import alive, claudes_started, neovim, quit_neovim

TERMINALS = """local out = {}
for _, c in ipairs(require('claude_nvim.terminal').list()) do
  out[#out + 1] = { n = c.n, label = vim.b[c.buf].claude_nvim_label or '' }
end
return out"""
# The server's pid once both Claudes are connected to this Neovim's server.
BOTH_CONNECTED = ("local s = require('claude_nvim').server() "
                  "return s and s.claude and tonumber(s.clients) == 2 and s.pid")


async def until(condition, what: str) -> None:
    try:
        with trio.fail_after(WAIT):
            while not condition():
                await trio.sleep(0.05)
    except trio.TooSlowError:
        raise AssertionError(f"waited in vain for {what}") from None


def held(project: Path) -> dict[int, dict]:
    """The project's held Claudes by number, as their holders' files say."""
    found = {}
    for path in project_dir(str(project)).glob("claude-*.json"):
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(path.read_text())
            found[record["number"]] = record
    return found


def lines(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


async def two_claudes_one_named(user, claude_dir: Path, servers: set[int]) -> tuple[set, int]:
    """Claude 1 and Claude 2 ("the parser") started through the plugin, after a few files
    were opened (their terminals' buffer numbers are not those the next Neovim gives them):
    their stand-ins' pids and the server's, once both are connected."""
    await user.request("nvim_command", "badd one.py | badd two.py | badd three.py")
    await user.request("nvim_command", "ClaudeNvim")
    await user.request("nvim_input", "<C-\\><C-n>")
    await user.request("nvim_command", "ClaudeNvimNew")
    await user.request("nvim_command", "ClaudeNvimRename the parser")
    pids = {c["pid"] for c in await claudes_started(claude_dir, 2)}
    server = await eventually(user, BOTH_CONNECTED, timeout=WAIT)
    servers.add(server)
    return pids, server


async def mention_reaches(user, claude_dir: Path, n: int, pid: int) -> None:
    """:ClaudeNvimSend from a file, after a visit to Claude ``n``: its stand-in gets it."""
    mentions = claude_dir / f"mentions-{pid}.jsonl"
    before = lines(mentions)
    await user.request("nvim_input", "<C-\\><C-n>")
    await user.request("nvim_command", f"ClaudeNvimSwitch {n} | ClaudeNvimFocus")
    await user.request("nvim_command", f"edit {claude_dir / 'a.py'} | 2ClaudeNvimSend")
    await until(lambda: lines(mentions) > before, f"the mention in Claude {n}")
    assert json.loads(mentions.read_text().splitlines()[-1])["lineStart"] == 1


@pytest.mark.parametrize("how", [":qa!", "kill -9"])
async def test_two_claudes_outlive_neovim_connected_and_end_with_nothing_left(
        claude_dir, servers, how):
    (claude_dir / "a.py").write_text("one\ntwo\n")
    lock_dir = claude_dir / "cfg" / "ide"
    async with neovim(claude_dir) as user:
        pids, server = await two_claudes_one_named(user, claude_dir, servers)
        await until(lambda: held(claude_dir).get(2, {}).get("name") == "the parser",
                    "the name kept")
        await quit_neovim(user, how)
    record = project_dir(str(claude_dir)) / "server.json"
    await until(record.exists, "the server lingering")
    assert alive(server) and all(map(alive, pids))

    # A Neovim in another project: no terminals, its own server (at first use), not this one.
    async with neovim(claude_dir / "other") as stranger:
        await stranger.request("nvim_command", "ClaudeNvimSwitch")
        assert await stranger.exec_lua(TERMINALS) == []
        assert await stranger.exec_lua("return require('claude_nvim').server()") is None
        assert record.exists()

    async with neovim(claude_dir) as user:  # the same project again
        found = await eventually(user, f"local t = (function() {TERMINALS} end)() "
                                       "return #t == 2 and t[2].label ~= '' and t", timeout=WAIT)
        assert [(t["n"], t["label"]) for t in found] == [(1, "Claude 1"),
                                                          (2, "Claude 2 · the parser")]
        assert await eventually(user, BOTH_CONNECTED, timeout=WAIT) == server
        assert lines(claude_dir / "started.jsonl") == 2 and all(map(alive, pids))
        claudes = {n: r["claude"] for n, r in held(claude_dir).items()}
        assert set(claudes.values()) == pids
        for n in (1, 2, 1):
            await mention_reaches(user, claude_dir, n, claudes[n])
        assert not (claude_dir / "disconnected.jsonl").exists()  # the same connections

        # /exit in each: its claude ends, its holder with it.
        holders = {n: r["holder"] for n, r in held(claude_dir).items()}
        for n in (1, 2):
            await user.request("nvim_input", "<C-\\><C-n>")
            await user.request("nvim_command", f"ClaudeNvimSwitch {n}")
            await user.exec_lua("require('claude_nvim.terminal').input('exit\\r')")
            await until(lambda n=n: not alive(claudes[n]) and not alive(holders[n])
                        and n not in held(claude_dir), f"Claude {n} and its holder end")
        await eventually(user, "return #require('claude_nvim.terminal').list() == 0")
        await quit_neovim(user, how)
    await until(lambda: not alive(server), "the server ends")
    assert list(project_dir(str(claude_dir)).iterdir()) == []
    assert list(lock_dir.glob("*.lock")) == []


@pytest.mark.parametrize("how", [":qa!", "kill -9"])
async def test_with_outlive_false_the_claudes_and_the_server_end_with_neovim(
        claude_dir, servers, how):
    async with neovim(claude_dir, claude={"outlive": False}) as user:
        pids, server = await two_claudes_one_named(user, claude_dir, servers)
        assert held(claude_dir) == {}
        await quit_neovim(user, how)
    await until(lambda: not any(map(alive, (server, *pids))), "all end with Neovim")
    assert list((claude_dir / "cfg" / "ide").glob("*.lock")) == []
    assert not (project_dir(str(claude_dir)) / "server.json").exists()


# The stand-in's Ctrl+G: "edit TEXT" typed into the current Claude's terminal.
TYPE_EDIT = "require('claude_nvim.terminal').input('edit ' .. ... .. '\\r')"
# The float claude's editor opened: the window it is over, its title, its lines.
FLOAT = """local config = vim.api.nvim_win_get_config(0)
return config.relative ~= '' and { config.win, config.title,
  vim.api.nvim_buf_get_lines(0, 0, -1, false) }"""


def whole_json(path: Path) -> object:
    """The JSON in ``path``, or None while it is not there whole."""
    with contextlib.suppress(OSError, ValueError):
        return json.loads(path.read_text())
    return None


async def editor_shown(user, edited: Path) -> list:
    """What :data:`FLOAT` says once claude's editor shows; fails at once if it exits first
    (it opened elsewhere, or in no Neovim)."""
    with trio.fail_after(WAIT):
        while not edited.exists():
            if shown := await user.exec_lua(FLOAT):
                return shown
            await trio.sleep(0.05)
    raise AssertionError(f"claude's editor exited, not shown here: {edited.read_text()}")


async def test_claudes_editor_opens_in_the_neovim_that_adopted_it(
        claude_dir, servers, monkeypatch):
    # The user's own editor fails at once: what claude's editor falls back to with no Neovim.
    monkeypatch.setenv("CLAUDE_NVIM_USER_EDITOR", "false")
    async with neovim(claude_dir) as first:
        await first.request("nvim_command", "ClaudeNvim")
        await claudes_started(claude_dir, 1)
        servers.add(await eventually(first, BOTH_CONNECTED.replace("== 2", "== 1"),
                                     timeout=WAIT))
        await until(lambda: held(claude_dir).get(1, {}).get("attached"), "attached")
        await quit_neovim(first, ":qa!")
    await until(lambda: held(claude_dir)[1]["nvim"] is None, "the first Neovim forgotten")

    async with neovim(claude_dir) as user:  # adopts Claude 1, whose $NVIM is the first's
        await user.request("nvim_command", "ClaudeNvim")
        claude = await eventually(user, "local i = require('claude_nvim.terminal').info()\n"
                                        "return i and i.win", timeout=WAIT)
        nvim = await user.exec_lua("return vim.fn.getpid()")  # its terminal's client
        await until(lambda: held(claude_dir)[1]["attached"] == nvim, "attached here")
        assert held(claude_dir)[1]["nvim"] == await user.exec_lua("return vim.v.servername")
        await user.exec_lua(TYPE_EDIT, "fix the parser")
        edited = claude_dir / "edited.json"
        over, title, text = await editor_shown(user, edited)
        assert over == claude and text == ["fix the parser"]
        assert "Claude 1 waits" in "".join(chunk[0] for chunk in title)
        await user.request("nvim_input", "A, please<Esc>:wq<CR>")
        await until(lambda: whole_json(edited) is not None, "the editor's exit")
        assert whole_json(edited) == {"code": 0, "text": "fix the parser, please\n"}
        assert await eventually(user, "return vim.api.nvim_get_mode().mode == 't' and "
                                      "vim.api.nvim_get_current_win()") == claude


async def test_neovim_quitting_as_claude_starts_leaves_no_lock(claude_dir):
    """The server a claude starts with is spawned a moment after claude (it would slow
    claude's own start), or as Neovim quits if that is sooner; then it cannot attach, and
    it leaves no lock file behind."""
    async with neovim(claude_dir) as user:
        await user.request("nvim_command", "ClaudeNvim")
        assert list((claude_dir / "cfg" / "ide").glob("*.lock"))
        await quit_neovim(user, ":qa!")
    await claudes_started(claude_dir, 1)
    await until(lambda: not list((claude_dir / "cfg" / "ide").iterdir()), "no lock left")
