"""The package's layers are its folders: each imports only from its own layer or the ones below,
the folders of a layer marked independent not from one another, and there is no import circle
anywhere. Read from the source with ast, so lazy imports inside functions and ``TYPE_CHECKING``
imports count too."""

from __future__ import annotations

import ast
from pathlib import Path

import claude_nvim

PACKAGE = Path(claude_nvim.__file__).parent

LAYERS: list[tuple[str, set[str], bool]] = [
    ("foundations", {"_errors", "_project", "_paths", "_schema", "_big_reads", "_socket_io"},
     False),
    ("the transports: Neovim's RPC, the CLI's WebSocket", {"_nvim", "_wire"}, True),
    ("the tool API", {"_tool", "hookspecs", "_plugins"}, False),
    ("what a feature is", {"_feature"}, False),
    ("the Claudes: one record each, their registry", {"_claudes"}, False),
    ("the features", {"_core", "_selection", "_diffs", "_mentions", "_bufsync", "_lsp",
                      "_hooks", "_review", "_follow"}, True),
    ("the built-in tools", {"tools"}, False),
    ("the server", {"_mcp", "_lockfile", "_linger", "_app"}, False),
    ("entry points", {"_hold", "_commands", "_cli", "testing", "__main__"}, False),
]
"""Bottom first: (what it is, its top-level modules and folders, whether those may not import
one another). ``claude_nvim/__init__.py`` (the public API) is above them all; importing it
(``from . import __version__``) is allowed everywhere, as Python loads it first anyway."""


def module_names() -> dict[str, Path]:
    """Every module of the package by its name inside it (``tools.open_file``), but __init__."""
    names = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts:
            names[".".join(parts)] = path
    return names


def top(name: str) -> str:
    """The top-level module or folder ``name`` is in (``_nvim.socket``: ``_nvim``)."""
    return name.split(".")[0]


def layer_of(name: str) -> int:
    for rank, (_, members, _) in enumerate(LAYERS):
        if top(name) in members:
            return rank
    raise AssertionError(f"claude_nvim.{name} is in no layer: add {top(name)} to LAYERS in "
                         f"{__file__}")


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> dict[str, set[str]]:
    """The package's modules ``name`` imports (without the package itself), and the outside
    top-level packages it imports: ``{"own": ..., "outside": ...}``."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    own: set[str] = set()
    outside: set[str] = set()

    def add(dotted: str) -> None:
        if dotted in modules:
            own.add(dotted)
        elif dotted and dotted.rsplit(".", 1)[0] in modules:  # from .mod import name
            own.add(dotted.rsplit(".", 1)[0])

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("claude_nvim."):
                    add(alias.name.removeprefix("claude_nvim."))
                elif alias.name != "claude_nvim":
                    outside.add(alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - node.level + 1]
                prefix = ".".join([*base, *(node.module or "").split(".")]).strip(".")
            elif node.module and node.module.split(".")[0] == "claude_nvim":
                prefix = node.module.removeprefix("claude_nvim").lstrip(".")
            else:
                outside.add((node.module or "").split(".")[0])
                continue
            for alias in node.names:
                add(f"{prefix}.{alias.name}".strip("."))
            add(prefix)
    own.discard(name)
    return {"own": own, "outside": outside}


def test_every_module_imports_only_from_its_layer_or_below():
    modules = module_names()
    wrong = []
    for name, path in modules.items():
        for imported in imports_of(name, path, modules)["own"]:
            if layer_of(imported) > layer_of(name):
                wrong.append(f"{name} ({LAYERS[layer_of(name)][0]}) imports {imported} "
                             f"({LAYERS[layer_of(imported)][0]})")
    assert wrong == []


def test_independent_folders_do_not_import_one_another():
    modules = module_names()
    wrong = []
    for name, path in modules.items():
        for imported in imports_of(name, path, modules)["own"]:
            _, _, independent = LAYERS[layer_of(name)]
            if independent and layer_of(imported) == layer_of(name) \
                    and top(imported) != top(name):
                wrong.append(f"{name} imports {imported}")
    assert wrong == []


def test_there_is_no_import_circle():
    modules = module_names()
    graph = {name: imports_of(name, path, modules)["own"] for name, path in modules.items()}
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        if name in trail:
            raise AssertionError("import circle: " + " -> ".join([*trail, name]))
        if name not in done:
            for imported in sorted(graph[name]):
                visit(imported, [*trail, name])
            done.add(name)

    for name in graph:
        visit(name, [])


def test_only_the_pipe_client_imports_pynvim():
    modules = module_names()
    importers = {name for name, path in modules.items()
                 if "pynvim" in imports_of(name, path, modules)["outside"]}
    assert importers == {"_nvim.pipe"}


def test_the_checks_see_imports_in_functions_and_type_checking_blocks():
    modules = module_names()
    assert "_nvim.pipe" in imports_of("_nvim", modules["_nvim"], modules)["own"]
    assert "_nvim.editor" in imports_of("_tool", modules["_tool"], modules)["own"]
