"""The plugin author's documentation runs: the code blocks of docs/plugins.md and of README's
"Writing tools" become a package on sys.path, with its entry points, served to a real Neovim."""

from __future__ import annotations

import importlib
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.M | re.S)


def readme_section() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split("## Writing tools\n", 1)[1].split("\n## ", 1)[0]


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
    """The guide's package (docs/plugins.md) and the README's tool, "installed"."""
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

    (readme_tool,) = code_blocks(readme_section(), "python")
    (readme_entry_points,) = code_blocks(readme_section(), "toml")
    readme_pyproject = {"project": {"name": "readme-package",
                                    **tomllib.loads(readme_entry_points)["project"]}}
    (module,) = readme_pyproject["project"]["entry-points"]["claude_nvim"].values()
    # Both use the package name my_package: one source tree holds them.
    install(site, tmp_path / "guide" / "src", readme_pyproject, {module: readme_tool})

    yield guide_test
    sys.path[:] = saved_path
    for name in [m for m in sys.modules if m == "my_package" or m.startswith("my_package.")]:
        del sys.modules[name]


async def test_the_documented_tools_load_and_answer(documented_plugins, app, nvim, tmp_path):
    from claude_nvim.testing import mcp_client

    assert app.tools["wordCount"].plugin == "wordCount"
    assert app.tools["countBuffers"].plugin == "countBuffers"
    namespace: dict = {}
    exec(compile(documented_plugins, "docs/plugins.md (test)", "exec"), namespace)

    async with mcp_client(app.port, app.token, path="/mcp") as model:
        await namespace["test_counts_words"](model, nvim, tmp_path)  # the guide's own test
        listed = {t["name"] for t in (await model.result("tools/list"))["tools"]}
        assert {"wordCount", "countBuffers"} <= listed
        buffers = len(await nvim.request("nvim_list_bufs"))
        assert await model.call_json("countBuffers") == {"buffers": buffers}
