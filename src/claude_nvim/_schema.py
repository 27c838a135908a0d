"""Tool arguments checked against the tool's JSON Schema (draft-07 unless ``$schema`` says
otherwise), compiled once per tool by fastjsonschema; messages name the argument at fault.

Unknown argument keys pass unless the schema says ``additionalProperties: false``: new CLI
versions add some.
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
        return None

    return check
