"""Prompts from Neovim (:ClaudeNvimPrompt, require('claude_nvim').send): what arrives in the
Claude's terminal, with the plugin's stand-in `claude` (plugin_kit.py) recording the bracketed
pastes it is typed."""

from __future__ import annotations

import json

import trio

from helpers import eventually
from plugin_kit import claude_started

PASTE = "\x1b[200~{}\x1b[201~\n"  # as the stand-in reads it: the CR that submits is its newline

SOURCE = "local M = {}\n\nfunction M.add(a, b)\n  return a + b\nend\n\nreturn M\n"


async def pastes(tmp_path, count: int = 1) -> list[str]:
    path = tmp_path / "pastes.jsonl"
    with trio.fail_after(20):
        while len(lines := path.read_text().splitlines() if path.exists() else []) < count:
            await trio.sleep(0.05)
    return [json.loads(line) for line in lines]


async def claude_listening(user) -> None:
    await eventually(user, "local i = require('claude_nvim.terminal').info(); return i and "
                           "require('claude_nvim.claudes').server_entry(i.buf) ~= nil",
                     timeout=20)


async def test_a_prompt_with_every_variable_arrives_as_one_bracketed_paste(user, claude_dir):
    await user.request("nvim_command", "ClaudeNvim")
    await claude_started(claude_dir)
    await claude_listening(user)
    await user.request("nvim_input", "<C-\\><C-n>")
    await user.request("nvim_command", "ClaudeNvimFocus")  # back to the file window
    source, other = claude_dir / "a.lua", claude_dir / "b.lua"
    source.write_text(SOURCE)
    other.write_text("x = 1\n")
    await user.request("nvim_command", f"edit {other}")
    await user.request("nvim_command", f"edit {source}")
    await user.request("nvim_input", "3GVj<Esc>")  # the last Visual selection: lines 3-4
    await eventually(user, "return vim.fn.mode() == 'n' and vim.fn.line(\"'>\") == 4")
    await user.exec_lua("""
        local ns = vim.api.nvim_create_namespace('test')
        vim.diagnostic.set(ns, vim.fn.bufnr(...), {{ lnum = 3, col = 9, message = 'undefined a',
          severity = vim.diagnostic.severity.ERROR, source = 'test' }})
        vim.diagnostic.set(ns, vim.fn.bufnr(select(2, ...)), {{ lnum = 0, col = 0,
          message = 'unused', severity = vim.diagnostic.severity.WARN }})
        vim.fn.setqflist({{ filename = select(1, ...), lnum = 5, col = 1, text = 'ends here' }})
        vim.api.nvim_win_set_cursor(0, { 4, 9 })
    """, str(source), str(other))
    await user.request("nvim_command", "ClaudeNvimPrompt")
    prompt = ["Look at {file}, {line} and {this}.", "", "{selection}", "{function}", "{class}",
              "{diagnostics}", "{diagnostics_all}", "{quickfix}", "{unknown} stays.",
              "Not Ex: <Esc>:qa!<CR> \x1b[201~\x03"]
    await user.exec_lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, ...)", prompt)
    await user.request("nvim_command", "write")
    (paste,) = await pastes(claude_dir)
    expected = "\n".join([
        "Look at a.lua, a.lua:4:   return a + b and `a` (a.lua:4:10).", "",
        "a.lua:3-4:", "```lua", "function M.add(a, b)", "  return a + b", "```",
        "a.lua:3-5:", "```lua", "function M.add(a, b)", "  return a + b", "end", "```",
        "({class} left out: no class around line 4)",
        "- a.lua:4:10: ERROR undefined a (test)",
        "- a.lua:4:10: ERROR undefined a (test)", "- b.lua:1:1: WARN unused",
        "- a.lua:5:1: ends here",
        "{unknown} stays.",
        "Not Ex: <Esc>:qa!<CR> [201~"])  # the control characters are taken out
    assert paste == PASTE.format(expected)
    # The prompt buffer is gone, the user is back in the file; Neovim runs.
    assert await user.exec_lua("return vim.api.nvim_buf_get_name(0)") == str(source)
    assert not await user.exec_lua("return vim.tbl_contains(vim.tbl_map(function(b) return "
                                   "vim.b[b].claude_nvim_prompt or false end, "
                                   "vim.api.nvim_list_bufs()), true)")


