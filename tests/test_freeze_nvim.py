"""Nothing Claude writes or names freezes Neovim (issue 27, Neovim's side): claude's $VISUAL on a
FIFO, /dev/zero or a file over the limit is refused before Neovim opens it; a title of any
length names a Claude from its first bytes; the end of a turn of any size looks each buffer's
file up once, a slice a call; a flood of states makes a notice a second, and a Claude that
waits is told of when it goes out of sight. A real headless Neovim each; what these cost is
measured in benchmarks/freeze_nvim.py, not here."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest
import trio

from helpers import eventually
from plugin_kit import ROOT

# A hang guard, not a timing target: before the fixes these calls took minutes to forever.
HANG = 60


def release(fifo: Path) -> None:
    """Let go a process stuck opening ``fifo`` (a writer came)."""
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


# -- $VISUAL ------------------------------------------------------------------------------------

async def editor_command(nvim) -> list[str]:
    env = await eventually(nvim, "local s = vim.g.claude_nvim_server\n"
                                 "return s and s.claude and s.claude.env")
    return env["VISUAL"].split(" ")


async def run_editor(command: list[str], address: str, path: Path | str
                     ) -> subprocess.CompletedProcess[str]:
    return await trio.to_thread.run_sync(lambda: subprocess.run(
        [*command, "+1", str(path)], env={**os.environ, "NVIM": address}, timeout=HANG,
        capture_output=True, text=True))


@pytest.mark.parametrize("kind", ["fifo", "device", "big"])
async def test_claudes_editor_refuses_what_a_reload_refuses(app, nvim, nvim_address, tmp_path,
                                                            kind):
    command = await editor_command(nvim)
    if kind == "fifo":
        path, why = tmp_path / "prompt.md", "is not a regular file (a FIFO)"
        os.mkfifo(path)
    elif kind == "device":
        path, why = Path("/dev/zero"), "is not a regular file (a character device)"
    else:
        path, why = tmp_path / "big.md", "is 2 KB, over claude-nvim's limit of 1 KB"
        path.write_text("x" * 2000)
        await nvim.exec_lua("require('claude_nvim.core').max_file_bytes = 1024")
    try:
        done = await run_editor(command, nvim_address, path)
    finally:
        release(path)
    assert done.returncode == 1
    assert f"claude-nvim: {path} {why}" in done.stderr and "not opened" in done.stderr
    # Neovim answers, and opened nothing.
    assert await nvim.exec_lua("return vim.fn.bufnr(...)", str(path)) == -1


async def test_claudes_editor_without_the_servers_lua_still_refuses_a_fifo(nvim, nvim_address,
                                                                          tmp_path):
    script = ROOT / "src" / "claude_nvim" / "_core" / "editor.lua"
    nvim_bin = await nvim.exec_lua("return vim.v.progpath")
    path = tmp_path / "prompt.md"
    os.mkfifo(path)
    try:
        done = await run_editor([nvim_bin, "-l", str(script)], nvim_address, path)
    finally:
        release(path)
    assert done.returncode == 1 and f"{path} is not a regular file" in done.stderr
