"""getDiagnostics: Neovim's diagnostics (LSP and others) for one file or every open file."""

from __future__ import annotations

import json

from .._nvim.lua import read_lua
from .._paths import PathMap
from .._tool import BOTH, JSON, Register, Tool, ToolContext, ToolResult, text_result
from ..hookspecs import hookimpl

SLICE_MS = 10
"""How long one call may hold Neovim while collecting every file's diagnostics."""

LUA = read_lua(__package__, "get_diagnostics.lua")


async def get_diagnostics(ctx: ToolContext, args: JSON) -> ToolResult:
    uri = args.get("uri")
    if uri:
        # The CLI only trusts an answer whose uri is exactly the one it sent.
        return text_result("[" + await ctx.call_lua("for_file", uri, ctx.paths.candidates(uri))
                           + "]")
    async with ctx.big_read():  # it may be megabytes
        part = await ctx.call_lua("all", 1, SLICE_MS)
        files: list[str] = part["files"]
        while part.get("next") is not None:  # a slice of the buffers per call: see M.all
            part = await ctx.call_lua("all", part["next"], SLICE_MS)
            files += part["files"]
        if ctx.paths.confines:  # files outside the mapped folders are left out
            files = [f for f in (_uri_to_claude(ctx.paths, file) for file in files) if f]
        return text_result("[" + ",".join(files) + "]")


_URI_START = len('{"uri":')


def _uri_to_claude(paths: PathMap, file: str) -> str | None:
    """One file's JSON from Lua (``{"uri":"file://...","diagnostics":[...]}``) with its URI on
    Claude's side (``None``: outside the map): only that string is decoded, not the
    diagnostics after it."""
    uri, end = _DECODER.raw_decode(file, _URI_START)
    mapped = paths.uri_to_claude(uri)
    if mapped is None:
        return None
    return file[:_URI_START] + json.dumps(mapped, ensure_ascii=False) + file[end:]


_DECODER = json.JSONDecoder()


TOOL = Tool(
    name="getDiagnostics",
    description=(
        "Get language diagnostics (errors, warnings, hints) from Neovim. With `uri`, for that "
        "file only; without it, for every open file that has any."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "uri": {
                "type": "string",
                "description": "A file:// URI or path; omit it for all open files.",
            }
        },
    },
    handler=get_diagnostics,
    exposure=BOTH,
    annotations={"title": "Get diagnostics", "readOnlyHint": True, "openWorldHint": False},
    lua=LUA,
)


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
