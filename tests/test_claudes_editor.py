"""Neovim as Claude's editor: the claudes started with what the server publishes get $VISUAL and
$EDITOR, a command that opens the file in this Neovim, beside Claude, and exits once that buffer
is closed: 0 if it was written (claude keeps the edit), 1 if not (claude discards it). Run as
claude 2.1.331 runs it (cli_findings §4): the command split on spaces, no shell, `+LINE` added
for a name like nvim's, on claude's own terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from claude_nvim._nvim.headless import headless_nvim
from helpers import WAIT, eventually

# Claude's Ctrl+G, played by a stand-in in a Neovim terminal: the prompt text in a file, the
# editor run on it (as claude runs it) on the terminal, then what came back, in result.json.
CTRL_G = """\
import json, os, subprocess, sys, time
out, text = sys.argv[1], sys.argv[2]
prompt = os.path.join(out, "claude-prompt-1234.md")
with open(prompt, "w") as f:
    f.write(text)
argv = os.environ["VISUAL"].split(" ")
if os.path.basename(argv[0]) in ("vi", "vim", "nvim"):
    argv.append("+1")
code = subprocess.run(argv + [prompt]).returncode
with open(prompt) as f:
    json.dump({"code": code, "text": f.read()}, open(os.path.join(out, "result.json"), "w"))
time.sleep(60)
"""


@pytest.fixture
def ctrl_g(tmp_path: Path) -> Path:
    script = tmp_path / "ctrl_g.py"
    script.write_text(CTRL_G)
    return script


async def published_env(nvim) -> dict:
    return await eventually(nvim, "local s = vim.g.claude_nvim_server\n"
                                  "return s and s.claude and s.claude.env")


async def run_claude(nvim, ctrl_g: Path, text: str) -> int:
    """Start the stand-in in a terminal on the right, as a Claude; its window."""
    env = await published_env(nvim)
    return await nvim.exec_lua("""
        local env, cmd = ...
        vim.cmd('botright vsplit | enew')
        vim.fn.termopen(cmd, { env = env })
        vim.cmd('startinsert')
        return vim.api.nvim_get_current_win()""", env,
        [sys.executable, str(ctrl_g), str(ctrl_g.parent), text])


FLOAT = """for _, win in ipairs(vim.api.nvim_list_wins()) do
  local config = vim.api.nvim_win_get_config(win)
  local buf = vim.api.nvim_win_get_buf(win)
  if config.relative ~= '' and vim.api.nvim_buf_get_name(buf):find('claude%-prompt') then
    return { win = win, relative = config.relative, over = config.win, current =
             win == vim.api.nvim_get_current_win(), lines = vim.api.nvim_buf_get_lines(buf, 0, -1,
             false), cursor = vim.api.nvim_win_get_cursor(win) }
  end
