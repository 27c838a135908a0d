"""The path map (``serve --path-map CLAUDE=NEOVIM``): Claude on another host or in a container
names its files by its own paths, Neovim by its own, and every path that crosses between them
is on the right side: the lock's folders, the notifications, each tool's arguments and answers.
Against a real Neovim whose files are in ``tmp_path``, while Claude calls them /claude/ws."""

from __future__ import annotations

import json

import pytest
import trio

from claude_nvim._paths import OutsideMap, PathMap
from claude_nvim._wire.constants import MODEL_PATH
from claude_nvim.testing import mcp_client, running_app
from helpers import PendingDiff, diff_args, edit, eventually

CLAUDE = "/claude/ws"


# The map itself


def test_the_longest_prefix_wins_and_holds_whole_components_only():
    paths = PathMap.parse(["/srv=/home/me/srv", "/srv/app=/mnt/app", "/srv/app/vendor=/opt/v"])
    assert paths.to_neovim("/srv/app/x.py") == "/mnt/app/x.py"
    assert paths.to_neovim("/srv/app/vendor/y.py") == "/opt/v/y.py"
    assert paths.to_neovim("/srv/apple/z.py") == "/home/me/srv/apple/z.py"
    assert paths.to_neovim("/srv/app") == "/mnt/app"
    assert paths.to_claude("/mnt/app/x.py") == "/srv/app/x.py"
    assert paths.to_claude("/mnt/application") is None  # under no prefix: never sent


def test_trailing_slashes_root_and_urls_on_neovims_side():
    paths = PathMap.parse(["/workspace/=/home/me/p/", "/=/mnt/box", "/data=scp://box//data"])
    assert paths.to_neovim("/workspace/a") == "/home/me/p/a"
    assert paths.to_neovim("/etc/hosts") == "/mnt/box/etc/hosts"
    assert paths.to_claude("/mnt/box") == "/"
    assert paths.to_neovim("/data/x.csv") == "scp://box//data/x.csv"
    assert paths.to_claude("scp://box//data/x.csv") == "/data/x.csv"
    assert paths.uri_to_claude("file://scp://box//data/x.csv") == "file:///data/x.csv"
    assert paths.uri_to_claude("untitled:1") == "untitled:1"


def test_uris_and_their_percent_decoded_forms_are_mapped_to_neovims_candidates():
    paths = PathMap.parse([f"{CLAUDE}=/home/me/ws"])
    assert paths.candidates(f"file://{CLAUDE}/my%20file.py") == [
        "/home/me/ws/my%20file.py", "/home/me/ws/my file.py"]


def test_fields_of_a_message_are_mapped_by_name():
    paths = PathMap.parse([f"{CLAUDE}=/home/me/ws"])
    message = {"tabs": [{"uri": "file:///home/me/ws/a.py", "fileName": "/home/me/ws/a.py",
                         "label": "/home/me/ws/a.py"}], "text": "/home/me/ws"}
    assert paths.to_claude_fields(message) == {
        "tabs": [{"uri": f"file://{CLAUDE}/a.py", "fileName": f"{CLAUDE}/a.py",
                  "label": "/home/me/ws/a.py"}], "text": "/home/me/ws"}


def test_without_prefixes_it_is_the_identity_and_confines_nothing():
    paths = PathMap()
    message = {"filePath": "/a"}
    assert not paths.confines and paths.to_claude_fields(message) is message
    assert paths.candidates("file:///a%20b") == ["/a%20b", "/a b"]
    assert paths.candidates("/w/../../etc/passwd") == ["/w/../../etc/passwd"]  # as today
    assert paths.to_neovim("/etc/passwd") == paths.to_claude("/etc/passwd") == "/etc/passwd"
    assert paths.claude_path("relative/a.py") == "relative/a.py"


@pytest.mark.parametrize("spec", ["/a", "=/b", "/a=", "relative=/b"])
def test_a_bad_spec_says_what_it_should_be(spec):
    with pytest.raises(ValueError, match=r"CLAUDE_SIDE=NEOVIM_SIDE|absolute"):
        PathMap.parse([spec])


# The map is a boundary: a Claude on another host reaches only the mapped folders


@pytest.mark.parametrize("path", [
    "/etc/passwd", "/claude/wsx/a.py", f"{CLAUDE}/../../etc/passwd", f"{CLAUDE}/a/../../x",
    f"file://{CLAUDE}/%2e%2e/%2E%2E/etc/passwd", f"file://{CLAUDE}/..%2f..%2fetc/passwd",
    "relative/a.py", "~/.ssh/id_ed25519", "", f"{CLAUDE}/a\0b",
])
def test_a_path_outside_the_map_is_refused_with_a_sentence(path):
    paths = PathMap.parse([f"{CLAUDE}=/home/me/ws"])
    with pytest.raises(OutsideMap, match="outside the folders mapped for Claude"):
        paths.candidates(path)
    if "%" not in path:  # a path, not a URI: never decoded
        with pytest.raises(OutsideMap):
            paths.to_neovim(path)


