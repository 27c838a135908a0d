"""``claude-nvim tools``: the tools, the plugins they come from, and which are left out."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable

from .._plugins import ToolRegistryError, load_tools, plugin_distributions
from . import fail, log


def run(args: argparse.Namespace) -> int:
    disabled_names = set(disabled(args))
    try:
        loaded = load_tools()
    except ToolRegistryError as exc:
        return fail(str(exc), exc)
    sources = plugin_distributions()
    warn_unmatched(disabled_names - {t.name for t in loaded.tools.values()}
                   - {b.name for b in loaded.broken} - set(sources))
    rows = [("TOOL", "ENDPOINT", "PLUGIN", "FROM", "STATUS")]
    for tool in sorted(loaded.tools.values(), key=lambda t: t.name.lower()):
        plugin = tool.plugin or "?"
        status = [word for word, applies in (
            ("disabled", tool.name in disabled_names or plugin in disabled_names),
            ("hidden", tool.description is None)) if applies]
        rows.append((tool.name, "+".join(str(e.name).lower() for e in tool.exposure), plugin,
                     " ".join(sources.get(plugin, ("(in-process)",))), ", ".join(status)))
    for broken in loaded.broken:
        rows.append(("-", "-", broken.name, broken.distribution or "?",
                     f"broken: {broken.error}"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
              + "  " + row[4])
    return 0


def disabled(args: argparse.Namespace) -> list[str]:
    """The names --disable and $CLAUDE_NVIM_DISABLE leave out."""
    from_env = os.environ.get("CLAUDE_NVIM_DISABLE", "")
    return [*args.disable, *(n.strip() for n in from_env.split(",") if n.strip())]


def warn_unmatched(names: Iterable[str]) -> None:
    for name in sorted(names):
        log.warning("cannot disable %r: no tool or plugin has that name (claude-nvim tools "
                    "lists them)", name)