end"""


async def result(tmp_path: Path) -> dict:
    path = tmp_path / "result.json"
    with trio.fail_after(WAIT):
        while not path.exists() or not path.read_text():
            await trio.sleep(0.05)
    return json.loads(path.read_text())


async def test_the_prompt_opens_beside_claude_and_comes_back_when_written(ui, app, tmp_path,
                                                                         ctrl_g):
    env = await published_env(ui)
    assert env["VISUAL"] == env["EDITOR"] and env["VISUAL"].split(" ")[1] == "-l"
    assert "VISUAL" not in await ui.exec_lua("return vim.fn.environ()")  # not Neovim's own
    assert env["CLAUDE_NVIM_HOLDER"] == ""  # a holder's, for its claude alone: not inherited
    claude = await run_claude(ui, ctrl_g, "fix the parser")
    shown = await eventually(ui, FLOAT)
    assert shown["over"] == claude and shown["relative"] == "win" and shown["current"]
    assert shown["lines"] == ["fix the parser"] and shown["cursor"] == [1, 0]
    await ui.request("nvim_input", "A, please<Esc>:wq<CR>")
    assert await result(tmp_path) == {"code": 0, "text": "fix the parser, please\n"}
    # Back in Claude, in Terminal mode.
    back = await eventually(ui, "return vim.api.nvim_get_mode().mode == 't' and "
                                "vim.api.nvim_get_current_win()")
    assert back == claude


@pytest.mark.parametrize("record", ["fifo", "huge", "not json", "dead address"])
async def test_with_no_usable_holders_file_the_editor_opens_in_nvims(ui, app, tmp_path,
                                                                     ctrl_g, record):
    # A held claude's editor asks its holder's file first ($CLAUDE_NVIM_HOLDER): a file it
    # cannot use, or a Neovim gone since, and it opens the file in $NVIM's (this one), at once.
    path = tmp_path / "claude-1.json"
    with headless_nvim(cwd=tmp_path) as (other, _):
        if record == "fifo":
            os.mkfifo(path)  # read, it would block for ever
        elif record == "huge":  # naming a live Neovim, but over the size read: not asked
            path.write_text(json.dumps({"nvim": other, "pad": "x" * (1 << 20)}))
        elif record == "not json":
            path.write_text('{"nvim": ')
        else:
            path.write_text(json.dumps({"nvim": str(tmp_path / "gone.sock")}))
        env = {**await published_env(ui), "CLAUDE_NVIM_HOLDER": str(path)}
        claude = await ui.exec_lua("""
            local env, cmd = ...
            vim.cmd('botright vsplit | enew')
            vim.fn.termopen(cmd, { env = env })
            return vim.api.nvim_get_current_win()""", env,
            [sys.executable, str(ctrl_g), str(ctrl_g.parent), "text"])
        shown = await eventually(ui, FLOAT)
        assert shown["over"] == claude and shown["lines"] == ["text"]
        await ui.request("nvim_input", ":wq<CR>")
        assert await result(tmp_path) == {"code": 0, "text": "text\n"}


async def test_closed_unwritten_the_edit_is_discarded(ui, app, tmp_path, ctrl_g):
    await run_claude(ui, ctrl_g, "keep me")
    await eventually(ui, FLOAT)
    await ui.request("nvim_input", "ccchanged<Esc>:q!<CR>")
    assert await result(tmp_path) == {"code": 1, "text": "keep me"}


def editor_command(env: dict) -> list[str]:
    return env["VISUAL"].split(" ")


async def test_when_neovim_goes_away_the_edit_is_discarded(ui, app, tmp_path):
    command = editor_command(await published_env(ui))
    prompt = tmp_path / "claude-prompt-1.md"
    prompt.write_text("x")
    with headless_nvim(cwd=tmp_path) as (address, process):
        editing = subprocess.Popen([*command, "+1", str(prompt)],
                                   env={**os.environ, "NVIM": address},
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        with trio.fail_after(WAIT):
            while editing.stdout and "editing" not in editing.stdout.readline():
                await trio.sleep(0.01)
        process.kill()
        _, err = editing.communicate(timeout=WAIT)
    assert editing.returncode == 1
    assert "Neovim went away" in err


# A stand-in for the user's own editor: records its arguments, appends to the file, exits 3.
OWN_EDITOR = """#!{python}
import json, sys
json.dump(sys.argv[1:], open({out!r}, "w"))
with open(sys.argv[-1], "a") as f:
    f.write(" (edited)")
sys.exit(3)
"""


@pytest.mark.parametrize("name, line", [("my-editor", False), ("vi", True)])
async def test_outside_neovim_it_is_the_users_own_editor(ui, app, tmp_path, name, line):
    command = editor_command(await published_env(ui))
    own = tmp_path / "bin" / name
    own.parent.mkdir()
    own.write_text(OWN_EDITOR.format(python=sys.executable, out=str(tmp_path / "argv.json")))
    own.chmod(0o755)
    prompt = tmp_path / "p.md"
    prompt.write_text("text")
    env = {k: v for k, v in os.environ.items() if k != "NVIM"}
    done = subprocess.run([*command, "+4", str(prompt)], timeout=WAIT, capture_output=True,
                          env={**env, "CLAUDE_NVIM_USER_EDITOR": f"{own} --wait"})
    assert done.returncode == 3  # its own exit code
    assert prompt.read_text() == "text (edited)"
    expected = ["--wait", "+4", str(prompt)] if line else ["--wait", str(prompt)]
    assert json.loads((tmp_path / "argv.json").read_text()) == expected


async def test_the_option_off_leaves_claudes_editor_alone(nvim_address, nvim, tmp_path):
    from claude_nvim.testing import running_app

    await nvim.exec_lua("vim.g.claude_nvim_opts = { editor = false }")
    async with running_app(nvim_address, lock_directory=tmp_path / "ide"):
        env = await published_env(nvim)
    assert "VISUAL" not in env and "EDITOR" not in env