def test_paths_inside_are_normalised_before_they_are_mapped():
    paths = PathMap.parse([f"{CLAUDE}=/home/me/ws"])
    assert paths.candidates(f"{CLAUDE}//sub/./x/../a.py") == ["/home/me/ws/sub/a.py"]
    assert paths.candidates(f"file://{CLAUDE}/my%20file.py") == [
        "/home/me/ws/my%20file.py", "/home/me/ws/my file.py"]
    assert paths.claude_path(f"file://{CLAUDE}/a/../b.py") == f"{CLAUDE}/b.py"
    assert paths.to_neovim(f"//{CLAUDE[1:]}/x") == "/home/me/ws/x"


def test_a_symlink_inside_the_map_leading_out_is_refused(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "secret").write_text("key")
    (tmp_path / "ws" / "link").symlink_to(tmp_path / "secret")
    (tmp_path / "ws" / "dir").symlink_to(tmp_path)
    (tmp_path / "ws" / "inner").symlink_to(tmp_path / "ws")  # inside: fine
    paths = PathMap.parse([f"{CLAUDE}={tmp_path / 'ws'}"])
    for path in (f"{CLAUDE}/link", f"{CLAUDE}/dir/secret", f"{CLAUDE}/dir/ws/link"):
        with pytest.raises(OutsideMap, match="symbolic link"):
            paths.to_neovim(path)
    assert paths.to_neovim(f"{CLAUDE}/inner/new.py") == str(tmp_path / "ws" / "inner/new.py")
    # Going back: a name is a name, but what carries a file's text (a selection) is resolved.
    assert paths.to_claude(str(tmp_path / "ws" / "link")) == f"{CLAUDE}/link"
    assert paths.to_claude(str(tmp_path / "ws" / "link"), resolve=True) is None
    assert paths.to_claude_fields({"filePath": str(tmp_path / "ws" / "link"), "text": "key"},
                                  resolve=True) is None
    assert paths.to_claude(str(tmp_path / "ws" / "inner" / "a"), resolve=True) == \
        f"{CLAUDE}/inner/a"


def test_nothing_outside_the_map_is_sent_back():
    paths = PathMap.parse([f"{CLAUDE}=/home/me/ws"])
    assert paths.to_claude("/home/me/.bashrc") is None
    assert paths.to_claude("/home/me/ws/../.bashrc") is None
    assert paths.uri_to_claude("file:///home/me/.bashrc") is None
    tabs = [{"uri": "file:///home/me/ws/a.py", "fileName": "/home/me/ws/a.py"},
            {"uri": "file:///home/me/.bashrc", "fileName": "/home/me/.bashrc"}]
    assert paths.to_claude_fields({"tabs": tabs}) == {"tabs": [
        {"uri": f"file://{CLAUDE}/a.py", "fileName": f"{CLAUDE}/a.py"}]}
    assert paths.to_claude_fields({"filePath": "/etc/hosts", "text": "127.0.0.1"}) is None
    assert paths.to_claude_fields({"filePath": "", "text": "scratch"}) is None
    assert paths.to_claude_fields({"items": [{"text": "no file"}]}) == {
        "items": [{"text": "no file"}]}
    assert paths.folders_to_claude(["/home/me/ws/sub", "/home/me"]) == [f"{CLAUDE}/sub"]
    assert paths.folders_to_claude(["/home/me"]) == [CLAUDE]


# Everything that crosses, against a real Neovim


@pytest.fixture
async def mapped(nvim_address, tmp_path):
    """A server for the test Neovim (cwd ``tmp_path``) whose Claude calls it /claude/ws."""
    async with running_app(nvim_address, lock_directory=tmp_path / "ide", remote=True,
                           paths=PathMap.parse([f"{CLAUDE}={tmp_path}"])) as app:
        yield app


@pytest.fixture
async def claude(mapped):
    async with mcp_client(mapped.port, mapped.token) as client:
        yield client


@pytest.fixture
def a_py(tmp_path):
    path = tmp_path / "a.py"
    path.write_text("one\ntwo\nthree\n")
    return path


async def test_the_lock_and_the_workspace_folders_are_claudes(mapped, claude):
    lock = json.loads(mapped.lock_path.read_text())
    assert lock["workspaceFolders"] == [CLAUDE]
    assert lock["pid"] != await claude_pid_of_neovim(mapped)  # its pid is another host's
    answer = await claude.call_json("getWorkspaceFolders")
    assert answer["rootPath"] == CLAUDE
    assert answer["folders"] == [{"name": "ws", "uri": f"file://{CLAUDE}", "path": CLAUDE,
                                  "index": 0}]


async def claude_pid_of_neovim(app) -> int:
    return await app.editor.exec_lua("return vim.fn.getpid()")


async def test_neovims_environment_is_left_alone(mapped, nvim):
    record = await nvim.exec_lua("return vim.g.claude_nvim_server")
    assert record["claude"]["env"]["CLAUDE_CODE_SSE_PORT"] == str(mapped.port)
    assert await nvim.exec_lua("return vim.env.CLAUDE_CODE_SSE_PORT") is None


