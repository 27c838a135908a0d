"""Paths and URIs as clients send them (docs/protocol.md §2), and where they cross between
Claude's host and Neovim's (:class:`PathMap`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote

log = logging.getLogger(__name__)


def candidate_paths(path_or_uri: str) -> list[str]:
    """The paths a client may mean, in the order to try them: literal first, then decoded.

    ``file://`` URIs may or may not be percent-encoded, and plain paths may contain ``%``.
    ``~`` and relative paths are resolved in Neovim, against its home and cwd.
    """
    path = path_or_uri
    if path.startswith("file://"):
        path = path[len("file://"):]
        if path.startswith("localhost/"):
            path = path[len("localhost"):]
    candidates = [path]
    decoded = unquote(path)
    if decoded != path:
        candidates.append(decoded)
    return candidates


def file_url(path: str) -> str:
    """The URI the CLI expects: ``file://`` + the path, not percent-encoded."""
    return "file://" + path


PATH_KEYS = frozenset({"filePath", "fileName", "path", "rootPath"})
"""The fields of the protocol's messages that hold a file path (docs/protocol.md)."""
URI_KEYS = frozenset({"uri", "fileUrl"})
"""... and those that hold a ``file://`` URI."""


class PathMap:
    """Where a path on Claude's host is in Neovim's, and back: ``CLAUDE_SIDE=NEOVIM_SIDE``
    prefixes (``claude-nvim serve --path-map``), for Claude in a container or on another host.

    The longest prefix that holds a path wins; a prefix holds whole components only
    (``/srv/app`` holds ``/srv/app/x.py``, not ``/srv/apple``). A path no prefix holds passes
    unchanged, and the log says so once. Neovim's side may be any buffer-name prefix, such as
    ``scp://host//srv/app`` for netrw's buffers. With no prefixes it is the identity and costs
    nothing: every path that crosses goes through one of these methods, in one line
    (``ctx.paths`` in a tool, ``self.paths`` in a feature).
    """

    def __init__(self, pairs: Iterable[tuple[str, str]] = ()) -> None:
        self.pairs = [(_prefix(claude), _prefix(neovim)) for claude, neovim in pairs]
        """The (Claude's side, Neovim's side) prefixes, as given."""
        # Longest first: the first that holds a path is the one that wins.
        self._to_neovim = sorted(self.pairs, key=lambda pair: -len(pair[0]))
        self._to_claude = sorted(((n, c) for c, n in self.pairs), key=lambda pair: -len(pair[0]))
        self._said: set[str] = set()

    @classmethod
    def parse(cls, specs: Iterable[str]) -> PathMap:
        """The map of ``CLAUDE_SIDE=NEOVIM_SIDE`` specs; ``ValueError`` saying what is wrong."""
        pairs = []
        for spec in specs:
            claude, equals, neovim = spec.partition("=")
            if not equals or not claude or not neovim:
                raise ValueError(f"{spec!r} is not CLAUDE_SIDE=NEOVIM_SIDE (two paths joined "
                                 "by =, e.g. /workspace=/home/me/project)")
            if not claude.startswith("/"):
                raise ValueError(f"{spec!r}: Claude's side must be an absolute path")
            pairs.append((claude, neovim))
        return cls(pairs)

    def __bool__(self) -> bool:
        return bool(self.pairs)

    def __repr__(self) -> str:
        return f"PathMap({self.pairs!r})"

    def to_neovim(self, path: str) -> str:
        """Where Claude's ``path`` is in Neovim."""
        return self._swap(path, self._to_neovim, "Claude's") if self.pairs else path

    def to_claude(self, path: str) -> str:
        """Where Neovim's ``path`` (a buffer name) is on Claude's host."""
        return self._swap(path, self._to_claude, "Neovim's") if self.pairs else path

    def uri_to_claude(self, uri: str) -> str:
        """A ``file://`` URI of Neovim's as Claude's host has it; other URIs as they are."""
        if not self.pairs or not uri.startswith("file://"):
            return uri
        return file_url(self.to_claude(uri[len("file://"):]))

    def candidates(self, path_or_uri: str) -> list[str]:
        """:func:`candidate_paths` of a path or URI from Claude, each where it is in Neovim."""
        found = candidate_paths(path_or_uri)
        return [self.to_neovim(p) for p in found] if self.pairs else found

    def to_claude_fields(self, value: Any) -> Any:
        """``value`` (a message or part of one: dicts, lists) with the paths of its
        :data:`PATH_KEYS` fields and the URIs of its :data:`URI_KEYS` fields on Claude's side."""
        if not self.pairs:
            return value
        if isinstance(value, dict):
            return {key: self.to_claude(item) if key in PATH_KEYS and isinstance(item, str)
                    else self.uri_to_claude(item) if key in URI_KEYS and isinstance(item, str)
                    else self.to_claude_fields(item)
                    for key, item in value.items()}
        if isinstance(value, list):
            return [self.to_claude_fields(item) for item in value]
        return value

    def _swap(self, path: str, prefixes: list[tuple[str, str]], side: str) -> str:
        for old, new in prefixes:
            if path.startswith(old) and (len(path) == len(old) or path[len(old)] == "/"):
                return new + path[len(old):] or "/"
        if side not in self._said and (path.startswith("/") or "://" in path):
            self._said.add(side)
            log.info("%s path %s is under no --path-map prefix: it passes unchanged (said once "
                     "for %s paths)", side, path, side)
        return path


def _prefix(path: str) -> str:
    """A prefix as :class:`PathMap` compares it: without its trailing slash (``/`` is ``""``;
    ``scp://host//`` keeps the one that makes its paths absolute)."""
    return path[:-1] if path.endswith("/") else path
