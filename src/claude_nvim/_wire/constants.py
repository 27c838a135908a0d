"""Wire facts the server and its clients (the relay, the lock checks) share, without the server.

Besides the CLI's protocol, one addition of ours: a claude-nvim server proves it holds a token
without anyone sending it. An upgrade request with a :data:`CHALLENGE_HEADER` (and without the
token) is refused 401 as any other, and the refusal carries :data:`PROOF_HEADER`:
``proof(token, challenge)``, which only a holder of the token can compute.
"""

from __future__ import annotations

import hashlib
import hmac
import json

AUTH_HEADER = b"x-claude-code-ide-authorization"
MODEL_PATH = "/mcp"
"""The model endpoint's URL path; every other path is the IDE socket (docs/protocol.md §8)."""
MAX_MESSAGE_BYTES = 64 * 2**20
CHALLENGE_HEADER = b"x-claude-nvim-challenge"
PROOF_HEADER = b"x-claude-nvim-proof"
FILE_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
"""Claude Code's tools that write a file (MultiEdit is gone from claude 2.1.331; naming it is
harmless): the hooks' matcher and the turns of the review."""


def proof(token: str, challenge: bytes) -> bytes:
    """HMAC-SHA256 of ``challenge`` keyed with ``token``, in hex; labelled, so that it can
    serve as nothing else."""
    return hmac.new(token.encode(), b"claude-nvim proof:" + challenge,
                    hashlib.sha256).hexdigest().encode()


def model_endpoint_config(port: int, token: str) -> str:
    """``claude --mcp-config`` JSON for the model endpoint: its tools are ``mcp__nvim__*``."""
    return json.dumps({"mcpServers": {"nvim": {
        "type": "ws", "url": f"ws://127.0.0.1:{port}{MODEL_PATH}",
        "headers": {"X-Claude-Code-Ide-Authorization": token},
    }}})
