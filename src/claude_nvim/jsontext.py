"""JSON text in and out: orjson, and the standard library for the few things orjson refuses.

orjson encodes a small message in 0.4 µs against 5 µs, and a 100,000-line selection in 10 ms
against 24 ms; every tool result is encoded twice (its JSON text, then the message).
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def dumps(value: Any) -> bytes:
    """``value`` as compact JSON text in UTF-8."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:
        # Text from non-UTF-8 buffers holds lone surrogates, which UTF-8 cannot carry:
        # send them as \u escapes. (Also integers past 64 bits.)
        return json.dumps(value, separators=(",", ":")).encode("ascii")


def loads(text: str | bytes) -> Any:
    """The value of JSON text; raises ``ValueError`` (or ``RecursionError``) when it is not."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        # The standard library takes escaped lone surrogates, and says better what is wrong.
        return json.loads(text)
