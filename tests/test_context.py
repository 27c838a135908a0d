"""Context from anywhere: :ClaudeNvimAdd with no path in a file tree (its nodes), in a file (the
file), `quickfix` and `diagnostics` (their locations), and the pickers' actions
(claude_nvim.pickers). netrw is Neovim's own; the other trees and the pickers cannot be
installed here (they are on no package registry this machine reaches: luarocks.org is out of
reach, npm and PyPI have none of them), so each is imitated by its documented API, as
described beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import messages
from plugin_kit import ROOT


async def mentions(client, count: int, after: int = 0) -> list[dict]:
    """The next ``count`` @-mentions the client gets (and then no other)."""
    found: list[dict] = []
    seen = after
    while len(found) < count:
        note = await client.next_notification("at_mentioned", after=seen)
        seen = next(i for i, n in enumerate(client.notifications) if n is note) + 1
        found.append(note["params"])
    assert await client.no_notification("at_mentioned", after=seen)
    return found


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """a.py, b.txt and sub/c.py, in the test Neovim's cwd."""
    (tmp_path / "a.py").write_text("".join(f"a{i}\n" for i in range(1, 80)))
    (tmp_path / "b.txt").write_text("b\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.py").write_text("c\n")
    return tmp_path


@pytest.fixture
async def listening(ui, client, project):
    """The user's Neovim (a UI attached), once the client listens for notifications."""
    await ui.request("nvim_command", f"edit {project / 'b.txt'}")
    await client.next_notification("selection_changed")
    return ui


async def test_in_netrw_the_entry_under_the_cursor_or_in_the_range(listening, client, project):
    nvim = listening
    await nvim.request("nvim_command", f"edit {project}")
    assert await nvim.exec_lua("return vim.bo.filetype") == "netrw"
    lines = await nvim.exec_lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
    await nvim.request("nvim_win_set_cursor", 0, [lines.index("a.py") + 1, 0])
    await nvim.request("nvim_command", "ClaudeNvimAdd")
    assert await mentions(client, 1) == [{"filePath": str(project / "a.py")}]
    seen = len(client.notifications)
    first = lines.index("sub/") + 1  # directories first, then a.py
    await nvim.request("nvim_command", f"{first},{first + 1}ClaudeNvimAdd")
    assert await mentions(client, 2, seen) == [{"filePath": str(project / "sub")},
                                               {"filePath": str(project / "a.py")}]
    # The banner is no entry: nothing happens there but a message.
    seen = len(client.notifications)
    await nvim.request("nvim_command", "1ClaudeNvimAdd")
    assert "no file or directory here" in await messages(nvim)
    assert await client.no_notification("at_mentioned", after=seen)


async def test_in_netrws_tree_listing_the_entry_in_its_branch(listening, client, project):
    nvim = listening

    async def line_of(name: str) -> int:  # (the depth marks differ: "| ", "│ ")
        lines = await nvim.exec_lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
        return next(i for i, line in enumerate(lines, 1) if line.endswith(" " + name))

    await nvim.request("nvim_command", f"let g:netrw_liststyle = 3 | edit {project}")
    await nvim.request("nvim_win_set_cursor", 0, [await line_of("sub/"), 0])
    await nvim.request("nvim_input", "<CR>")  # open the branch
    await nvim.request("nvim_win_set_cursor", 0, [await line_of("c.py"), 0])
    await nvim.request("nvim_command", "ClaudeNvimAdd")
    assert await mentions(client, 1) == [{"filePath": str(project / "sub" / "c.py")}]
    seen = len(client.notifications)
    first = await line_of("sub/")
    await nvim.request("nvim_command", f"{first},{first + 1}ClaudeNvimAdd")
    assert await mentions(client, 2, seen) == [{"filePath": str(project / "sub")},
                                               {"filePath": str(project / "sub" / "c.py")}]

