"""openDiff, close_tab and closeAllDiffTabs against a real Neovim with a UI attached."""

from __future__ import annotations

import pytest
import trio

from claude_nvim._app import AlreadyServed
from claude_nvim._diffs import DiffRegistry
from claude_nvim.testing import mcp_client, running_app
from helpers import TAB, WAIT, PendingDiff, diff_args, eventually


@pytest.fixture
def ui_size() -> tuple[int, int]:
    """A common terminal: the diff tab's two windows are 60 columns each, where the window
    bar must fit whole."""
    return 120, 40


async def open_diff(nursery, client, nvim, path, contents, tab=TAB) -> PendingDiff:
    pending = PendingDiff(client, diff_args(path, contents, tab))
    before = await nvim.exec_lua(NEWEST_PROPOSAL)
    nursery.start_soon(pending.run)
    await eventually(nvim, f"return (function() {NEWEST_PROPOSAL} end)() > ...", before)
    return pending


NEWEST_PROPOSAL = """
local newest = 0
for _, b in ipairs(vim.api.nvim_list_bufs()) do
  newest = math.max(newest, vim.b[b].claude_nvim_proposal or 0)
end
return newest
"""


SHOW_STATE = """
local bufs = {}
for _, b in ipairs(vim.api.nvim_list_bufs()) do
  local name = vim.api.nvim_buf_get_name(b)
  if vim.b[b].claude_nvim_proposal or name:match("%(Claude's proposal[ %d]*%)$")
      or name:match('%(new file[ %d]*%)$') then
    bufs[#bufs + 1] = b
  end
end
return {tabs = #vim.api.nvim_list_tabpages(), ours = #bufs,
        groups = #vim.tbl_filter(function(a) return a.group_name and
          a.group_name:match('^claude_nvim_diff_') end, vim.api.nvim_get_autocmds({}))}
"""


async def nothing_left(nvim):
    await eventually(nvim, f"local s = (function() {SHOW_STATE} end)(); "
                           "return s.tabs == 1 and s.ours == 0 and s.groups == 0")


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "a.py"
    path.write_text("one\ntwo\nthree\n")
    return path


async def test_accept_with_w_returns_the_edited_text_and_never_writes(client, ui, target):
    async with trio.open_nursery() as nursery:
        diff = await open_diff(nursery, client, ui, target, "one\n2\nthree\nfour\n")
        assert await ui.exec_lua("return vim.wo.diff and vim.b.claude_nvim_proposal ~= nil")
        await ui.request("nvim_input", "ggAX<Esc>:w<CR>")
        assert await diff.outcome() == ["FILE_SAVED", "oneX\n2\nthree\nfour\n"]
    assert target.read_text() == "one\ntwo\nthree\n"  # the CLI writes it, not us
    # An accepted diff stays on screen, read-only, until close_tab.
    assert await ui.exec_lua("return #vim.api.nvim_list_tabpages()") == 2
    assert (await client.call_tool("close_tab", {"tab_name": TAB}))["content"][0]["text"] \
        == "TAB_CLOSED"
    await nothing_left(ui)


@pytest.mark.parametrize("contents", ["a\r\nb\r\n", "no newline at end", "", "x\n\n\n",
                                      "mixed\r\nline\nends\r\n"])
async def test_accept_command_round_trips_an_unedited_proposal_byte_for_byte(
        client, ui, target, contents):
    async with trio.open_nursery() as nursery:
        diff = await open_diff(nursery, client, ui, target, contents)
        await ui.request("nvim_command", "ClaudeNvimDiffAccept")
        assert await diff.outcome() == ["FILE_SAVED", contents]


async def test_a_refused_second_server_leaves_a_pending_diff_alone(client, ui, target,
                                                                   nvim_address, tmp_path):
    async with trio.open_nursery() as nursery:
        diff = await open_diff(nursery, client, ui, target, "one\n2\nthree\n")
        with pytest.raises(BaseExceptionGroup) as refusal:
            async with running_app(nvim_address, lock_directory=tmp_path / "ide2"):
                pass
        assert refusal.group_contains(AlreadyServed, depth=None)
        assert await ui.exec_lua("return #vim.api.nvim_list_tabpages()") == 2
        assert not diff.done.is_set()
        await ui.request("nvim_command", "ClaudeNvimDiffAccept")
        assert await diff.outcome() == ["FILE_SAVED", "one\n2\nthree\n"]


