"""lspReferences: every reference to the symbol at a position, by the user's language servers."""

from __future__ import annotations

from functools import partial

from .._tool import JSON, MODEL, Register, Tool, ToolContext, ToolResult
from ..hookspecs import hookimpl
from . import _lsp_tools as lsp

LUA = lsp.lua_module(r"""
function M.run(id, req)
  L.run(id, req, 'textDocument/references', function(client, buf)
    local params = L.position_params(req, client, buf)
    params.context = { includeDeclaration = req.includeDeclaration }
    return params
  end, function(answers, read)
    return L.locations(answers, read, req.max_locations)
  end)
end
""")


async def lsp_references(ctx: ToolContext, args: JSON,
                         limits: lsp.Limits = lsp.DEFAULT_LIMITS) -> ToolResult:
    request = lsp.file_request(ctx, args)
    request["includeDeclaration"] = args.get("includeDeclaration", True)
    return await lsp.run(ctx, request, limits)


def make_tool(limits: lsp.Limits = lsp.DEFAULT_LIMITS) -> Tool:
    """The tool, waiting and answering within ``limits``."""
    return Tool(
        name="lspReferences",
        description=(
            "Find all references to the symbol at a position, answered by the language server "
            "Neovim has attached to the file. Give the file and a 0-based position (character in "
            'UTF-16 units). Answers {"locations":[{"uri","range","text"}]}, sorted, at most '
            f'{limits.max_locations} (then "truncated":true and "total").'
        ),
        input_schema={
            **lsp.POSITION_SCHEMA,
            "properties": {
                **lsp.POSITION_SCHEMA["properties"],
                "includeDeclaration": {
                    "type": "boolean",
                    "description": "Include the declaration itself (default true).",
                },
            },
        },
        handler=partial(lsp_references, limits=limits),
        exposure=MODEL,
        annotations={"title": "Find references (LSP)", **lsp.ANNOTATIONS_READ_ONLY},
        lua=LUA,
    )


TOOL = make_tool()


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