# Each tree by its documented API: the buffer lists "a.py", "sub/", "b.txt" (lines 1-3) and the
# tree's API maps each line to its node. PATHS (line -> absolute path, directories with a
# trailing slash) is set first.
TREES = {
    # neo-tree: require('neo-tree.sources.manager').get_state_for_window().tree:get_node(line)
    # (a nui.nvim tree) -> { type = 'file' | 'directory' | 'message', path }.
    "neo-tree": """
        package.loaded['neo-tree.sources.manager'] = { get_state_for_window = function()
          return { tree = { get_node = function(_, line)
            local path = PATHS[line or vim.api.nvim_win_get_cursor(0)[1]]
            return path and { type = path:sub(-1) == '/' and 'directory' or 'file',
                              path = (path:gsub('/$', '')) }
          end } }
        end }""",
    # nvim-tree: require('nvim-tree.api').tree.get_node_under_cursor() -> { name, absolute_path }.
    "NvimTree": """
        package.loaded['nvim-tree.api'] = { tree = { get_node_under_cursor = function()
          local path = PATHS[vim.api.nvim_win_get_cursor(0)[1]]
          return path and { name = vim.fs.basename((path:gsub('/$', ''))),
                            absolute_path = (path:gsub('/$', '')) }
        end } }""",
    # oil: require('oil').get_current_dir(buf) (with a trailing slash) and
    # .get_entry_on_line(buf, line) -> { name, type, id }.
    "oil": """
        package.loaded['oil'] = {
          get_current_dir = function() return DIR .. '/' end,
          get_entry_on_line = function(_, line)
            local path = PATHS[line]
            return path and { name = vim.fs.basename((path:gsub('/$', ''))), id = line,
                              type = path:sub(-1) == '/' and 'directory' or 'file' }
          end }""",
    # mini.files: MiniFiles.get_fs_entry(buf, line) -> { fs_type, name, path }.
    "minifiles": """
        _G.MiniFiles = { get_fs_entry = function(_, line)
          local path = PATHS[line or vim.api.nvim_win_get_cursor(0)[1]]
          return path and { path = (path:gsub('/$', '')), name = vim.fs.basename(path),
                            fs_type = path:sub(-1) == '/' and 'directory' or 'file' }
        end }""",
    # snacks' explorer: a picker (Snacks.picker.get()) whose list window shows its items; the
    # item on a row: picker.list:get(picker.list:row2idx(row)); picker:selected({fallback =
    # true}): the selected items, else the current; Snacks.picker.util.path(item).
    "snacks_picker_list": """
        local buf = vim.api.nvim_get_current_buf()
        local items = {}
        for line, path in ipairs(PATHS) do items[line] = { file = (path:gsub('/$', '')) } end
        local picker = { list = { win = { buf = buf },
          get = function(_, idx) return items[idx] end,
          row2idx = function(_, row) return row end } }
        function picker:selected() return { items[vim.api.nvim_win_get_cursor(0)[1]] } end
        _G.Snacks = { picker = { get = function() return { picker } end,
                                 util = { path = function(item) return item.file end } } }""",
}


@pytest.mark.parametrize("tree", TREES)
async def test_in_a_file_tree_its_nodes(listening, client, project, tree):
    nvim = listening
    await nvim.exec_lua(f"""
        DIR = select(1, ...)
        PATHS = {{ DIR .. '/a.py', DIR .. '/sub/', DIR .. '/b.txt' }}
        vim.cmd('enew')
        vim.api.nvim_buf_set_lines(0, 0, -1, false, {{ 'a.py', 'sub/', 'b.txt' }})
        vim.bo.buftype, vim.bo.modified = 'nofile', false
        {TREES[tree]}
        vim.bo.filetype = select(2, ...)""", str(project), tree)
    await nvim.request("nvim_win_set_cursor", 0, [1, 0])
    await nvim.request("nvim_command", "ClaudeNvimAdd")
    assert await mentions(client, 1) == [{"filePath": str(project / "a.py")}]
    seen = len(client.notifications)
    await nvim.request("nvim_input", "jVj:ClaudeNvimAdd<CR>")  # Visual: lines 2-3
    assert await mentions(client, 2, seen) == [{"filePath": str(project / "sub")},
                                               {"filePath": str(project / "b.txt")}]
    assert "cannot read" not in await messages(nvim)


async def test_in_a_file_the_file_and_elsewhere_says_what_to_do(listening, client, project):
    nvim = listening
    await nvim.request("nvim_command", "ClaudeNvimAdd")  # in b.txt
    assert await mentions(client, 1) == [{"filePath": str(project / "b.txt")}]
    seen = len(client.notifications)
    await nvim.request("nvim_command", "enew")
    await nvim.request("nvim_command", "ClaudeNvimAdd")
    assert "nothing to add here: give a path, or use it in a file tree" in await messages(nvim)
    assert await client.no_notification("at_mentioned", after=seen)


async def test_the_quickfix_list_each_location_once_and_capped(listening, client, project):
    nvim = listening
    a, b = str(project / "a.py"), str(project / "b.txt")
    await nvim.exec_lua("""
        local a, b = ...
        vim.fn.setqflist({
          { filename = a, lnum = 3, text = 'one' },
          { filename = a, lnum = 3, col = 7, text = 'the same line' },
          { filename = a, lnum = 5, end_lnum = 7, text = 'a range' },
          { text = 'no file: only a message' },
          { filename = b, lnum = 0, text = 'the whole file' },
        })""", a, b)
    await nvim.request("nvim_command", "ClaudeNvimAdd quickfix")
    assert await mentions(client, 3) == [
        {"filePath": a, "lineStart": 2, "lineEnd": 2},
        {"filePath": a, "lineStart": 4, "lineEnd": 6},
        {"filePath": b}]
    # A long list: the first 50, and the user is told.
    seen = len(client.notifications)
    await nvim.exec_lua("""
        local items = {}
        for line = 1, 70 do items[line] = { filename = select(1, ...), lnum = line } end
        vim.fn.setqflist(items)""", a)
    await nvim.request("nvim_command", "ClaudeNvimAdd quickfix")
    sent = await mentions(client, 50, seen)
    assert [m["lineStart"] for m in sent] == list(range(50))
    assert "70 quickfix entries: the first 50 sent" in await messages(nvim)
    await nvim.exec_lua("vim.fn.setqflist({})")
    await nvim.request("nvim_command", "ClaudeNvimAdd quickfix")
    assert "the quickfix list has no file locations" in await messages(nvim)