@pytest.mark.parametrize("close", [
    ":q<CR>", ":close<CR>", ":tabclose<CR>", ":bd<CR>", ":bwipeout<CR>", ":ClaudeNvimDiffDeny<CR>",
])
async def test_closing_the_proposal_rejects(client, ui, target, close):
    async with trio.open_nursery() as nursery:
        diff = await open_diff(nursery, client, ui, target, "new\n")
        await ui.request("nvim_input", close)
        assert await diff.outcome() == ["DIFF_REJECTED", TAB]
    await nothing_left(ui)
    assert target.read_text() == "one\ntwo\nthree\n"


@pytest.mark.parametrize("tool", ["close_tab", "closeAllDiffTabs"])
async def test_the_cli_closing_a_pending_diff_rejects_it(client, ui, target, tool):
    async with trio.open_nursery() as nursery:
        diff = await open_diff(nursery, client, ui, target, "new\n")
        args = {"tab_name": TAB} if tool == "close_tab" else {}
        answer = (await client.call_tool(tool, args))["content"][0]["text"]
        assert answer == ("TAB_CLOSED" if tool == "close_tab" else "CLOSED_1_DIFF_TABS")
        assert await diff.outcome() == ["DIFF_REJECTED", TAB]
    await nothing_left(ui)


async def test_new_file_diff_shows_an_empty_side_and_writes_nothing(client, ui, tmp_path):
    path = tmp_path / "new.py"
    async with trio.open_nursery() as nursery:
        diff = await open_diff(nursery, client, ui, path, "print('hi')\n")
        await ui.request("nvim_input", ":w<CR>")
        assert await diff.outcome() == ["FILE_SAVED", "print('hi')\n"]
    assert not path.exists()
    await client.call_tool("close_tab", {"tab_name": TAB})
    await nothing_left(ui)


async def test_a_reused_tab_name_rejects_the_older_diff(client, ui, target):
    async with trio.open_nursery() as nursery:
        first = await open_diff(nursery, client, ui, target, "first\n")
        second = await open_diff(nursery, client, ui, target, "second\n")
        assert await first.outcome() == ["DIFF_REJECTED", TAB]
        await ui.request("nvim_command", "ClaudeNvimDiffAccept")
        assert await second.outcome() == ["FILE_SAVED", "second\n"]


WINBAR = "return vim.api.nvim_eval_statusline(vim.wo.winbar, {use_winbar = true}).str"
MINUS = "\N{MINUS SIGN}"


@pytest.mark.parametrize("verdict", ["accept", "reject"])
async def test_a_buffer_with_unsaved_changes_gets_the_diff_against_them(client, ui, target,
                                                                       verdict):
    await ui.request("nvim_command", f"edit {target}")
    await ui.request("nvim_input", "ggdd")
    await eventually(ui, "return vim.bo.modified")
    async with trio.open_nursery() as nursery:
        # claude's screen says "Opened changes in Neovim": they are, against what the user sees.
        diff = await open_diff(nursery, client, ui, target, "two\n3\n")
        # A 60-column window: the keys, the file and what is left to decide; the buffer's
        # name says "a.py (Claude's proposal)".
        assert (await ui.exec_lua(WINBAR)).rstrip() == (
            f":w accepts · :q rejects · unsaved a.py · +1 {MINUS}1 · 1 of 1 hunk")
        shown = await ui.exec_lua("""return vim.tbl_map(function(w)
            return vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false)
          end, vim.api.nvim_tabpage_list_wins(0))""")
        assert shown == [["two", "three"], ["two", "3"]]
        await ui.request("nvim_input", ":w<CR>" if verdict == "accept" else ":q<CR>")
        outcome = await diff.outcome()
    if verdict == "reject":
        assert outcome == ["DIFF_REJECTED", TAB]
        await nothing_left(ui)
        assert await ui.exec_lua("return {vim.bo.modified, "
                                 "vim.api.nvim_buf_get_lines(0, 0, -1, false)}") == [
            True, ["two", "three"]]  # the unsaved changes, as they were
        return
    assert outcome == ["FILE_SAVED", "two\n3\n"]  # what the proposal holds
    target.write_text("two\n3\n")  # as the CLI does
    await client.call_tool("close_tab", {"tab_name": TAB})
    await nothing_left(ui)
    # The buffer follows the file: the unsaved changes made way for what was accepted.
    assert await eventually(ui, "local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)\n"
                                "return not vim.bo.modified and lines[2] == '3' and lines") == [
        "two", "3"]


async def test_a_disconnecting_client_leaves_nothing_behind(app, ui, target):
    async with mcp_client(app.port, app.token) as client, trio.open_nursery() as nursery:
        nursery.start_soon(client.call_tool, "openDiff", diff_args(target, "x\n"))
        await eventually(ui, "return #vim.api.nvim_list_tabpages() == 2")
        nursery.cancel_scope.cancel()
    await nothing_left(ui)


