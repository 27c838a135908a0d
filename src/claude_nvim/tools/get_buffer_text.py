"""getBufferText: the current text of an open buffer, saved or not, or a range of its lines."""

from __future__ import annotations

from functools import partial

from .._nvim.lua import read_lua
from .._paths import OutsideMap
from .._tool import JSON, MODEL, Register, Tool, ToolContext, ToolError, ToolResult
from ..hookspecs import hookimpl
from . import lua_answer
from ._lsp_tools import MAX_INDEX

LUA = read_lua(__package__, "get_buffer_text.lua")
ORDER = ("uri", "startLine", "endLine", "totalLines", "isDirty", "truncated", "text")


async def get_buffer_text(ctx: ToolContext, args: JSON, *, max_lines: int,
                          max_bytes: int) -> ToolResult:
    path = args["filePath"]
    if not path.strip():
        raise ToolError("Invalid arguments: 'filePath' must not be empty")
    request = {k: args[k] for k in ("startLine", "endLine") if k in args}
    answer = await ctx.call_lua("read", ctx.paths.candidates(path),
                                {**request, "max_lines": max_lines, "max_bytes": max_bytes})
    if "error" not in answer:
        answer = ctx.paths.to_claude_fields(answer)
        if answer is None:  # found through a buffer named outside the map
            raise OutsideMap(path + ": its buffer is outside the mapped folders")
    return lua_answer(answer, ORDER)


def make_tool(*, max_lines: int = 2000, max_bytes: int = 100_000) -> Tool:
    """The tool, answering at most ``max_lines`` lines and ``max_bytes`` bytes a call (a
    smaller one for tests: ``make_tool(max_lines=3)``)."""
    return Tool(
        name="getBufferText",
        description=(
            "Read the current text of a file open in Neovim, including unsaved changes, or of "
            "its lines startLine..endLine (0-based, inclusive). Answers "
            '{"uri","text","startLine","endLine","totalLines","isDirty"}; lines are joined with '
            f"\\n. At most {max_lines} lines and {max_bytes} bytes per call: then "
            '"truncated":true, and endLine says where it stopped; read on from there. '
            "A file not open in Neovim is an error (read it from disk instead)."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "filePath": {
                    "type": "string",
                    "description": (
                        "An absolute path, a path relative to Neovim's cwd, or a file:// URI."
                    ),
                },
                "startLine": {"type": "integer", "minimum": 0, "maximum": MAX_INDEX,
                              "description": "First line, 0-based (default 0)."},
                "endLine": {"type": "integer", "minimum": 0, "maximum": MAX_INDEX,
                            "description": "Last line, 0-based, inclusive (default: the last)."},
            },
            "required": ["filePath"],
        },
        handler=partial(get_buffer_text, max_lines=max_lines, max_bytes=max_bytes),
        exposure=MODEL,
        annotations={"title": "Get buffer text", "readOnlyHint": True, "openWorldHint": False},
        lua=LUA,
    )


TOOL = make_tool()


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
