"""Paths and URIs as clients send them (docs/protocol.md §2)."""

from __future__ import annotations

from urllib.parse import unquote


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
