"""The documentation is true: the code blocks of docs/plugins.md become a package on sys.path,
with its entry points, served to a real Neovim; :help names everything a user can reach; and
README's lists are the plugin's own."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from claude_nvim._nvim.headless import find_nvim, headless_nvim
from claude_nvim.testing import attached_editor

ROOT = Path(__file__).resolve().parent.parent


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.M | re.S)


GUIDE = (ROOT / "docs" / "plugins.md").read_text()


def install(site: Path, package_root: Path, pyproject: dict, modules: dict[str, str]) -> None:
    """What ``pip install`` of the package would leave: its modules and its entry points."""
    where = pyproject.get("tool", {}).get("setuptools", {}).get("packages", {}).get("find", {})
    source = package_root.joinpath(*where.get("where", ["."]))
    entry_points = pyproject["project"]["entry-points"]["claude_nvim"]
    for value in entry_points.values():
        path = source.joinpath(*value.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(modules[value])
    info = site / f"{pyproject['project']['name'].replace('-', '_')}-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {pyproject['project']['name']}"
                                   "\nVersion: 0\n")
    lines = ["[claude_nvim]", *(f"{name} = {value}" for name, value in entry_points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    if str(source) not in sys.path:
        sys.path.insert(0, str(source))
    importlib.invalidate_caches()


@pytest.fixture
def documented_plugins(tmp_path):
    """The guide's package (docs/plugins.md), "installed"."""
    site = tmp_path / "site"
    site.mkdir()
    saved_path = list(sys.path)
    sys.path.insert(0, str(site))

    guide_tool, guide_test = code_blocks(GUIDE, "python")
    (guide_pyproject,) = code_blocks(GUIDE, "toml")
    pyproject = tomllib.loads(guide_pyproject)
    assert pyproject["build-system"]["build-backend"] == "setuptools.build_meta"
    assert "claude-nvim" in pyproject["project"]["dependencies"]
    assert pyproject["tool"]["pytest"]["ini_options"]["trio_mode"] is True
    install(site, tmp_path / "guide", pyproject, {"my_package.word_count": guide_tool})

    yield guide_test
    sys.path[:] = saved_path
    for name in [m for m in sys.modules if m == "my_package" or m.startswith("my_package.")]:
        del sys.modules[name]


async def test_the_documented_tools_load_and_answer(documented_plugins, app, nvim, tmp_path):
    from claude_nvim.testing import mcp_client

    assert app.tools["wordCount"].plugin == "wordCount"
    namespace: dict = {}
    exec(compile(documented_plugins, "docs/plugins.md (test)", "exec"), namespace)

    async with mcp_client(app.port, app.token, path="/mcp") as model:
        await namespace["test_counts_words"](model, nvim, tmp_path)  # the guide's own test
        listed = {t["name"] for t in (await model.result("tools/list"))["tools"]}
        assert "wordCount" in listed


# :help claude-nvim (doc/claude-nvim.txt) names everything a user can reach: each command (as
# Neovim has them once the plugin is loaded), each option (from the plugin's defaults table),
# each ClaudeNvim* name in the plugin's and the server's code (User autocmds, commands the
# server defines), status() and setup(), each with its own help tag.
HELP = ROOT / "doc" / "claude-nvim.txt"


def help_tags() -> set[str]:
    return set(re.findall(r"\*([^*\s]+)\*", HELP.read_text()))


def plugin_options() -> list[str]:
    """The dotted names in the plugin's defaults table (nil ones too, which Lua would drop)."""
    source = (ROOT / "lua" / "claude_nvim" / "init.lua").read_text()
    found = re.search(r"^local defaults = (\{.*?^\})", source, re.M | re.S)
    assert found, "lua/claude_nvim/init.lua has no `local defaults = { ... }`"
    return options_of(found.group(1))


def options_of(table: str) -> list[str]:
    """The dotted names in a Lua table constructor's text."""
    table = re.sub(r"--[^\n]*", "", table)  # comments
    table = re.sub(r"'[^']*'|\"[^\"]*\"", "''", table)  # strings
    names: list[str] = []
    stack: list[str | None] = []
    for token in re.finditer(r"(\w+)\s*=(?!=)\s*(\{)?|(\{)|(\})", table):
        key, opens, bare, closes = token.groups()
        if key:
            names.append(".".join([k for k in stack if k] + [key]))
            if opens:
                stack.append(key)
        elif bare:
            stack.append(None)
        elif closes:
            stack.pop()
    return names


def test_the_options_are_read_from_the_defaults():
    assert {"cmd", "python", "terminal.position", "diff.open_in"} <= set(plugin_options())


def names_in_code() -> set[str]:
    files = [*ROOT.glob("lua/**/*.lua"), *ROOT.glob("plugin/**/*.lua"),
             *ROOT.glob("src/**/*.lua"), *ROOT.glob("src/**/*.py")]
    return {name for f in files for name in re.findall(r"\bClaudeNvim\w*", f.read_text())}