async def test_accepted_diffs_of_a_disconnected_client_are_closed(app, ui, target):
    async with mcp_client(app.port, app.token) as client, trio.open_nursery() as nursery:
        diff = await open_diff(nursery, client, ui, target, "x\n")
        await ui.request("nvim_command", "ClaudeNvimDiffAccept")
        assert (await diff.outcome())[0] == "FILE_SAVED"
    await nothing_left(ui)


async def test_close_all_leaves_the_users_own_diff_windows_and_other_clients_alone(
        app, client, ui, target, tmp_path):
    other = tmp_path / "b.py"
    other.write_text("b\n")
    await ui.request("nvim_command", f"edit {target} | diffthis | vsplit {other} | diffthis")
    async with mcp_client(app.port, app.token) as second, trio.open_nursery() as nursery:
        theirs = await open_diff(nursery, second, ui, target, "theirs\n", tab="theirs")
        await ui.request("nvim_command", "tabfirst")
        assert (await client.call_tool("closeAllDiffTabs"))["content"][0]["text"] == \
            "CLOSED_0_DIFF_TABS"
        assert not theirs.done.is_set()
        assert await ui.exec_lua(
            "return vim.tbl_map(function(w) return vim.wo[w].diff end,"
            " vim.api.nvim_tabpage_list_wins(vim.api.nvim_list_tabpages()[1]))") == [True, True]
        await client.call_tool("close_tab", {"tab_name": "unknown"})
        assert not theirs.done.is_set()
        await second.call_tool("closeAllDiffTabs")
        assert await theirs.outcome() == ["DIFF_REJECTED", "theirs"]


async def test_close_tab_after_accept_reloads_the_unmodified_buffer(client, ui, target):
    await ui.request("nvim_command", f"edit {target}")
    await ui.request("nvim_win_set_cursor", 0, [2, 1])
    async with trio.open_nursery() as nursery:
        diff = await open_diff(nursery, client, ui, target, "one\nTWO\nthree\n")
        await ui.request("nvim_command", "ClaudeNvimDiffAccept")
        _, text = await diff.outcome()
    target.write_text(text)  # what the CLI does after FILE_SAVED
    async with trio.open_nursery() as nursery:  # the CLI sends close_tab twice, concurrently
        for _ in range(2):
            nursery.start_soon(client.call_tool, "close_tab", {"tab_name": TAB})
    await nothing_left(ui)
    await eventually(ui, "return vim.api.nvim_buf_get_lines(0, 1, 2, false)[1] == 'TWO'")
    assert await ui.request("nvim_win_get_cursor", 0) == [2, 1]
    assert await ui.exec_lua("return vim.bo.modified") is False


async def test_other_calls_stay_fast_while_a_diff_waits(client, ui, target):
    async with trio.open_nursery() as nursery:
        diff = await open_diff(nursery, client, ui, target, "x\n")
        with trio.fail_after(WAIT):
            for _ in range(20):
                await client.call_json("getOpenEditors")
        assert not diff.done.is_set()
        await ui.request("nvim_command", "ClaudeNvimDiffDeny")
        assert (await diff.outcome())[0] == "DIFF_REJECTED"


async def test_the_diff_commands_warn_where_there_is_no_diff(client, ui):
    await ui.request("nvim_command", "ClaudeNvimDiffAccept")
    messages = await ui.exec_lua("return vim.api.nvim_exec2('messages', {output = true}).output")
    assert "no pending diff" in messages



async def test_an_existing_file_named_by_uri_or_home_path_is_an_edit_not_a_new_file(
        client, ui, target):
    from urllib.parse import quote
    uri = "file://" + quote(str(target))
    async with trio.open_nursery() as nursery:
        diff = await open_diff(nursery, client, ui, uri, "one\n")
        left = await ui.exec_lua("return vim.api.nvim_buf_get_name("
                                 "vim.api.nvim_win_get_buf(vim.fn.win_getid(1)))")
        assert left == str(target)
        await ui.request("nvim_command", "ClaudeNvimDiffDeny")
        assert (await diff.outcome())[0] == "DIFF_REJECTED"


async def test_a_fifo_is_refused_and_neovim_stays_responsive(client, ui, fifo):
    with trio.fail_after(WAIT):
        result = await client.call_tool("openDiff", diff_args(fifo, "x\n"))
    assert result["isError"] is True
    assert result["content"][0]["text"] == \
        f"Cannot open diff: {fifo} is not a regular file (a FIFO)"
    assert await ui.exec_lua("return vim.fn.bufnr(...)", str(fifo), timeout=WAIT) == -1
    await nothing_left(ui)


