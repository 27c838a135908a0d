"""Past conversations (:ClaudeNvimResume), on session files the real claude 2.1.332 wrote
(tests/corpus/sessions: made with shared/tools/real_claude_client.sh --prompt ...), and how the
plugin starts claude (opts.claude, the terminal's filetype)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from helpers import eventually
from plugin_kit import ROOT, claude_started, plugin_user

CORPUS = ROOT / "tests" / "corpus" / "sessions"
# Each file keeps the directory claude ran in; the test's project takes its place.
WRITTEN_IN = re.compile(r"/tmp/real_claude_client\.\w+/selftest/ws")


def store(config: Path, project: Path) -> Path:
    """claude's store of ``project``'s conversations: the directory named as claude names it."""
    found = config / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(project))
    found.mkdir(parents=True, exist_ok=True)
    return found


def keep(directory: Path, name: str, text: str, mtime: int) -> None:
    path = directory / name
    path.write_text(text)
    os.utime(path, (mtime, mtime))


def real_session(name: str, project: Path) -> str:
    return WRITTEN_IN.sub(str(project), (CORPUS / name).read_text())


async def test_resume_lists_this_projects_conversations_and_skips_what_it_cannot_read(
        claude_dir):
    project = claude_dir / "app"
    project.mkdir()
    sessions = store(claude_dir / "cfg", project)
    keep(sessions, "a0000000-0000-4000-8000-000000000001.jsonl",
         real_session("explain.jsonl", project), 1_790_000_000)
    keep(sessions, "a0000000-0000-4000-8000-000000000002.jsonl",
         real_session("tests.jsonl", project), 1_790_000_600)
    # Corrupt: not JSON, a line cut short, binary; and one of another directory whose name
    # claude would write the same way (app_x and app-x).
    keep(sessions, "a0000000-0000-4000-8000-000000000003.jsonl",
         "not json\n{\"type\": \"user\", \"message\": {\"content\": \"cut sh", 1_790_000_900)
    keep(sessions, "a0000000-0000-4000-8000-000000000004.jsonl", "\x00\xff" * 50_000,
         1_790_001_000)
    keep(sessions, "a0000000-0000-4000-8000-000000000005.jsonl",
         real_session("explain.jsonl", claude_dir / "elsewhere"), 1_790_001_200)
    (sessions / "a0000000-0000-4000-8000-000000000006.jsonl").mkdir()
    async with plugin_user(project) as user:
        listed = await user.exec_lua(
            "local s = require('claude_nvim.sessions')"
            " return vim.tbl_map(function(x) return {x.id, x.title, s.describe(x)} end, s.list())")
        assert [(id_, title) for id_, title, _ in listed] == [
            ("a0000000-0000-4000-8000-000000000002", "Write tests for the tokenizer"),
            ("a0000000-0000-4000-8000-000000000001", "Explain the parser in main.py")]
        # when it was last written, how long it lasted (from its first and last events)
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d · \d+ s · Explain the parser in main.py",
                            listed[1][2]), listed[1][2]

        # The one picked goes on in a new Claude, connected like any other.
        await user.exec_lua("vim.ui.select = function(items, opts, choose) choose(items[2]) end")
        await user.request("nvim_command", "ClaudeNvimResume")
        started = await claude_started(claude_dir)
        assert started["argv"][-2:] == ["--resume", "a0000000-0000-4000-8000-000000000001"]


async def test_resume_with_no_past_conversation_says_where_it_looked(claude_dir):
    async with plugin_user(claude_dir) as user:
        await user.request("nvim_command", "ClaudeNvimResume")
        messages = await user.exec_lua("return vim.api.nvim_exec2('messages', "
                                       "{output = true}).output")
        assert "no past conversation of " in messages and "projects" in messages
        assert await user.exec_lua("return require('claude_nvim.terminal').info()") is None


async def test_the_claude_terminal_has_a_filetype_and_starts_in_the_chosen_mode(claude_dir):
    async with plugin_user(claude_dir, claude={"permission_mode": "manual",
                                               "args": ["--model", "opus"]}) as user:
        await user.exec_lua("vim.api.nvim_create_autocmd('FileType', {pattern = 'claude_nvim',"
                            " callback = function(ev) vim.g.claude_ft = ev.buf end})")
        await user.request("nvim_command", "ClaudeNvim --verbose")
        started = await claude_started(claude_dir)
        assert started["argv"][-5:] == ["--model", "opus", "--permission-mode", "manual",
                                        "--verbose"]
        buf = await eventually(user, "return vim.g.claude_ft")
        assert await user.exec_lua("return vim.bo[...].filetype", buf) == "claude_nvim"
        assert await user.exec_lua("return require('claude_nvim.terminal').info().buf") == buf
        health = await user.exec_lua("vim.cmd('checkhealth claude_nvim')"
                                     " return table.concat(vim.api.nvim_buf_get_lines("
                                     "0, 0, -1, false), '\\n')")
        assert "Claude starts in manual mode (opts.claude.permission_mode): each edit opens as "\
            "a diff" in health


async def test_arguments_that_choose_a_mode_win_over_the_option(claude_dir):
    async with plugin_user(claude_dir, claude={"permission_mode": "manual"}) as user:
        await user.request("nvim_command", "ClaudeNvim --permission-mode plan")
        started = await claude_started(claude_dir)
        assert started["argv"].count("--permission-mode") == 1
        assert started["argv"][-2:] == ["--permission-mode", "plan"]
