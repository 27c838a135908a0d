"""JSON-RPC 2.0 messages as MCP sends them, without I/O: reading one, and the shapes of an
error response and a notification."""

from __future__ import annotations

from typing import Any

from . import jsontext
from .jsontext import JSON as JSON

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INTERNAL_ERROR = -32700, -32600, -32601, -32603


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def error_response(request_id: Any, code: int, message: str) -> JSON:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def notification(method: str, params: JSON) -> JSON:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def read_message(raw: str) -> Any:
    """The value of one incoming message, its ids exact (raises as :func:`jsontext.loads`)."""
    message = jsontext.loads(raw)
    # orjson reads an integer past 64 bits as a float; an id must come back as sent, and a
    # cancellation name the call it was sent for. (Both are rare: read those again, exactly.)
    if isinstance(message, dict) and (type(message.get("id")) is float or
                                      message.get("method") == "notifications/cancelled"):
        return jsontext.loads_exact(raw)
    return message


def valid_id(value: Any) -> bool:
    """Whether ``value`` may be a request's id: null, a string or a number."""
    return value is None or isinstance(value, str) or (
        isinstance(value, (int, float)) and not isinstance(value, bool))


def hashable_id(value: Any) -> Any:
    """``value`` as a key of the requests in flight: ``None`` when it cannot be an id."""
    return value if valid_id(value) else None