async def test_the_diagnostics_the_most_severe_first(listening, client, project):
    nvim = listening
    a, b = str(project / "a.py"), str(project / "b.txt")
    await nvim.exec_lua("""
        local a, b = ...
        local ns = vim.api.nvim_create_namespace('test')
        local sev = vim.diagnostic.severity
        vim.diagnostic.set(ns, vim.fn.bufadd(a), {
          { lnum = 9, col = 0, severity = sev.WARN, message = 'w' },
          { lnum = 1, end_lnum = 2, col = 0, severity = sev.ERROR, message = 'e' },
          { lnum = 1, end_lnum = 2, col = 4, severity = sev.ERROR, message = 'e again' },
        })
        vim.diagnostic.set(ns, vim.fn.bufadd(b), {
          { lnum = 0, col = 0, severity = sev.HINT, message = 'h' },
        })""", a, b)
    await nvim.request("nvim_command", "ClaudeNvimAdd diagnostics")
    assert await mentions(client, 3) == [
        {"filePath": a, "lineStart": 1, "lineEnd": 2},
        {"filePath": a, "lineStart": 9, "lineEnd": 9},
        {"filePath": b, "lineStart": 0, "lineEnd": 0}]
    assert "quickfix" in await nvim.exec_lua(
        "return vim.fn.getcompletion('ClaudeNvimAdd q', 'cmdline')")


# The pickers' actions (claude_nvim.pickers), each called as its picker calls an action, with
# the picker's documented objects imitated.
PICKERS = {
    # telescope: an action gets the prompt's buffer; telescope.actions.state's
    # get_current_picker(buf):get_multi_selection() and get_selected_entry() give entries
    # ({ path | filename, cwd, lnum, value }); telescope.actions.close(buf) closes it.
    "telescope": """
        package.loaded['telescope.actions.state'] = {
          get_current_picker = function() return { get_multi_selection = function()
            return { { value = 'a.py:12', filename = 'a.py', cwd = DIR, lnum = 12 },
                     { value = 'sub/c.py', path = DIR .. '/sub/c.py' } } end } end,
          get_selected_entry = function() error('not with a multi-selection') end }
        package.loaded['telescope.actions'] = { close = function(buf) CLOSED = buf end }
        require('claude_nvim.pickers').telescope(42)""",
    # fzf-lua: an action gets the selected lines and the picker's opts;
    # require('fzf-lua').path.entry_to_file(line, opts) -> { path, line (0: none) }.
    "fzf-lua": """
        package.loaded['fzf-lua'] = { path = { entry_to_file = function(entry, opts)
          local file, line = entry:match('^([^:]+):?(%d*)')
          CLOSED = 42
          return { path = opts.cwd .. '/' .. file, line = tonumber(line) or 0, col = 0 }
        end } }
        require('claude_nvim.pickers').fzf_lua({ 'a.py:12:3:a12', 'sub/c.py' }, { cwd = DIR })""",
    # snacks: an action gets the picker; picker:selected({ fallback = true }) gives items
    # ({ file, cwd, pos = { line, col } }), picker:close(), Snacks.picker.util.path(item).
    "snacks": """
        _G.Snacks = { picker = { util = { path = function(item)
          return item.cwd and (item.cwd .. '/' .. item.file) or item.file end } } }
        local picker = { selected = function(_, opts)
          assert(opts.fallback)
          return { { file = 'a.py', cwd = DIR, pos = { 12, 3 } }, { file = DIR .. '/sub/c.py' } }
        end, close = function() CLOSED = 42 end }
        require('claude_nvim.pickers').snacks(picker)""",
}


@pytest.mark.parametrize("picker", PICKERS)
async def test_a_pickers_action_adds_the_picked_files_and_lines(listening, client, project,
                                                                picker):
    nvim = listening
    await nvim.request("nvim_command", f"set runtimepath^={ROOT}")
    await nvim.exec_lua(f"DIR = select(1, ...)\n{PICKERS[picker]}", str(project))
    assert await nvim.exec_lua("return CLOSED") == 42
    assert await mentions(client, 2) == [
        {"filePath": str(project / "a.py"), "lineStart": 11, "lineEnd": 11},
        {"filePath": str(project / "sub" / "c.py")}]
