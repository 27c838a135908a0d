"""A small JSON Schema checker for tool arguments.

It covers what tool input schemas use: ``type``, ``properties``, ``required``, ``enum``,
``items``, ``minimum``/``maximum`` and ``anyOf``. Unknown argument keys are ignored on
purpose, because new CLI versions add some.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_TYPE_NAMES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
    "number": (int, float),
    "integer": (int,),
}


def _is_type(value: Any, name: str) -> bool:
    if name in ("number", "integer") and isinstance(value, bool):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPE_NAMES.get(name, object))


def _describe(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _is_type(value, name):
            return name
    return type(value).__name__


def validate(value: Any, schema: Mapping[str, Any], where: str = "arguments") -> str | None:
    """Return a message naming the first problem, or ``None`` when ``value`` fits."""
    expected = schema.get("type")
    if expected is not None and not (_is_type(value, expected) if isinstance(expected, str)
                                     else any(_is_type(value, n) for n in expected)):
        names = [expected] if isinstance(expected, str) else list(expected)
        return f"{where} must be of type {' or '.join(names)}, not {_describe(value)}"
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(repr(c) for c in schema["enum"])
        return f"{where} must be one of {choices}"
    if "anyOf" in schema and all(validate(value, s, where) for s in schema["anyOf"]):
        return f"{where} does not match any allowed form"
    if _is_type(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where} must be at least {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where} must be at most {schema['maximum']}"
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                return f"missing required argument {key!r}"
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                problem = validate(value[key], sub, repr(key))
                if problem:
                    return problem
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problem = validate(item, schema["items"], f"{where}[{i}]")
            if problem:
                return problem
    return None
