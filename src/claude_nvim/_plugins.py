"""Finding tool plugins through entry points and collecting their tools."""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace

import pluggy

from . import hookspecs
from ._tool import Exposure, Tool

log = logging.getLogger(__name__)


class ToolRegistryError(Exception):
    """The set of tools cannot be served: a duplicate name, a bad record, or no tools at all."""


@dataclass(frozen=True)
class BrokenPlugin:
    """An entry point that failed to load or register; the server goes on without it."""

    name: str
    distribution: str | None
    error: str


def make_plugin_manager(
    *,
    autoload: bool = True,
    disabled: Iterable[str] = (),
    extra: Iterable[object] = (),
) -> tuple[pluggy.PluginManager, list[BrokenPlugin]]:
    """A plugin manager holding the entry-point plugins (unless ``autoload`` is off) and ``extra``.

    ``disabled`` names plugins (entry-point names) that are never loaded.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for name in disabled:
        pm.set_blocked(name)
    broken = load_entrypoint_plugins(pm) if autoload else []
    for plugin in extra:
        pm.register(plugin)
    return pm, broken


def load_entrypoint_plugins(pm: pluggy.PluginManager) -> list[BrokenPlugin]:
    """Load each ``claude_nvim`` entry point on its own; a broken one is logged and skipped."""
    broken: list[BrokenPlugin] = []
    for ep in importlib.metadata.entry_points(group=hookspecs.PROJECT):
        # An editable install can list a distribution twice; the name check makes that harmless.
        if pm.is_blocked(ep.name) or pm.has_plugin(ep.name):
            continue
        dist = ep.dist.name if ep.dist else None
        try:
            pm.register(ep.load(), name=ep.name)
            pm.check_pending()
        except Exception as exc:
            if pm.has_plugin(ep.name):
                pm.unregister(name=ep.name)
            log.error("plugin %s (%s) skipped: %s", ep.name, dist or "?", exc,
                      exc_info=log.isEnabledFor(logging.DEBUG))
            broken.append(BrokenPlugin(ep.name, dist, f"{type(exc).__name__}: {exc}"))
    return broken


def collect_tools(
    pm: pluggy.PluginManager,
    *,
    disabled: Iterable[str] = (),
    broken: list[BrokenPlugin] | None = None,
    left_out: set[str] | None = None,
) -> dict[str, Tool]:
    """Ask every plugin for its tools; each tool is stamped with the plugin that registered it.

    ``disabled`` names tools left out (added to ``left_out``). A plugin whose hook raises is
    logged, appended to ``broken`` and skipped.
    """
    disabled = set(disabled)
    tools: dict[str, Tool] = {}
    for impl in reversed(pm.hook.claude_nvim_register_tools.get_hookimpls()):
        plugin_name = impl.plugin_name
        found: list[Tool] = []

        def register(tool: Tool, _found: list[Tool] = found, _plugin: str = plugin_name) -> None:
            if not isinstance(tool, Tool):
                raise TypeError(f"register() takes a claude_nvim.Tool, not {type(tool).__name__}")
            if not isinstance(tool.exposure, Exposure):
                raise TypeError(f"tool {tool.name!r}: exposure must be a claude_nvim.Exposure, "
                                f"not {tool.exposure!r}")
            tool = replace(tool, plugin=_plugin)
            tool.check_arguments  # noqa: B018 -- compiled now: a bad schema breaks its plugin
            _found.append(tool)

        try:
            # Hookimpls may take a subset of the hook's arguments (pluggy's rule).
            impl.function(*[{"register": register}[arg] for arg in impl.argnames])
        except Exception as exc:
            log.error("plugin %s skipped: registering its tools failed: %s", plugin_name, exc,
                      exc_info=log.isEnabledFor(logging.DEBUG))
            if broken is not None:
                broken.append(BrokenPlugin(plugin_name, None, f"{type(exc).__name__}: {exc}"))
            continue
        for tool in found:
            if tool.name in disabled:
                if left_out is not None:
                    left_out.add(tool.name)
                continue
            if tool.name in tools:
                raise ToolRegistryError(
                    f"tool {tool.name!r} is registered twice: by plugin "
                    f"{tools[tool.name].plugin!r} and by plugin {plugin_name!r}; "
                    "uninstall one of them, or --disable one of the two plugins"
                )
            tools[tool.name] = tool
    return tools


@dataclass(frozen=True)
class LoadedTools:
    tools: dict[str, Tool]
    broken: list[BrokenPlugin]
    unmatched: frozenset[str] = frozenset()
    """Disabled names that are no tool's and no plugin's (a typo, most likely)."""


def load_tools(
    *,
    autoload: bool = True,
    disabled: Iterable[str] = (),
    extra: Iterable[object] = (),
) -> LoadedTools:
    """Discover plugins and collect their tools; ``disabled`` holds tool or plugin names."""
    disabled = list(disabled)
    pm, broken = make_plugin_manager(autoload=autoload, disabled=disabled, extra=extra)
    left_out: set[str] = set()
    tools = collect_tools(pm, disabled=disabled, broken=broken, left_out=left_out)
    # Tools left out, plugins loaded, and entry points (blocked ones too): what a name can mean.
    known = left_out | {name for name, plugin in pm.list_name_plugin() if plugin} | {
        ep.name for ep in importlib.metadata.entry_points(group=hookspecs.PROJECT)}
    if autoload and any(b.distribution is None for b in broken):
        # A hook that failed belongs to an entry point loaded above: name its distribution too.
        dists = plugin_distributions()
        broken = [b if b.distribution or b.name not in dists
                  else replace(b, distribution=dists[b.name][0]) for b in broken]
    if autoload and not _builtin_entry_points():
        # A bare PYTHONPATH=src checkout has no entry points: say so instead of serving nothing.
        raise ToolRegistryError(
            "claude-nvim runs from a checkout that was never installed, so it has no tools "
            "(they are entry points, which installing makes): pip install -e . in the "
            "checkout, then try again"
        )
    return LoadedTools(tools, broken, frozenset(disabled) - known - set(tools))


def plugin_distributions() -> dict[str, tuple[str, str]]:
    """Entry-point (plugin) name -> (distribution, version), for reports."""
    return {ep.name: (ep.dist.name, ep.dist.version)
            for ep in importlib.metadata.entry_points(group=hookspecs.PROJECT) if ep.dist}


def _builtin_entry_points() -> list[importlib.metadata.EntryPoint]:
    return [
        ep
        for ep in importlib.metadata.entry_points(group=hookspecs.PROJECT)
        if ep.value.startswith("claude_nvim.tools.")
    ]
