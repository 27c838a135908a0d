"""Selection tracking against a real headless Neovim: getCurrentSelection, getLatestSelection
and the selection_changed notification (docs/protocol.md §2, §9.1, §10.1 and §10.2;
the Lua half is in selection.py). Neovim is driven like a user does, with keys.
"""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from claude_nvim._app import FIRST_PUSH_DELAY
from claude_nvim._selection import TEXT_CAP, WINDOW_MS
from claude_nvim.testing import McpClient, mcp_client, running_app
from helpers import WAIT, edit, messages, mode

GROUP = "claude_nvim_selection"
NO_EDITOR = {"success": False, "message": "No active editor found"}
NO_HISTORY = {"success": False, "message": "No selection history"}
WINDOW = WINDOW_MS / 1000


def at(line: int, character: int) -> dict[str, int]:
    return {"line": line, "character": character}


def span(sl: int, sc: int, el: int, ec: int) -> dict[str, Any]:
    return {"start": at(sl, sc), "end": at(el, ec), "isEmpty": (sl, sc) == (el, ec)}


async def settle(nvim) -> None:
    """Wait until Neovim has consumed the keys sent so far (API requests wait for typeahead)."""
    await nvim.request("nvim_eval", "1")


async def feed(nvim, keys: str) -> None:
    await nvim.request("nvim_input", keys)
    await settle(nvim)