@pytest.mark.usefixtures("one_mb_file_limit")
async def test_a_file_over_the_size_limit_is_refused(client, ui, big_file):
    with trio.fail_after(WAIT):  # not refused, it would wait for the user's verdict
        result = await client.call_tool("openDiff", diff_args(big_file, "x\n"))
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        f"Cannot open diff: {big_file} is 1.5 MB, over claude-nvim's limit of 1 MB for opening "
        "files (CLAUDE_NVIM_MAX_FILE_MB)")
    assert await ui.exec_lua("return vim.fn.bufnr(...)", str(big_file)) == -1
    await nothing_left(ui)


async def test_a_bad_modeline_is_neovims_message_not_a_failed_diff(client, ui, tmp_path):
    await ui.request("nvim_command", "set modeline")  # the default, but not under --clean
    path = tmp_path / "a.c"
    path.write_text("int x;\n/* vim: set nosuchoption: */\n")
    async with trio.open_nursery() as nursery:
        diff = await open_diff(nursery, client, ui, path, "int y;\n")
        assert await ui.exec_lua("return vim.api.nvim_buf_get_lines("
                                 "vim.api.nvim_win_get_buf(vim.fn.win_getid(1)), 0, -1, false)") \
            == ["int x;", "/* vim: set nosuchoption: */"]
        await ui.request("nvim_command", "ClaudeNvimDiffAccept")
        assert await diff.outcome() == ["FILE_SAVED", "int y;\n"]
    messages = await ui.exec_lua("return vim.api.nvim_exec2('messages', {output = true}).output")
    assert "E518: Unknown option: nosuchoption" in messages


def test_a_settled_diff_keeps_no_copy_of_the_proposal():
    # An accepted diff waits for close_tab; the megabytes it held would be freed then, and
    # close_tab's answer would wait for that.
    registry = DiffRegistry()
    accepted, rejected = registry.open("a", 1, "new\n"), registry.open("b", 1, "other\n")
    registry.settle(accepted.id, "accepted")
    registry.settle(rejected.id, "rejected")
    assert accepted.text == "new\n"
    assert accepted.contents == rejected.contents == ""


WINDOWS = """return vim.tbl_map(function(w) local b = vim.api.nvim_win_get_buf(w)
  return { vim.api.nvim_buf_get_name(b), vim.wo[w].diff } end, vim.api.nvim_tabpage_list_wins(0))"""


@pytest.mark.parametrize("first_closed", ["first", "second"])
async def test_two_diffs_in_the_current_tab_close_in_either_order(client, ui, tmp_path,
                                                                 first_closed):
    # opts.diff.open_in = 'current': the second diff takes over the first one's file window.
    a, b, other = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "other.txt"
    for path in (a, b, other):
        path.write_text(f"{path.stem}\n")
    await ui.exec_lua("vim.g.claude_nvim_opts = {diff = {open_in = 'current'}}")
    await ui.request("nvim_command", f"edit {other} | vsplit | enew")  # a terminal's place
    async with trio.open_nursery() as nursery:
        diffs = {"first": await open_diff(nursery, client, ui, a, "A\n", tab="first"),
                 "second": await open_diff(nursery, client, ui, b, "B\n", tab="second")}
        files = {"first": a, "second": b}
        remaining = "second" if first_closed == "first" else "first"
        await client.call_tool("close_tab", {"tab_name": first_closed})
        assert (await diffs[first_closed].outcome())[0] == "DIFF_REJECTED"
        windows = await ui.exec_lua(WINDOWS)
        # The other diff is whole: its file shown in diff mode; the closed one's is gone.
        assert [str(files[remaining]), True] in windows
        assert [str(files[first_closed]), True] not in windows
        await client.call_tool("close_tab", {"tab_name": remaining})
        assert (await diffs[remaining].outcome())[0] == "DIFF_REJECTED"
    # What was in the window before the first diff is back.
    assert await ui.exec_lua(WINDOWS) == [["", False], [str(other), False]]


TEN = "".join(f"{i}\n" for i in range(1, 11))
PROPOSED = TEN.replace("2\n", "two\n").replace("5\n", "five\nfive and a half\n").replace(
    "9\n", "")  # three hunks: a change, a change and an addition, a deletion