async def plugin_commands(cwd: Path) -> set[str]:
    """The plugin's commands: those it adds to Neovim's own (netrw's, :Man, ...)."""
    async def commands(*args: str) -> set[str]:
        with headless_nvim(cwd=cwd, args=("--clean", *args)) as (address, _process):
            async with attached_editor(address) as nvim:
                return set(await nvim.exec_lua(
                    "return vim.tbl_keys(vim.api.nvim_get_commands({ builtin = false }))"))

    found = await commands("--cmd", f"set runtimepath^={ROOT}") - await commands()
    assert "ClaudeNvim" in found
    return found


async def test_the_help_names_every_command_option_and_event(tmp_path):
    commands = await plugin_commands(tmp_path)
    tags = help_tags()
    missing = [f":{c}" for c in commands if f":{c}" not in tags]
    missing += [f"claude-nvim-opts.{o}" for o in plugin_options()
                if f"claude-nvim-opts.{o}" not in tags]
    # Events and commands by their names, highlight groups as hl-NAME (Neovim's own way).
    missing += [n for n in names_in_code()
                if n not in tags and f":{n}" not in tags and f"hl-{n}" not in tags]
    missing += [t for t in ("claude-nvim-status()", "claude-nvim-setup()",
                            "claude-nvim-status_highlight()") if t not in tags]
    assert not missing, f"doc/claude-nvim.txt has no help tag for {sorted(missing)}"


# README.md is a front page: its lists are the plugin's, checked here so that they cannot drift.
def readme_part(heading: str) -> str:
    return README.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


README = (ROOT / "README.md").read_text()
INIT_LUA = (ROOT / "lua" / "claude_nvim" / "init.lua").read_text()


def test_the_readme_shows_the_plugins_defaults_as_they_are():
    """README's Configuration block is the plugin's defaults table, comments and all."""
    found = re.search(r"^local defaults = (\{.*?^\})$", INIT_LUA, re.M | re.S)
    assert found
    blocks = code_blocks(readme_part("Configuration"), "lua")
    assert found.group(1) + "\n" in blocks, (
        "README's Configuration block differs from lua/claude_nvim/init.lua's `local defaults`: "
        "copy the table (from its `{` to its `}`) into README.md")


async def test_the_help_shows_the_plugins_defaults(tmp_path):
    """:help claude-nvim-opts's setup() block holds the defaults: the same names (nil ones
    too) and, read by Lua, the same values as the plugin's options before setup()."""
    help_text = HELP.read_text()
    block = help_text.split("The options and their defaults: >lua\n", 1)[1].split("\n<", 1)[0]
    table = block[block.index("{"):block.rindex("}") + 1]
    assert sorted(options_of(table)) == sorted(plugin_options())
    with headless_nvim(cwd=tmp_path, args=("--clean", "--cmd", f"set runtimepath^={ROOT}")) as (
            address, _process):
        async with attached_editor(address) as nvim:
            assert await nvim.exec_lua(
                "local shown = assert(loadstring('return ' .. select(1, ...)))()\n"
                "return vim.deep_equal(shown, require('claude_nvim').config)", table)


async def test_the_readme_and_the_help_list_every_command(tmp_path):
    commands = await plugin_commands(tmp_path)
    table = readme_part("Quick start")
    in_readme = {m for m in re.findall(r"^\| `:(?:\[range\])?(ClaudeNvim\w*)", table, re.M)}
    assert in_readme == commands
    section = HELP.read_text().split("*claude-nvim-commands*", 1)[1].split("=" * 78, 1)[0]
    assert set(re.findall(r"\*:(ClaudeNvim\w*)\*", section)) == commands


def test_the_help_tags_are_made_and_found(tmp_path):
    """:helptags makes the tags (no duplicate, as lazy.nvim and build.lua run it) and :help finds
    the pages."""
    shutil.copytree(ROOT / "doc", tmp_path / "doc", ignore=shutil.ignore_patterns("tags"))
    script = tmp_path / "help.lua"
    script.write_text(f"""
vim.opt.rtp:prepend('{tmp_path}')
vim.cmd.helptags('{tmp_path / "doc"}')
for _, topic in ipairs({{ 'claude-nvim', ':ClaudeNvimInstall', 'claude-nvim-opts.packages' }}) do
  vim.cmd.help(topic)
  io.stdout:write(topic, ' ', vim.fn.expand('%:t'), '\\n')
  vim.cmd.helpclose()
end
""")
    done = subprocess.run([find_nvim(), "--clean", "--headless", "-l", str(script)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.splitlines() == [
        "claude-nvim claude-nvim.txt", ":ClaudeNvimInstall claude-nvim.txt",
        "claude-nvim-opts.packages claude-nvim.txt"]


def test_the_changelog_names_this_version():
    """A release's version is SemVer and CHANGELOG.md has its entry (docs/releasing.md)."""
    from claude_nvim import __version__

    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[{re.escape(__version__)}\] - \d{{4}}-\d\d-\d\d$", changelog, re.M)
    assert "## [Unreleased]" in changelog
