"""The package's layers: each module imports only from its own layer or the ones below, and no
import circle anywhere. Read from the source with ast, so lazy imports inside functions and
``TYPE_CHECKING`` imports count too."""

from __future__ import annotations

import ast
from pathlib import Path

import claude_nvim

PACKAGE = Path(claude_nvim.__file__).parent

LAYERS: list[tuple[str, set[str]]] = [
    ("foundations", {"_errors", "_wire.jsontext", "_paths", "_schema", "_socket_io", "_big_reads",
                     "_wire.constants", "_lockfile", "_nvim.headless", "_nvim.lua", "_mentions",
                     "_diffs", "_mentions.outboxes", "_mentions.claudes", "_core", "_bufsync",
                     "_lsp", "_wire"}),
    ("the Editor interface", {"_nvim.editor"}),
    ("request scheduling", {"_nvim.scheduler"}),
    ("Neovim clients", {"_nvim.socket", "_nvim.pipe"}),
    ("choosing a client", {"_nvim"}),
    ("the tool API", {"_tool", "hookspecs", "_feature"}),
    ("tools and what they share", {"tools", "tools.*", "_lsp.replies", "_selection",
                                   "_plugins"}),
    ("the wire", {"_mcp", "_wire.handshake", "_wire.websocket", "_wire.workers"}),
    ("the features the server runs", {"_features"}),
    ("the server", {"_app"}),
    ("entry points", {"_commands", "_commands.*", "testing", "_cli", "__main__"}),
]
"""Bottom first. ``claude_nvim/__init__.py`` (the public API) is above them all; importing
it (``from . import __version__``) is allowed everywhere, as Python loads it first anyway."""


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


def layer_of(name: str) -> int:
    for rank, (_, members) in enumerate(LAYERS):
        if name in members or any(m.endswith(".*") and name.startswith(m[:-1])
                                  for m in members):
            return rank
    raise AssertionError(f"claude_nvim.{name} is in no layer: add it to LAYERS in {__file__}")


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
