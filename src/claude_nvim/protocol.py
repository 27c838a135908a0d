"""Wire facts the server and its clients (the relay, the lock checks) share, without the server."""

from __future__ import annotations

AUTH_HEADER = b"x-claude-code-ide-authorization"
MODEL_PATH = "/mcp"
"""The model endpoint's URL path; every other path is the IDE socket (protocol doc §0)."""
MAX_MESSAGE_BYTES = 64 * 2**20