async def write_and_edit(nvim, path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    await edit(nvim, path)


async def autocmd_count(nvim) -> int | None:
    """How many autocmds the selection augroup holds; None when the group does not exist."""
    return await nvim.exec_lua(
        "local ok, cmds = pcall(vim.api.nvim_get_autocmds, { group = ... })\n"
        "return ok and #cmds or vim.NIL", GROUP)


def file_payload(path: Path, text: str, selection: dict[str, Any]) -> dict[str, Any]:
    return {"success": True, "text": text, "filePath": str(path), "fileUrl": f"file://{path}",
            "selection": selection}


async def current(client: McpClient) -> dict[str, Any]:
    return await client.call_json("getCurrentSelection")


async def latest(client: McpClient) -> dict[str, Any]:
    return await client.call_json("getLatestSelection")


def notified(payload: dict[str, Any]) -> dict[str, Any]:
    """A tool answer as selection_changed carries it: without ``success``."""
    return {k: v for k, v in payload.items() if k != "success"}


async def selection_where(client: McpClient, predicate: Callable[[dict[str, Any]], bool], *,
                          after: int = 0, timeout: float = WAIT) -> tuple[int, dict[str, Any]]:
    """The first selection_changed at index ``after`` or later whose params match."""
    with trio.fail_after(timeout):
        while True:
            note = await client.next_notification("selection_changed", after=after,
                                                  timeout=math.inf)
            index = next(i for i in range(after, len(client.notifications))
                         if client.notifications[i] is note)
            if predicate(note["params"]):
                return index, note["params"]
            after = index + 1


def cursor_at(line: int, character: int) -> Callable[[dict[str, Any]], bool]:
    return lambda p: p["text"] == "" and p["selection"] == span(line, character, line, character)


def selection_changes(client: McpClient, after: int = 0) -> list[dict[str, Any]]:
    return [m["params"] for m in client.notifications[after:]
            if m.get("method") == "selection_changed"]


# getCurrentSelection


async def test_normal_and_insert_mode_give_an_empty_selection_at_the_real_cursor(
        client, nvim, tmp_path):
    path = tmp_path / "a.txt"
    await write_and_edit(nvim, path, ["first line", "héllo 😀x"])
    await feed(nvim, "G$")
    assert await nvim.request("nvim_win_get_cursor", 0) == [2, 11]  # `x` is byte 11 ...
    assert await current(client) == file_payload(path, "", span(1, 8, 1, 8))  # ... character 8
    await feed(nvim, "h")  # onto the emoji: byte 7, character 6
    assert await current(client) == file_payload(path, "", span(1, 6, 1, 6))
    await feed(nvim, "A")  # Insert mode, after the `x`
    assert await mode(nvim) == "i"
    assert await current(client) == file_payload(path, "", span(1, 9, 1, 9))
    await feed(nvim, "<Esc>gg0w")
    assert await current(client) == file_payload(path, "", span(0, 6, 0, 6))


async def test_charwise_forward_and_backward_give_the_same_ordered_range(client, nvim, tmp_path):
    path = tmp_path / "a.txt"
    await write_and_edit(nvim, path, ["alpha beta", "gamma délta", "x"])
    expected = file_payload(path, "beta\ngamma dé", span(0, 6, 1, 8))  # é: 2 bytes, 1 unit
    await feed(nvim, "gg0wvjl")  # anchor on `b`, cursor on `é`
    assert await mode(nvim) == "v"
    assert await current(client) == expected
    await feed(nvim, "<Esc>2G0wlvkh")  # anchor on `é`, cursor on `b`
    assert await nvim.request("nvim_win_get_cursor", 0) == [1, 6]
    assert await current(client) == expected
    await feed(nvim, "<Esc>gg0vl")
    assert await current(client) == file_payload(path, "al", span(0, 0, 0, 2))


async def test_charwise_selection_that_takes_in_the_line_break(client, nvim, tmp_path):
    path = tmp_path / "a.txt"
    await write_and_edit(nvim, path, ["alpha beta", "", "gamma", "last"])
    await feed(nvim, "gg0wv$")  # `$` in Visual mode selects the line break too
    assert await current(client) == file_payload(path, "beta\n", span(0, 6, 1, 0))
    await feed(nvim, "<Esc>gg$vj")  # onto an empty line: its line break is the selected char
    assert await current(client) == file_payload(path, "a\n\n", span(0, 9, 2, 0))
    # On the last line there is no next line to point at: the range ends at the line's end.
    await feed(nvim, "<Esc>Gv$")
    assert await current(client) == file_payload(path, "last", span(3, 0, 3, 4))


async def test_linewise_selection_covers_whole_lines(client, nvim, tmp_path):
    path = tmp_path / "a.txt"
    await write_and_edit(nvim, path, ["  one", "two 😀", "héllo 😀x", "four"])
    # end.character is the UTF-16 length of the last line, not the cursor's column.
    expected = file_payload(path, "  one\ntwo 😀\nhéllo 😀x", span(0, 0, 2, 9))
    await feed(nvim, "gg0llVjj")
    assert await mode(nvim) == "V"
    assert await current(client) == expected
    await feed(nvim, "<Esc>3G$Vkk")  # upwards, from the end of a line
    assert await current(client) == expected
    await feed(nvim, "<Esc>GV")
    assert await current(client) == file_payload(path, "four", span(3, 0, 3, 4))


def lines_claude_shows(selection: dict[str, Any]) -> int:
    """The N of claude's "⧉ N lines selected" for a range (protocol doc section 9.1)."""
    start, end = selection["start"], selection["end"]
    return end["line"] - start["line"] + 1 - (end["character"] == 0)


@pytest.mark.parametrize(("keys", "lines"), [
    ("ggVj", 2), ("3GVk", 2), ("3GV", 1), ("4GVj", 2), ("GV", 1),  # linewise
    ("gg0lvj", 2), ("4Gvj", 2), ("G$v", 1), ("4G$vj", 2),  # charwise (inclusive)
    ("gg0<C-v>j", 2), ("4G<C-v>j", 2), ("3G<C-v>j", 2),  # blockwise
])
async def test_claude_counts_the_lines_selected_even_when_the_last_one_is_empty(
        client, nvim, tmp_path, keys, lines):
    path = tmp_path / "a.txt"
    await write_and_edit(nvim, path, ["first line", "", "", "third", ""])
    await feed(nvim, keys)
    selected = await current(client)
    assert lines_claude_shows(selected["selection"]) == lines
    await selection_where(client, lambda p: p["selection"] == selected["selection"])  # claude's
    await feed(nvim, "<Esc>")
    assert lines_claude_shows((await latest(client))["selection"]) == lines
    # The text is still what Neovim yanks (linewise: less the register's last line break).
    await feed(nvim, "gvy")
    register = await nvim.exec_lua("return vim.fn.getreg('\"')")
    assert selected["text"] + ("\n" if "V" in keys else "") == register


async def test_blockwise_selection_is_the_covering_span_and_the_row_fragments(
        client, nvim, tmp_path):
    path = tmp_path / "a.txt"
    await write_and_edit(nvim, path, ["é😀abc", "éxyzab", "abcdef", "ab", "abcdefgh"])
    # Display columns: the emoji is two cells wide, so `a` in row 0 sits above `z` in row 1.
    await feed(nvim, "gg0ll<C-v>jl")
    assert await mode(nvim) == "\x16"
    assert await current(client) == file_payload(path, "ab\nza", span(0, 3, 1, 5))
    # A short row gives a short fragment; the span's end is on the bottom row.
    await feed(nvim, "<Esc>3G0l<C-v>jjll")
    assert await current(client) == file_payload(path, "bcd\nb\nbcd", span(2, 1, 4, 4))
    await feed(nvim, "<Esc>5G0lll<C-v>kkhh")  # from the bottom right corner
    assert await current(client) == file_payload(path, "bcd\nb\nbcd", span(2, 1, 4, 4))
    # `$` runs every row to its own end.
    await feed(nvim, "<Esc>3G0l<C-v>jj$")
    assert await current(client) == file_payload(path, "bcdef\nb\nbcdefgh", span(2, 1, 4, 8))
    await feed(nvim, "<Esc>5G0l<C-v>kk$")  # `$` on the top row, the longest row not last
    expected = file_payload(path, "bcdef\nb\nbcdefgh", span(2, 1, 4, 8))
    assert await current(client) == expected
    await feed(nvim, "<Esc>")  # the marks alone do not tell that `$` was used
    assert await latest(client) == expected


async def test_select_mode_counts_as_a_selection(client, nvim, tmp_path):
    path = tmp_path / "a.txt"
    await write_and_edit(nvim, path, ["alpha beta", "gamma"])
    await feed(nvim, "gg0lvj<C-g>")
    assert await mode(nvim) == "s"
    assert await current(client) == file_payload(path, "lpha beta\nga", span(0, 1, 1, 2))
    await feed(nvim, "<Esc>gggH")
    assert await mode(nvim) == "S"
    assert await current(client) == file_payload(path, "alpha beta", span(0, 0, 0, 10))


async def test_exclusive_selection_leaves_the_last_character_out(client, nvim, tmp_path):
    path = tmp_path / "a.txt"
    await write_and_edit(nvim, path, ["alpha beta", "", "gamma"])
    await nvim.request("nvim_command", "set selection=exclusive")
    await feed(nvim, "gg0llvll")
    assert await current(client) == file_payload(path, "ph", span(0, 2, 0, 4))
    await feed(nvim, "<Esc>gg0wv$")  # the cursor sits after `beta`: no line break
    assert await current(client) == file_payload(path, "beta", span(0, 6, 0, 10))
    await feed(nvim, "<Esc>gg0wvj")  # the cursor is on the empty line, which is left out
    assert await current(client) == file_payload(path, "beta\n", span(0, 6, 1, 0))
    await feed(nvim, "<Esc>G0lvkk")  # backwards: the later position is the one left out
    assert await current(client) == file_payload(path, "lpha beta\n\ng", span(0, 1, 2, 1))
    await feed(nvim, "<Esc>")
    assert await latest(client) == file_payload(path, "lpha beta\n\ng", span(0, 1, 2, 1))


ORACLE_LINES = ["alpha beta", "", "gamma délta 😀", "gamma délta 😀 end", "last"]


@pytest.mark.parametrize(("selection", "keys"), [
    ("inclusive", "gg0lvj"),
    ("inclusive", "jjlvk"),
    ("inclusive", "gg$vj"),
    ("inclusive", "gg0wv$"),
    ("inclusive", "Gv$"),
    ("inclusive", "G$vkk"),
    ("inclusive", "3G0wwvj$"),
    ("inclusive", "gg0lVj"),
    ("inclusive", "GVkkk"),
    ("inclusive", "3G0w<C-v>jll"),
    ("inclusive", "4G0wll<C-v>khh"),
    ("inclusive", "3G$<C-v>j"),
    ("inclusive", "3G0w<C-v>j$"),
    ("inclusive", "4G0w<C-v>k$"),
    ("exclusive", "gg0lvj"),
    ("exclusive", "jjlvk"),
    ("exclusive", "gg$vj"),
    ("exclusive", "gg0wv$"),
    ("exclusive", "gg0lvjjl"),
    ("exclusive", "3G0wwvj$"),
    ("exclusive", "GVk"),
    ("exclusive", "3G0w<C-v>jll"),
    ("exclusive", "4G0wll<C-v>khh"),
    ("exclusive", "3G0w<C-v>j$"),
])
async def test_selected_text_is_what_neovim_yanks(client, nvim, tmp_path, selection, keys):
    # Neovim's own `y` is the oracle for the text, in every mode and 'selection' setting
    # (block rows shorter than the block are avoided: `y` pads those with spaces).
    path = tmp_path / "a.txt"
    await write_and_edit(nvim, path, ORACLE_LINES)
    await nvim.request("nvim_command", f"set selection={selection}")
    await feed(nvim, keys)
    selected = await current(client)
    linewise = await mode(nvim) == "V"
    await feed(nvim, "y")
    register = await nvim.exec_lua("return vim.fn.getreg('\"')")
    assert selected["text"] + ("\n" if linewise else "") == register
    # Once Visual mode is over, getLatestSelection reports the very same selection.
    assert await latest(client) == selected


@pytest.mark.parametrize("setup", [
    "terminal",
    "edit scratch.txt | setlocal buftype=nofile",
    "enew",
    "help",
    "float",
])
async def test_no_active_editor(client, nvim, tmp_path, setup):
    await write_and_edit(nvim, tmp_path / "a.txt", ["alpha", "beta"])
    await nvim.request("nvim_win_set_cursor", 0, [2, 1])
    cursor = await current(client)
    assert cursor["success"] is True
    if setup == "float":
        # A floating window, even one showing a real file, is a picker, not an editor.
        await nvim.exec_lua("vim.api.nvim_open_win(0, true, { relative = 'editor', row = 1, "
                            "col = 1, width = 20, height = 2 })")
    else:
        await nvim.request("nvim_command", setup)
    if setup == "help" and await nvim.exec_lua("return vim.bo.buftype") != "help":
        pytest.skip("this Neovim has no help files")
    # Beside the file's window (help, a float), the active editor is still that window, as it
    # is while the cursor is in Claude's terminal; where the file's window shows something
    # else now (:terminal, :enew, ...), there is none.
    beside = setup in ("help", "float")
    assert await current(client) == (cursor if beside else NO_EDITOR)
    await feed(nvim, "v")  # a selection here does not count
    assert await current(client) == (cursor if beside else NO_EDITOR)
    await feed(nvim, "<Esc>")
    assert await latest(client) == NO_HISTORY


async def test_paths_are_absolute_and_urls_are_not_percent_encoded(client, nvim, tmp_path):
    path = tmp_path / "my file #1 ü.txt"
    path.write_text("hello\n", encoding="utf-8")
    # Opened by a relative name, from Neovim's cwd (tmp_path).
    await nvim.exec_lua("vim.cmd.edit(vim.fn.fnameescape(...))", path.name)
    assert await nvim.exec_lua("return vim.fn.getcwd()") == str(tmp_path)
    answer = await current(client)
    assert answer["filePath"] == str(path)
    assert answer["fileUrl"] == f"file://{tmp_path}/my file #1 ü.txt"
    await feed(nvim, "v<Esc>")
    assert (await latest(client))["fileUrl"] == answer["fileUrl"]


async def test_full_text_of_a_large_selection(client, nvim, tmp_path):
    path = tmp_path / "big.txt"
    lines = [f"{i:05d} héllo 😀 wörld" for i in range(4000)]  # 4,000 x 25 bytes
    await write_and_edit(nvim, path, lines)
    await feed(nvim, "ggVG")
    answer = await current(client)
    assert len(answer["text"].encode()) > 5 * TEXT_CAP
    assert answer == file_payload(path, "\n".join(lines), span(0, 0, 3999, 20))


# getLatestSelection


async def test_no_selection_history_before_any_selection(client, nvim, tmp_path):
    assert await latest(client) == NO_HISTORY
    await write_and_edit(nvim, tmp_path / "a.txt", ["alpha", "beta"])
    await feed(nvim, "jl")  # cursor moves are not selections
    assert await latest(client) == NO_HISTORY
    await feed(nvim, "vj")  # nor is a selection still in progress
    assert await latest(client) == NO_HISTORY


async def test_latest_selection_outlives_visual_mode(client, nvim, tmp_path):
    path = tmp_path / "a.txt"
    await write_and_edit(nvim, path, ["one", "two", "three", "four", "five"])
    await feed(nvim, "gglvjj<Esc>")
    first = file_payload(path, "ne\ntwo\nth", span(0, 1, 2, 2))
    assert await latest(client) == first
    await feed(nvim, "Gk0")  # the cursor moves on; the selection stays the latest
    assert await current(client) == file_payload(path, "", span(3, 0, 3, 0))
    assert await latest(client) == first
    await feed(nvim, "Vj<Esc>")  # a newer selection replaces it
    assert await latest(client) == file_payload(path, "four\nfive", span(3, 0, 4, 4))
    await feed(nvim, "gg<C-v>jly")  # ended by an operator that leaves the text alone
    assert await latest(client) == file_payload(path, "on\ntw", span(0, 0, 1, 2))
    await feed(nvim, "jjvj:")  # ended by the command line
    assert await mode(nvim) == "c"
    assert await latest(client) == file_payload(path, "three\nf", span(2, 0, 3, 1))
    await feed(nvim, "<Esc>")


async def test_latest_selection_after_a_deleting_operator(client, nvim, tmp_path):
    path = tmp_path / "a.txt"
    await write_and_edit(nvim, path, ["one", "two", "three", "four"])
    await feed(nvim, "ggjVjd")
    assert await nvim.request("nvim_buf_get_lines", 0, 0, -1, True) == ["one", "four"]
    # The text as it was selected, although the buffer no longer has it.
    assert await latest(client) == file_payload(path, "two\nthree", span(1, 0, 2, 5))
    await feed(nvim, "gglvlc<Esc>")
    assert await nvim.request("nvim_buf_get_lines", 0, 0, -1, True) == ["o", "four"]
    assert await latest(client) == file_payload(path, "ne", span(0, 1, 0, 3))
    await feed(nvim, "GVd")  # deleted at once, without a move inside Visual mode
    assert await latest(client) == file_payload(path, "four", span(1, 0, 1, 4))
    await feed(nvim, "u")
    # It outlives its buffer, too.
    await nvim.request("nvim_command", "enew | bwipeout! a.txt")
    assert await latest(client) == file_payload(path, "four", span(1, 0, 1, 4))


async def test_latest_selection_has_the_full_text_of_a_large_selection(client, nvim, tmp_path):
    path = tmp_path / "big.txt"
    lines = [f"{i:05d} héllo 😀 wörld" for i in range(4000)]
    await write_and_edit(nvim, path, lines)
    await feed(nvim, "ggVG<Esc>gg")
    assert await latest(client) == file_payload(path, "\n".join(lines), span(0, 0, 3999, 20))
    # Deleted text can no longer be re-read: the range stays exact, and a text shorter
    # than the selection says so with `truncated`.
    await feed(nvim, "ggVGd")
    answer = await latest(client)
    assert answer["selection"] == span(0, 0, 3999, 20)
    full = "\n".join(lines)
    assert full.startswith(answer["text"])
    assert answer["text"] == full or answer.get("truncated") is True


# selection_changed


async def test_a_cursor_move_arrives_at_once(client, nvim, tmp_path):
    await write_and_edit(nvim, tmp_path / "a.txt", [f"line {i}" for i in range(10)])
    await selection_where(client, cursor_at(0, 0))  # the first push waits ~0.5 s by design
    latencies = []
    for line in range(1, 6):
        # Out of the throttle window, so that this move is a leading edge.
        await trio.sleep(WINDOW * 1.5)
        after = len(client.notifications)
        start = trio.current_time()
        await nvim.request("nvim_input", "j")
        await selection_where(client, cursor_at(line, 0), after=after)
        latencies.append(trio.current_time() - start)
    # Events that leave the payload as it was send nothing.
    await feed(nvim, "i<Esc>")
    assert await client.no_notification("selection_changed", after=len(client.notifications),
                                        within=3 * WINDOW)
    # A trailing-only debounce would take at least the window; the leading edge is immediate.
    assert statistics.median(latencies) < WINDOW * 0.8, latencies


async def test_a_visual_selection_is_notified_with_its_range_and_text(client, nvim, tmp_path):
    path = tmp_path / "a.txt"
    await write_and_edit(nvim, path, ["alpha beta", "gamma délta"])
    await selection_where(client, cursor_at(0, 0))
    after = len(client.notifications)
    await feed(nvim, "wvjl")
    expected = notified(file_payload(path, "beta\ngamma dé", span(0, 6, 1, 8)))
    _, params = await selection_where(client, lambda p: p["text"] != "", after=after)
    if params != expected:  # a throttled intermediate state; the final one must follow
        _, params = await selection_where(client, lambda p: p == expected, after=after)
    assert params == expected
    # Leaving Visual mode flushes the selection at once, even inside the throttle window,
    # and the CLI keeps showing it until the cursor moves.
    after = len(client.notifications)
    await feed(nvim, "<Esc>gg0vj<Esc>")
    expected = notified(file_payload(path, "alpha beta\ng", span(0, 0, 1, 1)))
    await selection_where(client, lambda p: p == expected, after=after)
    assert await client.no_notification("selection_changed", after=len(client.notifications),
                                        within=3 * WINDOW)
    assert selection_changes(client)[-1] == expected
    after = len(client.notifications)
    await feed(nvim, "l")
    await selection_where(client, cursor_at(1, 1), after=after)
    # Another file: a new filePath.
    other = tmp_path / "b.txt"
    await write_and_edit(nvim, other, ["x"])
    _, params = await selection_where(client, cursor_at(0, 0), after=after)
    assert (params["filePath"], params["fileUrl"]) == (str(other), f"file://{other}")


async def test_a_huge_selection_is_notified_with_capped_text_and_an_exact_range(
        client, nvim, tmp_path):
    path = tmp_path / "huge.txt"
    # 13 bytes a line with the newline: the 10,000-byte cap falls inside an emoji, which
    # must not be split (a split one would not even survive the JSON round trip as UTF-8).
    lines = ["😀😀😀"] * 20_000
    await write_and_edit(nvim, path, lines)
    await selection_where(client, cursor_at(0, 0))
    after = len(client.notifications)
    await feed(nvim, "ggVG")
    _, params = await selection_where(client, lambda p: p["selection"]["end"]["line"] == 19_999,
                                      after=after)
    full = "\n".join(lines)
    assert params["selection"] == span(0, 0, 19_999, 6)
    assert params["truncated"] is True
    assert 0 < len(params["text"].encode()) <= TEXT_CAP
    assert full.startswith(params["text"])
    assert {params["filePath"], params["fileUrl"]} == {str(path), f"file://{path}"}
    # The tool reads the whole selection.
    answer = await current(client)
    assert "truncated" not in answer
    assert answer == file_payload(path, full, span(0, 0, 19_999, 6))


async def test_a_burst_of_moves_is_throttled_and_ends_on_the_final_state(
        client, nvim, tmp_path):
    await write_and_edit(nvim, tmp_path / "a.txt", [f"line {i}" for i in range(100)])
    await selection_where(client, cursor_at(0, 0))
    after = len(client.notifications)
    start = trio.current_time()
    for _ in range(40):
        await nvim.request("nvim_input", "j")
        await trio.sleep(0.005)
    await selection_where(client, cursor_at(40, 0), after=after)
    elapsed = trio.current_time() - start
    assert await client.no_notification("selection_changed", after=len(client.notifications),
                                        within=3 * WINDOW)
    sent = selection_changes(client, after)
    assert sent[-1]["selection"] == span(40, 0, 40, 0)
    # At most a leading edge plus one per window (about 6 messages on an idle machine).
    report = (elapsed, [p["selection"]["start"]["line"] for p in sent])
    assert 2 <= len(sent) <= 2 + elapsed / WINDOW, report
    lines = [p["selection"]["start"]["line"] for p in sent]
    assert lines == sorted(set(lines)), "states arrive in order, each once"


async def test_nothing_is_notified_while_a_terminal_is_the_current_window(
        client, nvim, tmp_path):
    await write_and_edit(nvim, tmp_path / "a.txt", [f"line {i}" for i in range(10)])
    await selection_where(client, cursor_at(0, 0))
    after = len(client.notifications)
    await nvim.request("nvim_command", "belowright split | terminal")
    assert await nvim.exec_lua("return vim.bo.buftype") == "terminal"
    await feed(nvim, "G")
    bottom = await nvim.request("nvim_win_get_cursor", 0)
    await feed(nvim, "gg")
    assert await nvim.request("nvim_win_get_cursor", 0) != bottom  # the cursor did move
    await feed(nvim, "vj<Esc>")
    assert await client.no_notification("selection_changed", after=after, within=0.3)
    assert await latest(client) == NO_HISTORY
    await feed(nvim, "<C-w>pj")  # back in the file
    await selection_where(client, cursor_at(1, 0), after=after)


async def test_every_client_is_notified(client, app, nvim, tmp_path):
    await write_and_edit(nvim, tmp_path / "a.txt", ["alpha", "beta"])
    async with mcp_client(app.port, app.token) as other:
        for each in (client, other):
            await selection_where(each, cursor_at(0, 0))
        marks = [len(client.notifications), len(other.notifications)]
        await feed(nvim, "jl")
        for each, after in zip((client, other), marks, strict=True):
            await selection_where(each, cursor_at(1, 1), after=after)


async def test_first_notification_waits_for_tools_list(app, nvim, tmp_path):
    await write_and_edit(nvim, tmp_path / "a.txt", ["alpha", "beta"])
    async with mcp_client(app.port, app.token, initialize=False) as fresh:
        await fresh.result("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                          "clientInfo": {"name": "t", "version": "0"}})
        await fresh.notify("notifications/initialized")
        await fresh.notify("ide_connected", {"pid": 4242})
        await feed(nvim, "j")
        assert await fresh.no_notification("selection_changed", within=0.3)
        await fresh.result("tools/list")
        listed = trio.current_time()
        # The state of now, sent once, about 0.5 s after the tools/list answer.
        await selection_where(fresh, cursor_at(1, 0))
        waited = trio.current_time() - listed
        assert FIRST_PUSH_DELAY - 0.05 <= waited <= FIRST_PUSH_DELAY + 1.0, waited
        assert len(selection_changes(fresh)) == 1


# Server lifecycle


async def test_no_errors_in_neovim_once_the_server_has_stopped(nvim_address, nvim, tmp_path):
    await write_and_edit(nvim, tmp_path / "a.txt", ["alpha", "beta", "gamma"])
    async with running_app(nvim_address, lock_directory=tmp_path / "x") as app, \
            mcp_client(app.port, app.token) as connected:
        await selection_where(connected, cursor_at(0, 0))
        assert await autocmd_count(nvim) == 4
    assert await autocmd_count(nvim) is None  # the server took its autocmds away
    before = await messages(nvim)
    await feed(nvim, "jlvj<Esc>ggVG<Esc>")
    await nvim.request("nvim_command", "edit other.txt")
    assert await messages(nvim) == before
    assert await mode(nvim) == "n"


SERVE = [sys.executable, "-m", "claude_nvim", "serve"]


async def killed_server(nvim_address: str, nvim, config: Path) -> None:
    """Run ``claude-nvim serve`` on Neovim, then kill it: no clean-up runs."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NVIM", "CLAUDE_NVIM_DISABLE", "CLAUDE_CODE_SSE_PORT")}
    env["CLAUDE_CONFIG_DIR"] = str(config)
    process = await trio.lowlevel.open_process([*SERVE, "--nvim", nvim_address], env=env,
                                               stderr=subprocess.DEVNULL)
    try:
        with trio.fail_after(WAIT):
            while not list(config.glob("ide/*.lock")):
                assert process.poll() is None, "serve exited early"
                await trio.sleep(0.02)
        assert await autocmd_count(nvim) == 4
        channel = (await nvim.exec_lua("return vim.g.claude_nvim_server"))["channel"]
    finally:
        process.send_signal(signal.SIGKILL)
        await process.wait()
    with trio.fail_after(WAIT):  # until Neovim has seen the channel close
        while await nvim.request("nvim_get_chan_info", channel):
            await trio.sleep(0.01)
    lock = next(config.glob("ide/*.lock"))
    assert json.loads(lock.read_text())["authToken"]  # left behind: nobody cleaned up


async def test_a_dead_server_causes_no_errors_in_neovim(nvim_address, nvim, tmp_path):
    await write_and_edit(nvim, tmp_path / "a.txt", ["alpha", "beta", "gamma"])
    await killed_server(nvim_address, nvim, tmp_path / "config")
    before = await messages(nvim)
    await feed(nvim, "jlvj<Esc>")
    await feed(nvim, "ggVG<Esc>gg")
    assert await messages(nvim) == before
    assert await autocmd_count(nvim) is None  # the first failed notify switched it all off


async def test_a_new_server_replaces_a_dead_ones_autocmds(nvim_address, nvim, tmp_path):
    path = tmp_path / "a.txt"
    await write_and_edit(nvim, path, ["alpha", "beta", "gamma"])
    await killed_server(nvim_address, nvim, tmp_path / "config")
    assert await autocmd_count(nvim) == 4  # nothing happened since: still installed
    before = await messages(nvim)
    async with running_app(nvim_address, lock_directory=tmp_path / "x") as app, \
            mcp_client(app.port, app.token) as connected:
        assert await autocmd_count(nvim) == 4  # replaced, not added to
        await selection_where(connected, cursor_at(0, 0))
        after = len(connected.notifications)
        await feed(nvim, "jvj")
        expected = notified(file_payload(path, "beta\ng", span(1, 0, 2, 1)))
        await selection_where(connected, lambda p: p == expected, after=after)
        await feed(nvim, "<Esc>")
        assert await latest(connected) == file_payload(path, "beta\ng", span(1, 0, 2, 1))
        assert await messages(nvim) == before


async def test_a_100000_line_selection_is_read_whole_in_slices(client, nvim, tmp_path):
    path = tmp_path / "big.txt"
    lines = [f"line {i} é😀" for i in range(100_000)]
    path.write_text("\n".join(lines) + "\n")
    await nvim.request("nvim_command", f"edit {path}")
    await nvim.request("nvim_input", "ggVG")
    await nvim.request("nvim_eval", "1")
    got = await client.call_json("getCurrentSelection")
    assert got["text"] == "\n".join(lines)
    assert got["selection"]["end"] == {"line": 99_999, "character": len("line 99999 é") + 2}
    assert "more" not in got and "truncated" not in got
    await nvim.request("nvim_input", "<Esc>")
    await nvim.request("nvim_eval", "1")
    latest = await client.call_json("getLatestSelection")
    assert latest["text"] == got["text"]


@pytest.mark.parametrize("keys", ["3Gwv4990jb", "3Gwv4990j$", "3GV4990j"])
async def test_a_big_selection_reads_as_yank_would_copy_it(client, nvim, tmp_path, keys):
    path = tmp_path / "big.txt"
    await write_and_edit(nvim, path, [f"row {i} é😀 end" for i in range(6000)])
    await feed(nvim, keys)
    got = await client.call_json("getCurrentSelection")
    await feed(nvim, "y")
    yanked = await nvim.exec_lua("return vim.fn.getreg('\"')")
    # A linewise yank ends with a line break; a linewise selection's text does not.
    assert got["text"] == (yanked[:-1] if "V" in keys else yanked)
    assert len(got["text"]) > 75_000  # more than Lua reads itself (LUA_ROWS)
