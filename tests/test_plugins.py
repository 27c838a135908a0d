"""The tool registry: entry points, pluggy hooks, tolerant loading, and tools over the wire."""

from __future__ import annotations

import importlib.metadata
import json
import os
import pkgutil
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import pytest

import claude_nvim.tools
from claude_nvim import Exposure, Tool, hookimpl
from claude_nvim._plugins import ToolRegistryError, load_tools
from claude_nvim.testing import mcp_client, running_app
from helpers import WAIT, echo, fails, refuses

ROOT = Path(__file__).resolve().parent.parent
GROUP = "claude_nvim"


def builtin_entry_points() -> dict[str, str]:
    dist = importlib.metadata.distribution("claude-nvim")
    return {ep.name: ep.value for ep in dist.entry_points if ep.group == GROUP}


# Built-ins are entry points, one per module, named after their tool.


def test_entry_points_are_exactly_the_tool_modules():
    modules = {f"claude_nvim.tools.{m.name}"
               for m in pkgutil.iter_modules(claude_nvim.tools.__path__)
               if not m.name.startswith("_")}
    values = list(builtin_entry_points().values())
    assert len(values) == len(set(values)), "one entry point per module"
    assert set(values) == modules, (
        "src/claude_nvim/tools/ and the installed entry points differ: add the module to "
        "[project.entry-points.claude_nvim] and rerun `pip install -e .`")


def test_installed_entry_points_match_pyproject():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert builtin_entry_points() == declared["project"]["entry-points"][GROUP], (
        "the installed metadata is stale: rerun `pip install -e .`")


def test_each_entry_point_name_is_the_tool_it_registers():
    loaded = load_tools()
    assert loaded.broken == []
    for name in builtin_entry_points():
        assert name in loaded.tools, name
        assert loaded.tools[name].plugin == name
    by_plugin: dict[str, list[str]] = {}
    for tool in loaded.tools.values():
        by_plugin.setdefault(tool.plugin, []).append(tool.name)
    for name in builtin_entry_points():
        assert by_plugin[name] == [name]


# In-process plugins (pluggy registers a module under its __name__).


def plugin_module(name: str, *tool_names: str) -> types.ModuleType:
    module = types.ModuleType(name)

    @hookimpl
    def claude_nvim_register_tools(register):
        for tool_name in tool_names:
            register(Tool(tool_name, {"type": "object"}, echo, description="Test tool."))

    module.claude_nvim_register_tools = claude_nvim_register_tools
    return module


def test_duplicate_tool_names_are_an_error_naming_both_plugins():
    with pytest.raises(ToolRegistryError) as info:
        load_tools(autoload=False, extra=[plugin_module("first_plugin", "same", "a"),
                                          plugin_module("second_plugin", "b", "same")])
    message = str(info.value)
    assert "'same'" in message
    assert "'first_plugin'" in message and "'second_plugin'" in message


def test_a_hookimpl_may_take_no_arguments():
    called = []
    module = types.ModuleType("no_arguments")

    @hookimpl
    def claude_nvim_register_tools():
        called.append(True)

    module.claude_nvim_register_tools = claude_nvim_register_tools
    loaded = load_tools(autoload=False, extra=[module, plugin_module("other", "tool")])
    assert called == [True]
    assert list(loaded.tools) == ["tool"]
    assert loaded.broken == []


def test_a_tool_with_a_bad_schema_or_exposure_breaks_its_plugin_only():
    def plugin(name: str, **fields) -> types.ModuleType:
        module = types.ModuleType(name)

        @hookimpl
        def claude_nvim_register_tools(register):
            register(Tool(f"{name}Tool", handler=echo, description="T.", **fields))

        module.claude_nvim_register_tools = claude_nvim_register_tools
        return module

    loaded = load_tools(autoload=False, extra=[
        plugin("typo", input_schema={"type": "object", "properties": {"n": {"type": "int"}}}),
        plugin("old", input_schema={"type": "object"}, exposure=frozenset({"model"})),
        plugin("fine", input_schema={"type": "object"}, exposure=Exposure.BOTH)])
    assert list(loaded.tools) == ["fineTool"]
    errors = {b.name: b.error for b in loaded.broken}
    assert errors["typo"].startswith(
        "SchemaError: tool 'typoTool': input_schema is not valid JSON Schema")
    assert errors["old"] == ("TypeError: tool 'oldTool': exposure must be a "
                             "claude_nvim.Exposure, not frozenset({'model'})")


