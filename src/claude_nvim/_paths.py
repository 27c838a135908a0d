"""Paths and URIs as clients send them (docs/protocol.md §2), and where they cross between
Claude's host and Neovim's (:class:`PathMap`)."""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote

from ._errors import ToolError

log = logging.getLogger(__name__)


def candidate_paths(path_or_uri: str) -> list[str]:
    """The paths a client may mean, in the order to try them: literal first, then decoded.

    ``file://`` URIs may or may not be percent-encoded, and plain paths may contain ``%``.
    ``~`` and relative paths are resolved in Neovim, against its home and cwd.
    """
    path = _strip_file_scheme(path_or_uri)
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


class OutsideMap(ToolError):
    """A path from Claude's host that is not inside a mapped folder (``serve --path-map``), or
    leads out of one through a symlink: refused, with the sentence a tool result shows."""


class PathMap:
    """Where a path on Claude's host is in Neovim's, and back: ``CLAUDE_SIDE=NEOVIM_SIDE``
    prefixes (``claude-nvim serve --path-map``), for Claude in a container or on another host.

    The longest prefix that holds a path wins; a prefix holds whole components only
    (``/srv/app`` holds ``/srv/app/x.py``, not ``/srv/apple``). Neovim's side may be any
    buffer-name prefix, such as ``scp://host//srv/app`` for netrw's buffers.

    A map is also a boundary (:attr:`confines`, the one place that decides): a Claude on
    another host reaches only the mapped folders. A path from Claude is normalised (``..``,
    ``.``, ``//``, ``file://`` and its percent-encoding) and must lie in a prefix; once in
    Neovim's terms, a local path's symlinks are resolved and it must still lie in the mapped
    local folder. Anything else raises :class:`OutsideMap`. Going back, a path outside the map
    is never sent: :meth:`to_claude` answers ``None`` and :meth:`to_claude_fields` drops what
    holds it. With no prefixes (Claudes on this machine) it is the identity, confines nothing
    and costs nothing. Every path that crosses goes through one of these methods, in one line
    (``ctx.paths`` in a tool, ``self.paths`` in a feature).
    """

    def __init__(self, pairs: Iterable[tuple[str, str]] = ()) -> None:
        self.pairs = [(_prefix(claude), _prefix(neovim)) for claude, neovim in pairs]
        """The (Claude's side, Neovim's side) prefixes, as given."""
        # Longest first: the first that holds a path is the one that wins.
        self._to_neovim = sorted(self.pairs, key=lambda pair: -len(pair[0]))
        self._to_claude = sorted(((n, c) for c, n in self.pairs), key=lambda pair: -len(pair[0]))
        self._real_roots: dict[str, str] = {}

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

    @property
    def confines(self) -> bool:
        """Whether Claude is confined to the mapped folders: the one decision. A map serves
        Claudes on another host or in a container; without one, Claudes are on this machine
        and reach what the user's Neovim does, as ever."""
        return bool(self.pairs)

    def __bool__(self) -> bool:
        return self.confines

    def __repr__(self) -> str:
        return f"PathMap({self.pairs!r})"

    # From Claude's host to Neovim's: checked, OutsideMap when not inside the map.

    def claude_path(self, path_or_uri: str) -> str:
        """Claude's ``path_or_uri`` as one normalised path of Claude's host, inside a mapped
        folder (``file://`` URIs as they are, not percent-decoded: see :meth:`candidates`);
        as given when the map confines nothing."""
        if not self.confines:
            return path_or_uri
        path = _strip_file_scheme(path_or_uri)
        normal = _normalised(path)
        if normal is None or self._holder(normal, self._to_neovim) is None:
            raise OutsideMap(_refusal(path_or_uri))
        return normal

    def to_neovim(self, path: str) -> str:
        """Where Claude's ``path`` is in Neovim. With a map: checked (normalised, in a mapped
        folder, no symlink leading out), else :class:`OutsideMap`."""
        if not self.confines:
            return path
        normal = self.claude_path(path)
        old, new = self._holder(normal, self._to_neovim) or ("", "")
        local = new + normal[len(old):] or "/"
        if not self._resolves_inside(local, new):
            raise OutsideMap(f"{path}: a symbolic link leads out of the folders mapped for Claude "
                             "(serve --path-map): refused")
        return local

    def candidates(self, path_or_uri: str) -> list[str]:
        """:func:`candidate_paths` of a path or URI from Claude, each where it is in Neovim.
        With a map, every one is checked (:meth:`to_neovim`): one outside refuses them all
        (``%2e%2e`` decodes to ``..``)."""
        found = candidate_paths(path_or_uri)
        if not self.confines:
            return found
        return list(dict.fromkeys(self.to_neovim(p) for p in found))

    # From Neovim to Claude's host: None (nothing is sent) when outside the map.

    def to_claude(self, path: str, *, resolve: bool = False) -> str | None:
        """Where Neovim's ``path`` (a buffer name) is on Claude's host; ``None`` when the map
        confines and it is outside it: then nothing is sent. Names in a listing are checked as
        names; with ``resolve`` (what carries a file's text, such as a selection) a symlink
        leading out of the map is outside too."""
        if not self.confines:
            return path
        normal = _normalised(path) if path.startswith("/") else path
        held = self._holder(normal, self._to_claude) if normal is not None else None
        if normal is None or held is None:
            log.debug("not sent to Claude: %s is outside the mapped folders", path)
            return None
        old, new = held
        rest = normal[len(old):]
        if "/../" in rest + "/" or (resolve and not self._resolves_inside(normal, old)):
            return None
        return new + rest or "/"

    def uri_to_claude(self, uri: str, *, resolve: bool = False) -> str | None:
        """A ``file://`` URI of Neovim's as Claude's host has it (``None``: outside the map, as
        :meth:`to_claude`); other URIs as they are."""
        if not self.confines or not uri.startswith("file://"):
            return uri
        path = self.to_claude(uri[len("file://"):], resolve=resolve)
        return None if path is None else file_url(path)

    def folders_to_claude(self, folders: Iterable[str]) -> list[str]:
        """Neovim's workspace folders as Claude's host has them: with a map, those inside it,
        and the mapped folders themselves when none is."""
        if not self.confines:
            return list(folders)
        mapped = [p for p in (self.to_claude(f) for f in folders) if p is not None]
        return mapped or [claude or "/" for claude, _ in self.pairs]

    def to_claude_fields(self, value: Any, *, resolve: bool = False) -> Any:
        """``value`` (a message or part of one: dicts, lists) with the paths of its
        :data:`PATH_KEYS` fields and the URIs of its :data:`URI_KEYS` fields on Claude's side.
        With a map, an object holding a path outside it is dropped: ``None`` in its place at
        the top, left out of a list (``resolve``: as :meth:`to_claude`)."""
        if not self.confines:
            return value
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                if key in PATH_KEYS and isinstance(item, str):
                    mapped = self.to_claude(item, resolve=resolve)
                elif key in URI_KEYS and isinstance(item, str):
                    mapped = self.uri_to_claude(item, resolve=resolve)
                else:
                    mapped = self.to_claude_fields(item, resolve=resolve)
                    if mapped is None and item is not None:
                        continue  # an object inside it is outside the map: left out
                if mapped is None and item is not None:
                    return None
                out[key] = mapped
            return out
        if isinstance(value, list):
            kept = ((self.to_claude_fields(item, resolve=resolve), item) for item in value)
            return [mapped for mapped, item in kept if mapped is not None or item is None]
        return value

    def _resolves_inside(self, local: str, folder: str) -> bool:
        """Whether ``local`` (in Neovim's terms, under the mapped ``folder``) still lies in
        ``folder`` once this host's symlinks are resolved. Buffer names that are not local paths
        (``scp://``) have no symlinks here. The folders' own real paths are found once."""
        if not local.startswith("/"):
            return True
        root = self._real_roots.get(folder)
        if root is None:
            root = self._real_roots[folder] = os.path.realpath(folder or "/").rstrip("/") + "/"
        return (os.path.realpath(local) + "/").startswith(root)

    def _holder(self, path: str, prefixes: list[tuple[str, str]]) -> tuple[str, str] | None:
        for old, new in prefixes:
            if path.startswith(old) and (len(path) == len(old) or path[len(old)] == "/"):
                return old, new
        return None


def _strip_file_scheme(path: str) -> str:
    if path.startswith("file://"):
        path = path[len("file://"):]
        if path.startswith("localhost/"):
            path = path[len("localhost"):]
    return path


def _normalised(path: str) -> str | None:
    """``path`` without ``.``, ``..`` and repeated slashes; ``None`` unless it is absolute
    (a relative path or ``~`` would be resolved against Neovim's cwd and home)."""
    if not path.startswith("/") or "\0" in path:
        return None
    normal = posixpath.normpath(path)
    return "/" + normal.lstrip("/")  # normpath keeps a leading "//"


def _refusal(path: str) -> str:
    shown = path if len(path) <= 300 else path[:300] + "..."
    return (f"{shown}: outside the folders mapped for Claude (serve --path-map): a Claude on "
            "another host reaches only those")


def _prefix(path: str) -> str:
    """A prefix as :class:`PathMap` compares it: without its trailing slash (``/`` is ``""``;
    ``scp://host//`` keeps the one that makes its paths absolute)."""
    return path[:-1] if path.endswith("/") else path