async def test_send_starts_a_claude_and_a_named_prompt_completes(user, claude_dir):
    names = await user.exec_lua("return vim.fn.getcompletion('ClaudeNvimPrompt ', 'cmdline')")
    assert names == ["explain", "fix", "review", "tests"]
    await user.exec_lua("require('claude_nvim').send('first line\\nsecond line')")
    (paste,) = await pastes(claude_dir)  # no Claude ran: one started, and got it once listening
    assert paste == PASTE.format("first line\nsecond line")
    await user.request("nvim_input", "<C-\\><C-n>")
    await user.request("nvim_command", "ClaudeNvimFocus")
    await user.request("nvim_command", "ClaudeNvimPrompt review")
    assert (await user.exec_lua("return vim.api.nvim_buf_get_lines(0, 0, 1, false)[1]")
            ).startswith("Review the changes of your last turn")
    await user.request("nvim_command", "quit")  # :q throws it away
    await eventually(user, "return not vim.tbl_contains(vim.tbl_map(function(b) return "
                           "vim.b[b].claude_nvim_prompt or false end, vim.api.nvim_list_bufs()), "
                           "true)")
    await trio.sleep(0.3)
    assert len(await pastes(claude_dir)) == 1


CODE_ACTIONS = """
local row = ...
local params = { textDocument = { uri = vim.uri_from_bufnr(0) }, context = { diagnostics = {} },
  range = { start = { line = row, character = 0 }, ['end'] = { line = row, character = 0 } } }
local answers = vim.lsp.buf_request_sync(0, 'textDocument/codeAction', params, 5000) or {}
local titles = {}
for _, answer in pairs(answers) do
  for _, action in ipairs(answer.result or {}) do titles[#titles + 1] = action.title end
end
return titles
"""


async def test_fix_with_claude_is_a_code_action_on_a_diagnostic_and_sends_it(user, claude_dir):
    await user.request("nvim_command", "ClaudeNvim")
    await claude_listening(user)
    await user.request("nvim_input", "<C-\\><C-n>")
    await user.request("nvim_command", "ClaudeNvimFocus")
    source = claude_dir / "a.lua"
    source.write_text(SOURCE)
    await user.request("nvim_command", f"edit {source}")
    assert await user.exec_lua("return #vim.lsp.get_clients({ bufnr = 0 })") == 0  # lazy
    await user.exec_lua("""
        vim.diagnostic.set(vim.api.nvim_create_namespace('test'), 0, {{ lnum = 3, col = 9,
          message = 'undefined a', severity = vim.diagnostic.severity.ERROR, source = 'test' }})
    """)
    await eventually(user, "return #vim.lsp.get_clients({ bufnr = 0, name = 'claude-nvim' }) "
                           "== 1")
    assert await user.exec_lua(CODE_ACTIONS, 3) == ["Fix with Claude", "Explain with Claude"]
    assert await user.exec_lua(CODE_ACTIONS, 1) == []  # a line without diagnostics
    await user.exec_lua("vim.api.nvim_win_set_cursor(0, { 4, 0 }); vim.lsp.buf.code_action({ "
                        "apply = true, filter = function(a) return a.title == 'Fix with Claude' "
                        "end })")
    (paste,) = await pastes(claude_dir)
    assert paste == PASTE.format("\n".join([
        "Fix the diagnostic in a.lua at line 4:", "",
        "- a.lua:4:10: ERROR undefined a (test)", "",
        "a.lua:1-7:", "```lua", *SOURCE.splitlines(), "```", ""]))