async def test_selections_and_mentions_name_claudes_paths(claude, nvim, a_py):
    await edit(nvim, a_py)
    await nvim.request("nvim_win_set_cursor", 0, [2, 1])
    note = await claude.next_notification("selection_changed")
    while note["params"]["selection"]["start"] != {"line": 1, "character": 1}:
        note = await claude.next_notification(
            "selection_changed", after=claude.notifications.index(note) + 1)
    assert note["params"]["filePath"] == f"{CLAUDE}/a.py"
    assert note["params"]["fileUrl"] == f"file://{CLAUDE}/a.py"
    current = await claude.call_json("getCurrentSelection")
    assert (current["filePath"], current["fileUrl"]) == (f"{CLAUDE}/a.py",
                                                        f"file://{CLAUDE}/a.py")
    await nvim.request("nvim_command", "ClaudeNvimAdd a.py 2 3")
    mention = await claude.next_notification("at_mentioned")
    assert mention["params"] == {"filePath": f"{CLAUDE}/a.py", "lineStart": 1, "lineEnd": 2}


DIAGNOSE = """
vim.diagnostic.set(vim.api.nvim_create_namespace('t'), vim.fn.bufnr(...), {
  { lnum = 1, col = 0, message = 'bad two', severity = vim.diagnostic.severity.ERROR } })
"""


async def test_diagnostics_are_asked_and_answered_in_claudes_uris(claude, nvim, a_py):
    await edit(nvim, a_py)
    await nvim.exec_lua(DIAGNOSE, str(a_py))
    uri = f"file://{CLAUDE}/a.py"
    (one,) = await claude.call_json("getDiagnostics", {"uri": uri})
    assert one["uri"] == uri and [d["message"] for d in one["diagnostics"]] == ["bad two"]
    (every,) = await claude.call_json("getDiagnostics")
    assert every == one


async def test_open_file_opens_neovims_copy_and_answers_claudes_path(claude, nvim, a_py):
    quiet = await claude.call_json("openFile", {"filePath": f"{CLAUDE}/a.py",
                                                "makeFrontmost": False})
    assert quiet["filePath"] == f"{CLAUDE}/a.py"
    await claude.call_tool("openFile", {"filePath": f"{CLAUDE}/a.py", "startLine": 2})
    assert await nvim.exec_lua("return vim.api.nvim_buf_get_name(0)") == str(a_py)
    tabs = (await claude.call_json("getOpenEditors"))["tabs"]
    assert [(t["uri"], t["fileName"]) for t in tabs] == [(f"file://{CLAUDE}/a.py",
                                                         f"{CLAUDE}/a.py")]


async def test_dirty_checks_and_saves_take_and_give_claudes_paths(claude, nvim, a_py):
    await edit(nvim, a_py)
    await nvim.exec_lua("vim.api.nvim_buf_set_lines(0, 0, 1, false, {'ONE'})")
    dirty = await claude.call_json("checkDocumentDirty", {"filePath": f"{CLAUDE}/a.py"})
    assert (dirty["filePath"], dirty["isDirty"]) == (f"{CLAUDE}/a.py", True)
    saved = await claude.call_json("saveDocument", {"filePath": f"{CLAUDE}/a.py"})
    assert (saved["success"], saved["filePath"]) == (True, f"{CLAUDE}/a.py")
    assert a_py.read_text() == "ONE\ntwo\nthree\n"


@pytest.mark.parametrize("verdict", ["ClaudeNvimDiffAccept", "ClaudeNvimDiffDeny"])
async def test_a_diff_of_claudes_path_shows_neovims_file(claude, nvim, a_py, verdict):
    args = diff_args(f"{CLAUDE}/a.py", "one\n2\nthree\n")
    async with trio.open_nursery() as nursery:
        diff = PendingDiff(claude, args)
        nursery.start_soon(diff.run)
        shown = await eventually(nvim, """
          for _, b in ipairs(vim.api.nvim_list_bufs()) do
            if vim.b[b].claude_nvim_proposal then
              vim.api.nvim_set_current_win(vim.fn.win_findbuf(b)[1])
              return vim.api.nvim_buf_get_name(vim.fn.winbufnr(vim.fn.winnr('#')))
            end
          end""")
        assert shown == str(a_py)
        await nvim.request("nvim_command", verdict)
        outcome = await diff.outcome()
    assert outcome[0] == ("FILE_SAVED" if verdict.endswith("Accept") else "DIFF_REJECTED")


async def test_the_model_endpoints_answers_name_claudes_paths(mapped, nvim, a_py):
    await edit(nvim, a_py)
    await nvim.exec_lua("vim.fn.setqflist({ { filename = ..., lnum = 2, text = 'here' } })",
                        str(a_py))
    async with mcp_client(mapped.port, mapped.token, path=MODEL_PATH) as model:
        text = await model.call_json("getBufferText", {"filePath": f"{CLAUDE}/a.py"})
        assert (text["uri"], text["text"]) == (f"file://{CLAUDE}/a.py", "one\ntwo\nthree")
        (item,) = (await model.call_json("getQuickfixList"))["items"]
        assert item["uri"] == f"file://{CLAUDE}/a.py"
