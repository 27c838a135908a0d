"""getOpenEditors and getDiagnostics on a real headless Neovim (docs/protocol.md §10.3, §10.4)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote

from helpers import edit

CURRENT = "return vim.api.nvim_get_current_buf()"

SET_DIAGNOSTICS = """
local path, diagnostics, namespace = ...
local buf = vim.fn.bufadd(path)
vim.fn.bufload(buf)
vim.bo[buf].buflisted = true
vim.diagnostic.set(vim.api.nvim_create_namespace(namespace), buf, diagnostics)
return buf
"""


# The files are C, Lua and text rather than Python: Neovim's python ftplugin probes for a
# Python provider, which costs over a second per test.


def write(path: Path, text: str = "x\n") -> Path:
    path.write_text(text, encoding="utf-8")
    return path


async def set_diagnostics(nvim, path: Path | str, diagnostics: list[dict],
                          namespace: str = "tests") -> int:
    return await nvim.exec_lua(SET_DIAGNOSTICS, str(path), diagnostics, namespace)


async def open_editors(client) -> list[dict]:
    result = await client.call_json("getOpenEditors", {})
    assert list(result) == ["tabs"]
    return result["tabs"]


async def diagnostics(client, arguments: dict | None = None) -> list[dict]:
    return await client.call_json("getDiagnostics", arguments if arguments is not None else {})


# getOpenEditors


async def test_open_editors_lists_listed_named_file_buffers_only(client, nvim, tmp_path):
    z = write(tmp_path / "z.c", "print(1)\n")
    spaced = write(tmp_path / "my notes.txt")
    plain = write(tmp_path / "data.qqz")
    hidden = write(tmp_path / "hidden.c")
    scratch_name = str(tmp_path / "scratch.c")

    z_buf = await edit(nvim, z)
    spaced_buf = await edit(nvim, spaced)
    await nvim.request("nvim_command", "terminal cat")
    terminal_buf = await nvim.exec_lua(CURRENT)
    assert await nvim.exec_lua("return vim.bo[...].buflisted", terminal_buf)
    await edit(nvim, hidden)
    await nvim.request("nvim_command", "setlocal nobuflisted")
    scratch_buf = await nvim.exec_lua(
        "local b = vim.api.nvim_create_buf(true, true); vim.api.nvim_buf_set_name(b, ...); "
        "return b", scratch_name)
    assert await nvim.exec_lua("return vim.bo[...].buftype", scratch_buf) == "nofile"
    await nvim.request("nvim_command", "enew")  # listed, but unnamed
    plain_buf = await edit(nvim, plain)
    # A later buffer number for an earlier name: the order is the buffer number's, not the name's.
    a = write(tmp_path / "a.lua", "return 1\n")
    a_buf = await edit(nvim, a)
    await edit(nvim, spaced)  # the current window's buffer

    tabs = await open_editors(client)
    assert [t["uri"] for t in tabs] == [
        "file://" + str(z), "file://" + str(spaced), "file://" + str(plain), "file://" + str(a)]
    assert not any("%" in t["uri"] for t in tabs)  # not percent-encoded
    assert z_buf < spaced_buf < plain_buf < a_buf
    by_label = {t["label"]: t for t in tabs}
    assert set(by_label) == {"z.c", "my notes.txt", "data.qqz", "a.lua"}
    assert by_label["z.c"]["languageId"] == "c"
    assert by_label["a.lua"]["languageId"] == "lua"
    assert by_label["data.qqz"]["languageId"] == "plaintext"
    assert by_label["my notes.txt"]["languageId"] == "text"
    assert [t["isActive"] for t in tabs] == [False, True, False, False]
    assert all(t["isDirty"] is False for t in tabs)
    for tab in tabs:
        assert {"uri", "isActive", "label", "languageId", "isDirty"} <= set(tab)


async def test_only_the_current_windows_buffer_is_active(client, nvim, tmp_path):
    left = write(tmp_path / "left.c")
    right = write(tmp_path / "right.c")
    await edit(nvim, left)
    await nvim.exec_lua("vim.cmd('vsplit ' .. vim.fn.fnameescape(...))", str(right))
    tabs = {t["label"]: t["isActive"] for t in await open_editors(client)}
    assert tabs == {"left.c": False, "right.c": True}
    await nvim.request("nvim_command", "wincmd w")  # the other window: left.c is now current
    tabs = {t["label"]: t["isActive"] for t in await open_editors(client)}
    assert tabs == {"left.c": True, "right.c": False}


async def test_is_dirty_follows_modified(client, nvim, tmp_path):
    path = write(tmp_path / "dirty.c")
    buf = await edit(nvim, path)
    assert (await open_editors(client))[0]["isDirty"] is False
    await nvim.request("nvim_buf_set_lines", buf, 0, -1, False, ["changed"])
    assert (await open_editors(client))[0]["isDirty"] is True
    await nvim.request("nvim_command", "write")
    assert (await open_editors(client))[0]["isDirty"] is False
    assert path.read_text() == "changed\n"


async def test_unloaded_listed_buffers_are_included_and_clean(client, nvim, tmp_path):
    opened = write(tmp_path / "opened.c")
    await edit(nvim, opened)
    never_loaded = tmp_path / "later.rs"  # :badd does not need the file to exist
    await nvim.request("nvim_command", "badd " + str(never_loaded))
    buf = await nvim.exec_lua("return vim.fn.bufnr(...)", str(never_loaded))
    assert not await nvim.request("nvim_buf_is_loaded", buf)
    tabs = await open_editors(client)
    assert [t["uri"] for t in tabs] == ["file://" + str(opened), "file://" + str(never_loaded)]
    assert tabs[1]["isDirty"] is False and tabs[1]["isActive"] is False
    assert tabs[1]["label"] == "later.rs"
    assert tabs[1]["languageId"] == "rust"  # guessed from the name, as the buffer has none yet


async def test_no_file_buffers_no_tabs(client):
    assert await open_editors(client) == []


# getDiagnostics

SAMPLE = "h\u00e9llo \U0001f600x = 1"  # the x is at byte 11 and at UTF-16 character 8
MESSAGE = '"x" is not defined: 100% {%s}\n\\ \t ü'  # JSON and format() specials


async def test_a_diagnostic_in_the_clis_shape(client, nvim, tmp_path):
    path = write(tmp_path / "a.c", f"first\n{SAMPLE}\n")
    await edit(nvim, path)
    await set_diagnostics(nvim, path, [{
        "lnum": 1, "col": 11, "end_lnum": 1, "end_col": 12, "severity": 1,
        "message": MESSAGE, "source": "Pyright", "code": "reportUndefinedVariable",
    }])
    answer = await diagnostics(client, {"uri": "file://" + str(path)})
    assert answer == [{"uri": "file://" + str(path), "diagnostics": [{
        "message": MESSAGE, "severity": "Error",
        "range": {"start": {"line": 1, "character": 8}, "end": {"line": 1, "character": 9}},
        "source": "Pyright", "code": "reportUndefinedVariable",
    }]}]


async def test_severities_sources_codes_and_ranges(client, nvim, tmp_path):
    path = write(tmp_path / "b.c", "\n".join(["one", "two", SAMPLE, "four", "five"]) + "\n")
    await edit(nvim, path)
    await set_diagnostics(nvim, path, [
        {"lnum": 0, "col": 0, "end_lnum": 0, "end_col": 3, "severity": 1, "message": "e",
         "source": "ruff", "code": "E1"},
        {"lnum": 1, "col": 1, "end_lnum": 2, "end_col": 11, "severity": 2, "message": "w",
         "code": 42},
        {"lnum": 3, "col": 2, "severity": 3, "message": "i"},  # no end: the end is the start
        {"lnum": 4, "col": 0, "end_lnum": 4, "end_col": 4, "severity": 4, "message": "h"},
    ])
    [entry] = await diagnostics(client, {"uri": str(path)})
    assert entry["uri"] == str(path)
    got = entry["diagnostics"]
    assert [d["severity"] for d in got] == ["Error", "Warning", "Information", "Hint"]
    assert [d["message"] for d in got] == ["e", "w", "i", "h"]
    assert [d["source"] for d in got] == ["ruff", "", "", ""]
    assert got[0]["code"] == "E1"
    assert got[1]["code"] == "42"  # a number from the language server becomes a string
    assert "code" not in got[2] and "code" not in got[3]
    # A multi-line range ending after the emoji on line 2 (byte 11 -> character 8).
    assert got[1]["range"] == {"start": {"line": 1, "character": 1},
                               "end": {"line": 2, "character": 8}}
    assert got[2]["range"] == {"start": {"line": 3, "character": 2},
                               "end": {"line": 3, "character": 2}}
    for d in got:
        assert set(d) <= {"message", "severity", "range", "source", "code"}


async def test_uri_is_echoed_exactly_however_the_file_is_named(client, nvim, tmp_path):
    path = write(tmp_path / "my file.c", f"{SAMPLE}\n")
    await edit(nvim, path)
    await set_diagnostics(nvim, path, [
        {"lnum": 0, "col": 11, "end_lnum": 0, "end_col": 12, "severity": 2, "message": "m"}])
    for sent in [
        "file://" + str(path),  # as the CLI builds it: not encoded
        "file://" + quote(str(path)),  # percent-encoded, as VS Code-style clients send
        str(path),  # a plain path
        "my file.c",  # relative: against Neovim's cwd (tmp_path)
        "./my file.c",
    ]:
        answer = await diagnostics(client, {"uri": sent})
        assert len(answer) == 1, sent
        assert answer[0]["uri"] == sent
        assert [d["message"] for d in answer[0]["diagnostics"]] == ["m"], sent
        assert answer[0]["diagnostics"][0]["range"]["start"] == {"line": 0, "character": 8}


async def test_the_literal_path_wins_over_the_decoded_one(client, nvim, tmp_path):
    encoded = write(tmp_path / "a%20b.c")
    spaced = write(tmp_path / "a b.c")
    await set_diagnostics(nvim, encoded, [{"lnum": 0, "col": 0, "message": "literal"}])
    await set_diagnostics(nvim, spaced, [{"lnum": 0, "col": 0, "message": "decoded"}])
    for sent, message in [("file://" + str(encoded), "literal"),
                          ("file://" + str(tmp_path) + "/a%2520b.c", "literal"),
                          ("file://" + str(spaced), "decoded"),
                          ("a%20b.c", "literal")]:
        [entry] = await diagnostics(client, {"uri": sent})
        assert entry["uri"] == sent
        assert [d["message"] for d in entry["diagnostics"]] == [message], sent


async def test_names_are_compared_as_paths_not_patterns(client, nvim, tmp_path):
    await set_diagnostics(nvim, write(tmp_path / "ax.c"), [{"lnum": 0, "col": 0, "message": "ax"}])
    brackets = write(tmp_path / "b[1]$HOME.c")
    await set_diagnostics(nvim, brackets, [{"lnum": 0, "col": 0, "message": "brackets"}])
    # bufnr('x.c') would find ax.c; x.c is not open, so it has no diagnostics.
    assert await diagnostics(client, {"uri": "x.c"}) == [{"uri": "x.c", "diagnostics": []}]
    assert await diagnostics(client, {"uri": "b1.c"}) == [{"uri": "b1.c", "diagnostics": []}]
    # `$HOME` in a file name is not a variable.
    for sent in ["b[1]$HOME.c", "file://" + str(brackets)]:
        [entry] = await diagnostics(client, {"uri": sent})
        assert [d["message"] for d in entry["diagnostics"]] == ["brackets"], sent


async def test_symlinks_and_home_lead_to_the_same_buffer(client, nvim, tmp_path):
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    (tmp_path / "link").symlink_to(real_dir)
    path = write(real_dir / "s.c")
    await edit(nvim, path)
    await set_diagnostics(nvim, path, [{"lnum": 0, "col": 0, "message": "found"}])
    await nvim.exec_lua("vim.env.HOME = ...", str(tmp_path))
    for sent in ["file://" + str(tmp_path / "link" / "s.c"), "link/s.c", "~/real/s.c",
                 "~/link/s.c"]:
        [entry] = await diagnostics(client, {"uri": sent})
        assert entry["uri"] == sent
        assert [d["message"] for d in entry["diagnostics"]] == ["found"], sent
    # Reported without a uri, a file has exactly the name Neovim has for it (Neovim itself
    # may resolve a symlinked directory; claude-nvim adds nothing).
    linked = write(tmp_path / "link" / "t.c")
    buf = await edit(nvim, linked)
    await set_diagnostics(nvim, linked, [{"lnum": 0, "col": 0, "message": "via link"}])
    name = await nvim.exec_lua("return vim.api.nvim_buf_get_name(...)", buf)
    uris = [e["uri"] for e in await diagnostics(client)]
    assert uris == ["file://" + str(path), "file://" + name]


async def test_unknown_files_and_files_without_diagnostics_are_empty_not_errors(
        client, nvim, tmp_path):
    clean = write(tmp_path / "clean.c")
    await edit(nvim, clean)
    for sent in ["file://" + str(clean), "file:///no/such/dir/x.c", "file:///no/such%20file.c",
                 "nope.c"]:
        result = await client.call_tool("getDiagnostics", {"uri": sent})
        assert "isError" not in result
        assert json.loads(result["content"][0]["text"]) == [{"uri": sent, "diagnostics": []}]


async def test_without_uri_every_loaded_named_buffer_with_diagnostics(client, nvim, tmp_path):
    assert await diagnostics(client) == []
    first = write(tmp_path / "first file.c")
    clean = write(tmp_path / "clean.c")
    second = write(tmp_path / "second.c", "a\nb\n")
    await set_diagnostics(nvim, first, [{"lnum": 0, "col": 0, "severity": 1, "message": "one"}])
    await edit(nvim, clean)
    await set_diagnostics(nvim, second, [
        {"lnum": 1, "col": 0, "severity": 2, "message": "late", "source": "b"},
        {"lnum": 0, "col": 0, "severity": 4, "message": "early", "source": "a"},
    ], namespace="other")
    # An unnamed buffer's diagnostics have no file to report them for.
    await nvim.exec_lua("local b = vim.api.nvim_create_buf(true, false); "
                        "vim.diagnostic.set(vim.api.nvim_create_namespace('tests'), b, "
                        "{{lnum = 0, col = 0, message = 'unnamed'}})")
    answer = await diagnostics(client)
    assert [e["uri"] for e in answer] == ["file://" + str(first), "file://" + str(second)]
    assert [d["message"] for d in answer[0]["diagnostics"]] == ["one"]
    assert [d["message"] for d in answer[1]["diagnostics"]] == ["early", "late"]
    # Every diagnostic reported without a uri is also reported for its file's uri.
    for entry in answer:
        assert await diagnostics(client, {"uri": entry["uri"]}) == [entry]


async def test_all_diagnostics_follow_every_change(client, nvim, tmp_path):
    path = write(tmp_path / "a.c", "x = 1\n")
    buf = await edit(nvim, path)
    await set_diagnostics(nvim, path, [{"lnum": 0, "col": 4, "end_lnum": 0, "end_col": 5,
                                        "message": "first"}])

    async def only_file() -> dict:
        [entry] = await diagnostics(client)
        return entry

    assert [d["message"] for d in (await only_file())["diagnostics"]] == ["first"]
    await set_diagnostics(nvim, path, [{"lnum": 0, "col": 4, "message": "second"}])
    assert [d["message"] for d in (await only_file())["diagnostics"]] == ["second"]
    # The same diagnostic (byte 4) after the text before it changed: a new UTF-16 column.
    await nvim.request("nvim_buf_set_lines", buf, 0, 1, True, ["😀= 1"])
    assert (await only_file())["diagnostics"][0]["range"]["start"] == {
        "line": 0, "character": 2}
    await nvim.request("nvim_command", f"file {tmp_path / 'renamed.c'}")
    assert (await only_file())["uri"] == "file://" + str(tmp_path / "renamed.c")
    await nvim.exec_lua("vim.diagnostic.reset()")
    assert await diagnostics(client) == []


async def test_diagnostics_of_an_unloaded_buffer_are_left_out(client, nvim, tmp_path):
    loaded = write(tmp_path / "loaded.c")
    unloaded = write(tmp_path / "unloaded.c")
    await set_diagnostics(nvim, loaded, [{"lnum": 0, "col": 0, "message": "here"}])
    buf = await set_diagnostics(nvim, unloaded, [{"lnum": 0, "col": 0, "message": "gone"}])
    await nvim.request("nvim_command", f"{buf}bunload")
    assert not await nvim.request("nvim_buf_is_loaded", buf)
    answer = await diagnostics(client)
    assert [e["uri"] for e in answer] == ["file://" + str(loaded)]


async def test_two_calls_serialise_identically(client, nvim, tmp_path):
    path = write(tmp_path / "same.c", f"{SAMPLE}\nb\n")
    await edit(nvim, path)
    # Two namespaces with diagnostics at the same place: the order must still be stable.
    for namespace in ("lsp", "linter"):
        await set_diagnostics(nvim, path, [
            {"lnum": 0, "col": 11, "end_lnum": 0, "end_col": 12, "severity": 2,
             "message": f"{namespace} says", "source": namespace, "code": 7},
            {"lnum": 1, "col": 0, "severity": 3, "message": f"{namespace} again"},
        ], namespace=namespace)
    for arguments in ({}, {"uri": "file://" + str(path)}):
        first = await client.call_tool("getDiagnostics", arguments)
        second = await client.call_tool("getDiagnostics", arguments)
        assert first == second
        assert len(json.loads(first["content"][0]["text"])[0]["diagnostics"]) == 4


async def test_bad_arguments_are_a_tool_error_naming_the_argument(client):
    result = await client.call_tool("getDiagnostics", {"uri": 5})
    assert result["isError"] is True
    assert "'uri'" in result["content"][0]["text"]
    # Unknown keys are ignored (new CLI versions add some).
    assert await diagnostics(client, {"future": True}) == []


async def test_diagnostics_for_a_file_reload_its_unmodified_buffer_first(client, nvim, tmp_path):
    # The CLI writes a file behind Neovim's back, then asks for its diagnostics.
    path = tmp_path / "w.txt"
    path.write_text("old\n")
    await nvim.request("nvim_command", f"edit {path}")
    path.write_text("new\n")
    os.utime(path, (os.stat(path).st_atime, os.stat(path).st_mtime + 5))
    await client.call_json("getDiagnostics", {"uri": "file://" + str(path)})
    assert await nvim.exec_lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == ["new"]
    # A buffer with unsaved changes is never reloaded.
    await nvim.exec_lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, {'mine'})")
    path.write_text("newer\n")
    os.utime(path, (os.stat(path).st_atime, os.stat(path).st_mtime + 10))
    await client.call_json("getDiagnostics", {"uri": "file://" + str(path)})
    assert await nvim.exec_lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == ["mine"]
