"""openFile: open a file in Neovim, optionally selecting lines or text, or load it quietly."""

from __future__ import annotations

from typing import Any

from .._nvim.lua import read_lua
from .._paths import OutsideMap
from .._tool import (
    IDE,
    JSON,
    Register,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    json_result,
    text_result,
)
from ..hookspecs import hookimpl

LUA = read_lua(__package__, "open_file.lua")


async def open_file(ctx: ToolContext, args: JSON) -> ToolResult:
    options: dict[str, Any] = {
        "preview": bool(args.get("preview", False)),
        "makeFrontmost": bool(args.get("makeFrontmost", True)),
        "selectToEndOfLine": bool(args.get("selectToEndOfLine", False)),
    }
    for key in ("startLine", "endLine"):
        if args.get(key) is not None:
            options[key] = int(args[key])
    for key in ("startText", "endText"):
        if args.get(key):  # an empty string means absent (the CLI sends "")
            options[key] = args[key]
    opened = await ctx.call_lua("open", ctx.paths.candidates(args["filePath"]), options)
    if "error" in opened:
        raise ToolError(opened["error"])
    if "json" in opened:
        answer = ctx.paths.to_claude_fields(opened["json"])
        if answer is None:  # its buffer is named outside the map
            raise OutsideMap(args["filePath"] + ": its buffer is outside the mapped folders")
        return json_result(answer)
    return text_result(opened["text"])


TOOL = Tool(
    name="openFile",
    description=(
        "Open a file in Neovim and optionally select a range: lines (startLine/endLine, 1-based) "
        "or text (from startText to endText). With makeFrontmost false, load it without moving "
        "the user's focus."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "filePath": {"type": "string", "description": "Path or file:// URI of the file"},
            "preview": {"type": "boolean", "description": "Open in the preview window"},
            "startLine": {"type": "integer", "minimum": 1, "description": "First line, 1-based"},
            "endLine": {"type": "integer", "minimum": 1, "description": "Last line, 1-based"},
            "startText": {"type": "string", "description": "Select from this text"},
            "endText": {"type": "string", "description": "Select up to the end of this text"},
            "selectToEndOfLine": {"type": "boolean",
                                  "description": "Extend the selection to the end of its line"},
            "makeFrontmost": {"type": "boolean",
                              "description": "Show and focus the file (default true)"},
        },
        "required": ["filePath"],
    },
    handler=open_file,
    exposure=IDE,
    annotations={"title": "Open file", "readOnlyHint": False, "idempotentHint": True,
                 "openWorldHint": False},
    lua=LUA,
)


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
