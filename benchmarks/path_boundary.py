"""What the path map's boundary costs the server (``serve --path-map``): a path from Claude
checked (normalised, mapped, its symlinks resolved here), a selection sent back, a listing of
200 open files, each as µs per call; without a map, the same calls (which must stay free).

    .venv/bin/python benchmarks/path_boundary.py

Pure Python, no Neovim: the boundary runs in the server, not in Neovim (which it never blocks).
"""

from __future__ import annotations

import tempfile
import timeit
from pathlib import Path

from claude_nvim._paths import PathMap


def per_call_us(fn, number: int = 20_000) -> float:
    best = min(timeit.repeat(fn, number=number, repeat=5))
    return best / number * 1e6


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "home" / "me" / "project"
        (ws / "src" / "pkg").mkdir(parents=True)
        files = [ws / "src" / "pkg" / f"m{i}.py" for i in range(200)]
        for f in files:
            f.write_text("x = 1\n")
        selection = {"text": "x = 1", "filePath": str(files[0]), "fileUrl": f"file://{files[0]}",
                     "selection": {"start": {"line": 0, "character": 0},
                                   "end": {"line": 0, "character": 5}, "isEmpty": False}}
        tabs = [{"uri": f"file://{f}", "fileName": str(f), "label": f.name, "isActive": False,
                 "languageId": "python", "isDirty": False, "isUntitled": False} for f in files]
        for name, paths in (("no map", PathMap()),
                            ("a map", PathMap.parse([f"/workspace={ws}"]))):
            for row, us in rows(paths, files, selection, tabs).items():
                print(f"{name:7} {row:38} {us:10.2f} µs")


def rows(paths: PathMap, files: list[Path], selection: dict, tabs: list[dict]) -> dict[str, float]:
    claude = "/workspace/src/pkg/m7.py" if paths else str(files[7])
    return {
        "a path in (candidates)": per_call_us(lambda: paths.candidates(claude)),
        "a selection out (to_claude_fields)": per_call_us(
            lambda: paths.to_claude_fields(selection)),
        "a selection out, resolved (its text)": per_call_us(
            lambda: paths.to_claude_fields(selection, resolve=True)),
        "200 open files out (getOpenEditors)": per_call_us(
            lambda: paths.to_claude_fields(tabs), number=200),
    }

if __name__ == "__main__":
    main()