LAYOUT = """
local wins = vim.api.nvim_tabpage_list_wins(0)
return vim.tbl_map(function(w)
  local b = vim.api.nvim_win_get_buf(w)
  return { proposal = vim.b[b].claude_nvim_proposal ~= nil, diff = vim.wo[w].diff,
           row = vim.api.nvim_win_get_position(w)[1], col = vim.api.nvim_win_get_position(w)[2] }
end, wins)
"""


@pytest.mark.parametrize("layout", ["vertical", "horizontal", "inline"])
async def test_hunk_by_hunk_the_proposal_becomes_the_text_claude_writes(client, ui, tmp_path,
                                                                        layout):
    await ui.exec_lua(f"vim.g.claude_nvim_opts = {{ diff = {{ layout = '{layout}' }} }}")
    path = tmp_path / "ten.txt"
    path.write_text(TEN)
    async with trio.open_nursery() as nursery:
        diff = await open_diff(nursery, client, ui, path, PROPOSED)
        windows = await ui.exec_lua(LAYOUT)
        if layout == "inline":  # the proposal alone
            assert windows == [{"proposal": True, "diff": False, "row": 1, "col": 0}]
        else:
            target, proposal = windows
            assert target["diff"] and proposal["diff"] and proposal["proposal"]
            assert (proposal["row"] > target["row"]) == (layout == "horizontal")
            assert (proposal["col"] > target["col"]) == (layout == "vertical")
        assert (await ui.exec_lua(WINBAR)).rstrip().endswith(f"+3 {MINUS}3 · 3 of 3 hunks")
        # The cursor in the proposal: the first hunk rejected (the old line back), the second
        # accepted, the third left as it is.
        await ui.exec_lua("vim.api.nvim_win_set_cursor(0, {2, 0})")
        await ui.request("nvim_command", "ClaudeNvimHunkReject")
        assert (await ui.exec_lua(WINBAR)).rstrip().endswith(f"+2 {MINUS}2 · 2 of 3 hunks")
        await ui.request("nvim_command", "6ClaudeNvimHunkAccept")
        assert (await ui.exec_lua(WINBAR)).rstrip().endswith(f"+0 {MINUS}1 · 1 of 3 hunks")
        await ui.request("nvim_command", "write")
        assert await diff.outcome() == ["FILE_SAVED", PROPOSED.replace("two\n", "2\n")]


async def test_inline_the_old_lines_show_in_the_proposal_and_c_moves_between_hunks(
        client, ui, tmp_path):
    await ui.exec_lua("vim.g.claude_nvim_opts = { diff = { layout = 'inline' } }")
    path = tmp_path / "ten.txt"
    path.write_text(TEN)
    async with trio.open_nursery() as nursery:
        diff = await open_diff(nursery, client, ui, path, PROPOSED)
        marks = await ui.exec_lua("""
            local ns = vim.api.nvim_get_namespaces().claude_nvim_inline
            return vim.tbl_map(function(m)
              local virt = m[4].virt_lines
              return { m[2] + 1, m[4].line_hl_group or vim.NIL, virt and vim.tbl_map(
                function(l) return l[1][1] end, virt) or vim.NIL } end,
              vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true }))""")
        # Claude's lines highlighted; the old ones above them, or below the line before.
        assert sorted(marks, key=str) == sorted([
            [2, None, ["2"]], [2, "DiffAdd", None], [5, None, ["5"]], [5, "DiffAdd", None],
            [6, "DiffAdd", None], [9, None, ["9"]]], key=str)
        rows = []
        for keys in ("gg]c", "]c", "]c", "]c", "[c"):
            await ui.request("nvim_input", keys)
            rows.append(await ui.exec_lua("return vim.api.nvim_win_get_cursor(0)[1]"))
        assert rows == [2, 5, 10, 10, 5]  # a deletion: the line after it, as in diff mode
        await ui.request("nvim_command", "ClaudeNvimDiffDeny")
        assert (await diff.outcome())[0] == "DIFF_REJECTED"


async def test_a_hunk_is_rejected_from_the_files_side_too(client, ui, tmp_path):
    path = tmp_path / "ten.txt"
    path.write_text(TEN)
    async with trio.open_nursery() as nursery:
        diff = await open_diff(nursery, client, ui, path, PROPOSED)
        await ui.request("nvim_command", "wincmd h")  # the file's side: old line numbers
        await ui.request("nvim_command", "9ClaudeNvimHunkReject")  # the deleted line 9
        await ui.request("nvim_command", "ClaudeNvimDiffAccept")
        assert await diff.outcome() == ["FILE_SAVED", PROPOSED.replace("8\n", "8\n9\n")]
