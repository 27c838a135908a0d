"""Tool arguments checked against the tool's JSON Schema (draft-07 unless ``$schema`` says
otherwise), compiled once per tool by fastjsonschema; messages name the argument at fault.

Unknown argument keys pass unless the schema says ``additionalProperties: false``: new CLI
versions add some. Whatever the schema, arguments must be able to reach Neovim
(:func:`unsendable`): text that is text, and numbers within 64-bit integers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import fastjsonschema

Checker = Callable[[Any], "str | None"]
"""Returns a message naming the first problem, or ``None`` when the arguments fit."""


class SchemaError(ValueError):
    """An input schema that is not valid JSON Schema."""


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for name, kind in (("integer", int), ("number", float), ("string", str), ("array", list),
                       ("object", dict)):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _message(error: fastjsonschema.JsonSchemaValueException) -> str:
    name = (error.name or "data").removeprefix("data").lstrip(".")
    where = repr(name) if name else "arguments"
    rule, wanted, value = error.rule, error.rule_definition, error.value
    if rule == "type":
        names = [wanted] if isinstance(wanted, str) else list(wanted)
        return f"{where} must be of type {' or '.join(names)}, not {_describe(value)}"
    if rule == "required" and isinstance(value, dict):
        missing = next(key for key in wanted if key not in value)
        return f"missing required argument {missing!r}"
    if rule == "enum":
        return f"{where} must be one of {', '.join(repr(c) for c in wanted)}"
    if rule == "minimum":
        return f"{where} must be at least {wanted}"
    if rule == "maximum":
        return f"{where} must be at most {wanted}"
    return str(error.message).replace(str(error.name), where, 1)


def compile_checker(schema: Mapping[str, Any]) -> Checker:
    """Compile ``schema`` (about 1 ms); raises :class:`SchemaError` if it is not valid."""
    try:
        # use_default=False: checking never fills in defaults behind the handler's back.
        validate = fastjsonschema.compile(dict(schema), use_default=False)
    except Exception as exc:  # JsonSchemaDefinitionException, re.error for a bad pattern, ...
        raise SchemaError(f"{type(exc).__name__}: {exc}") from exc

    def check(arguments: Any) -> str | None:
        try:
            validate(arguments)
        except fastjsonschema.JsonSchemaValueException as error:
            return _message(error)
        return unsendable(arguments)

    return check


SMALLEST, LARGEST = -(2**63), 2**64 - 1
"""The integers msgpack carries to Neovim (beyond, packing fails: "OverflowError")."""


def unsendable(arguments: Any) -> str | None:
    """What in ``arguments`` (JSON values) cannot be sent to Neovim, naming it; ``None`` if
    nothing. A string must be UTF-8 text, but for the lone surrogates U+DC80..U+DCFF, which
    stand for the bytes of a non-UTF-8 file name (the server sends those names so, and takes
    them back: msgpack's ``surrogateescape``); any other lone surrogate ("\\ud800", from a
    JSON escape) is no text. A number must be within 64-bit integers (a float too: a tool
    taking an integer may be sent 2**70 as one). No recursion: arguments may nest deeply."""
    stack: list[tuple[str, Any]] = [("", arguments)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            if not value.isascii():  # isascii() is free; encoding costs ~2 ms per MB
                try:
                    value.encode("utf-8", "surrogateescape")
                except UnicodeEncodeError as exc:
                    return (f"{_name(where)} is not text: it holds a lone surrogate "
                            f"(U+{ord(value[exc.start]):04X})")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if not SMALLEST <= value <= LARGEST:
                return f"{_name(where)} is out of range (at most 64-bit integers)"
        elif isinstance(value, dict):
            for key, item in value.items():
                stack.append((f"{where}.{key}" if where else str(key), key))
                stack.append((f"{where}.{key}" if where else str(key), item))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item) for i, item in enumerate(value))
    return None


def _name(where: str) -> str:
    return repr(where) if where else "arguments"