# Third-party plugins: real distributions on sys.path.

TOOLS_MODULE = """
from claude_nvim import Tool, hookimpl, text_result

async def handler(ctx, args):
    return text_result("hi")

@hookimpl
def claude_nvim_register_tools(register):
    for name, description in {tools!r}:
        register(Tool(name, {{"type": "object"}}, handler, description=description))
"""

HOOK_RAISES = """
from claude_nvim import hookimpl

@hookimpl
def claude_nvim_register_tools(register):
    raise ValueError("no tools today")
"""

MISSPELT = """
from claude_nvim import hookimpl

@hookimpl
def claude_nvim_register_tool(register):
    pass
"""

NOT_A_TOOL = """
from claude_nvim import hookimpl

@hookimpl
def claude_nvim_register_tools(register):
    register("getSomething")
"""


def tools_module(*tools: tuple[str, str | None]) -> str:
    return TOOLS_MODULE.format(tools=list(tools))


class Site:
    """A directory on ``sys.path`` holding fake installed distributions and their modules."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.modules: list[str] = []

    def distribution(self, name: str, entry_points: dict[str, str],
                     modules: dict[str, str]) -> None:
        info = self.root / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        lines = [f"[{GROUP}]", *(f"{ep} = {value}" for ep, value in entry_points.items())]
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
        for module, source in modules.items():
            (self.root / f"{module}.py").write_text(source)
            self.modules.append(module)


@pytest.fixture
def site(tmp_path, monkeypatch):
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    fake = Site(root)
    yield fake
    for module in fake.modules:
        sys.modules.pop(module, None)


def broken_distribution(site: Site) -> None:
    site.distribution("fake_broken", {
        "explodes": "fake_broken_import",
        "bad_hook": "fake_broken_hook",
        "misspelt": "fake_broken_misspelt",
        "not_a_tool": "fake_broken_not_a_tool",
        "missing": "fake_broken_nowhere",
    }, {
        "fake_broken_import": 'raise RuntimeError("cannot import me")\n',
        "fake_broken_hook": HOOK_RAISES,
        "fake_broken_misspelt": MISSPELT,
        "fake_broken_not_a_tool": NOT_A_TOOL,
    })


def test_broken_plugins_are_skipped_and_reported_and_builtins_still_load(site):
    broken_distribution(site)
    site.distribution("fake_fine", {"fine": "fake_fine_tools"},
                      {"fake_fine_tools": tools_module(("fineTool", "Fine."))})
    loaded = load_tools()
    assert set(builtin_entry_points()) | {"fineTool"} == set(loaded.tools)
    assert loaded.tools["fineTool"].plugin == "fine"
    broken = {b.name: b for b in loaded.broken}
    assert set(broken) == {"explodes", "bad_hook", "misspelt", "not_a_tool", "missing"}
    assert broken["explodes"].error == "RuntimeError: cannot import me"
    assert broken["bad_hook"].error == "ValueError: no tools today"
    assert "claude_nvim_register_tool" in broken["misspelt"].error
    assert broken["not_a_tool"].error.startswith("TypeError: register() takes a claude_nvim.Tool")
    assert broken["missing"].error.startswith("ModuleNotFoundError")
    for record in loaded.broken:
        assert record.distribution == "fake_broken", record


def test_a_disabled_broken_plugin_is_never_loaded(site):
    broken_distribution(site)
    loaded = load_tools(disabled=["explodes", "bad_hook", "misspelt", "not_a_tool", "missing"])
    assert loaded.broken == []
    assert set(loaded.tools) == set(builtin_entry_points())


def test_disabling_by_tool_name_and_by_plugin_name(site):
    site.distribution("fake_extras", {"extras": "fake_extras_tools"},
                      {"fake_extras_tools": tools_module(("alpha", "A."), ("beta", "B."))})
    builtins = set(builtin_entry_points())

    # A disabled plugin is not even imported.
    assert set(load_tools(disabled=["extras"]).tools) == builtins
    assert "fake_extras_tools" not in sys.modules

    loaded = load_tools()
    assert set(loaded.tools) == builtins | {"alpha", "beta"}
    assert loaded.tools["alpha"].plugin == loaded.tools["beta"].plugin == "extras"
    assert set(load_tools(disabled=["alpha"]).tools) == builtins | {"beta"}
    assert set(load_tools(disabled=["getDiagnostics", "beta"]).tools) == (
        builtins - {"getDiagnostics"}) | {"alpha"}
    # Names that match nothing are harmless.
    assert set(load_tools(disabled=["noSuchTool"]).tools) == builtins | {"alpha", "beta"}


def test_a_plugin_claiming_a_builtin_name_is_an_error_naming_both(site):
    site.distribution("fake_shadow", {"shadow": "fake_shadow_tools"},
                      {"fake_shadow_tools": tools_module(("getDiagnostics", "Mine."))})
    with pytest.raises(ToolRegistryError) as info:
        load_tools()
    message = str(info.value)
    assert "'getDiagnostics'" in message and "'shadow'" in message
    # Disabling one of the two settles it.
    assert load_tools(disabled=["shadow"]).tools["getDiagnostics"].plugin == "getDiagnostics"


# Tools over the wire.


SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "count": {"type": "integer", "minimum": 1}},
    "required": ["path"],
}
ANNOTATIONS = {"title": "Echo", "readOnlyHint": True, "openWorldHint": False}
TOOLS = {
    "echo": Tool("echo", SCHEMA, echo, description="Echo the arguments.",
                 annotations=ANNOTATIONS),
    "plain": Tool("plain", {"type": "object"}, echo, description="No annotations."),
    "hidden": Tool("hidden", {"type": "object"}, echo),
    "crashes": Tool("crashes", {"type": "object"}, fails, description="Crashes."),
    "refuses": Tool("refuses", {"type": "object"}, refuses, description="Refuses."),
}


@pytest.fixture
async def custom(nvim_address, tmp_path):
    async with (running_app(nvim_address, tools=TOOLS, lock_directory=tmp_path / "ide") as app,
                mcp_client(app.port, app.token, path="/mcp") as client):
        yield client  # plugin tools are for the model: its endpoint


async def test_tools_list_shows_described_tools_with_their_fields(custom):
    listed = (await custom.result("tools/list"))["tools"]
    assert [t["name"] for t in listed] == ["echo", "plain", "crashes", "refuses"]
    assert listed[0] == {"name": "echo", "description": "Echo the arguments.",
                         "inputSchema": SCHEMA, "annotations": ANNOTATIONS}
    assert listed[1] == {"name": "plain", "description": "No annotations.",
                         "inputSchema": {"type": "object"}}


async def test_a_hidden_tool_stays_callable(custom):
    result = await custom.call_tool("hidden", {"x": [1]})
    assert "isError" not in result
    assert json.loads(result["content"][0]["text"]) == {"x": [1]}


async def test_unknown_tool_is_method_not_found(custom):
    reply = await custom.request("tools/call", {"name": "nope", "arguments": {}})
    assert reply["error"] == {"code": -32601, "message": "Tool not found: nope"}
    assert (await custom.result("ping")) == {}


async def test_arguments_breaking_the_schema_are_tool_errors(custom):
    for arguments, words in [({}, "'path'"), ({"path": 1}, "'path'"),
                             ({"path": "a", "count": 0}, "'count'")]:
        result = await custom.call_tool("echo", arguments)
        assert result["isError"] is True, arguments
        assert words in result["content"][0]["text"], (arguments, result)
    assert json.loads((await custom.call_tool("echo", {"path": "a", "count": 2}))
                      ["content"][0]["text"]) == {"path": "a", "count": 2}


async def test_a_crashing_handler_is_an_internal_error_and_the_server_goes_on(custom):
    result = await custom.call_tool("crashes", {})
    assert result == {"content": [{"type": "text", "text": "Internal error: RuntimeError: kaboom"}],
                      "isError": True}
    assert "isError" not in await custom.call_tool("plain", {})
    assert (await custom.result("ping")) == {}


async def test_a_tool_error_is_a_tool_result_with_its_message(custom):
    result = await custom.call_tool("refuses", {})
    assert result == {"content": [{"type": "text", "text": "File not found: /nope"}],
                      "isError": True}


# The `claude-nvim tools` command.


def run_tools(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "CLAUDE_NVIM_DISABLE"}
    return subprocess.run([sys.executable, "-m", "claude_nvim", "tools", *args],
                          env={**environment, **env}, capture_output=True, text=True, timeout=WAIT)


def listed(stdout: str) -> dict[str, list[str]]:
    """Tool name -> [endpoint, plugin, distribution, version, status words...]."""
    rows = {}
    for line in stdout.splitlines()[1:]:  # after the header
        name, *rest = line.split()
        if name != "-":
            rows[name] = rest
    return rows


def test_cli_lists_the_tools_and_their_plugins():
    done = run_tools()
    assert done.returncode == 0, done.stderr
    rows = listed(done.stdout)
    tools = load_tools().tools
    assert set(rows) == set(tools)
    for name, tool in tools.items():
        endpoint, plugin, distribution, _version, *status = rows[name]
        assert (plugin, distribution) == (tool.plugin, "claude-nvim")
        assert set(endpoint.split("+")) == {str(e.name).lower() for e in tool.exposure}
        assert ("hidden" in status) == (tool.description is None)


def test_cli_honours_disable(tmp_path):
    done = run_tools("--disable", "getOpenEditors",
                     CLAUDE_NVIM_DISABLE="getDiagnostics, getLatestSelection")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # every name matched: no warning
    rows = listed(done.stdout)
    for name in ("getOpenEditors", "getDiagnostics", "getLatestSelection"):
        assert rows[name][-1] == "disabled"
    assert rows["getCurrentSelection"][-1] == claude_nvim.__version__  # no status: enabled


def test_cli_shows_hidden_and_broken_plugins(site):
    broken_distribution(site)
    site.distribution("fake_extras", {"extras": "fake_extras_tools"},
                      {"fake_extras_tools": tools_module(("shown", "S."), ("secret", None))})
    done = run_tools(PYTHONPATH=str(site.root))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.split() == ["shown", "model", "extras", "fake_extras", "1.0"]
               for line in lines)
    assert any(line.split() == ["secret", "model", "extras", "fake_extras", "1.0", "hidden"]
               for line in lines)
    broken = [line for line in lines if "broken:" in line]
    assert len(broken) == 5
    # Each broken plugin is one line of the log, without a traceback.
    assert "Traceback" not in done.stderr
    assert len([line for line in done.stderr.splitlines() if "skipped" in line]) == 5
    assert any("explodes" in line and "broken: RuntimeError: cannot import me" in line
               for line in broken)


def test_disabling_a_name_that_matches_nothing_warns(site):
    site.distribution("fake_extras", {"extras": "fake_extras_tools"},
                      {"fake_extras_tools": tools_module(("alpha", "A."), ("beta", "B."))})
    loaded = load_tools(disabled=["getDiagnostics", "alpha", "getDiagnostic"])
    assert loaded.unmatched == {"getDiagnostic"}
    assert load_tools(disabled=["extras"]).unmatched == set()
    done = run_tools("--disable", "getDiagnostic", "--disable", "alpha",
                     CLAUDE_NVIM_DISABLE="nope", PYTHONPATH=str(site.root))
    assert done.returncode == 0
    warnings = done.stderr.splitlines()
    assert len(warnings) == 2
    assert "'getDiagnostic': no tool or plugin has that name" in warnings[0]
    assert "'nope'" in warnings[1]


def test_cli_names_a_tool_registered_twice_in_one_line(site):
    site.distribution("fake_shadow", {"shadow": "fake_shadow_tools"},
                      {"fake_shadow_tools": tools_module(("getDiagnostics", "Mine."))})
    done = run_tools(PYTHONPATH=str(site.root))
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("claude-nvim: tool 'getDiagnostics' is registered twice")
    assert "--disable" in done.stderr
