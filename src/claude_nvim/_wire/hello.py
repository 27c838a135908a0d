"""What a client says first, answered one way by the server and by its early answers
(:mod:`.early`): who may upgrade, to which endpoint, and MCP's ``initialize``. No I/O, and
nothing heavy to import: the early answers run before the server has loaded."""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence
from typing import Any

from .. import __version__
from .constants import AUTH_HEADER, MODEL_PATH

PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


def refusal(headers: Sequence[tuple[bytes, bytes]], token: str) -> tuple[int, bytes] | None:
    """The HTTP status and body to refuse an upgrade request with, or None to let it in."""
    sent = None
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"origin":
            # Browsers always send Origin; the CLI never does. No web page gets in.
            return 403, b"Forbidden: browser requests are not accepted"
        if lowered == AUTH_HEADER:
            sent = value
    if sent is None or not hmac.compare_digest(sent, token.encode()):
        return 401, b"Unauthorized"
    return None


def endpoint(path: str) -> str:
    """``model`` for the model endpoint's path, ``ide`` for every other."""
    return "model" if path.split("?")[0].rstrip("/") == MODEL_PATH else "ide"


def subprotocol(proposed: Sequence[str]) -> str | None:
    """The subprotocol the server answers with: ``mcp`` when proposed."""
    return "mcp" if "mcp" in proposed else None


def initialize_result(params: Mapping[str, Any]) -> dict[str, Any]:
    """The result of MCP's ``initialize`` with these ``params``: the client's protocol
    version when this server speaks it, else the oldest it speaks."""
    version = params.get("protocolVersion")
    if version not in PROTOCOL_VERSIONS:
        version = PROTOCOL_VERSIONS[0]
    return {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "claude-nvim", "version": __version__},
    }
