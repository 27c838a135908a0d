"""lspDefinition: where the symbol at a position is defined, by the user's language servers."""

from __future__ import annotations

from functools import partial

from .._tool import JSON, MODEL, Register, Tool, ToolContext, ToolResult
from ..hookspecs import hookimpl
from . import _lsp_tools as lsp

LUA = lsp.lua_module(r"""
function M.run(id, req)
  L.run(id, req, 'textDocument/definition', function(client, buf)
    return L.position_params(req, client, buf)
  end, function(answers, read)
    return L.locations(answers, read, req.max_locations)
  end)
end
""")


async def lsp_definition(ctx: ToolContext, args: JSON,
                         limits: lsp.Limits = lsp.DEFAULT_LIMITS) -> ToolResult:
    return await lsp.run(ctx, lsp.file_request(ctx, args), limits)


def make_tool(limits: lsp.Limits = lsp.DEFAULT_LIMITS) -> Tool:
    """The tool, waiting and answering within ``limits``."""
    return Tool(
        name="lspDefinition",
        description=(
            "Go to definition, answered by the language server Neovim has attached to the file. "
            "Give the file and a 0-based position (character in UTF-16 units). Answers "
            '{"locations":[{"uri","range","text"}]}: file:// URIs, 0-based ranges, and the '
            "source line at each location."
        ),
        input_schema=lsp.POSITION_SCHEMA,
        handler=partial(lsp_definition, limits=limits),
        exposure=MODEL,
        annotations={"title": "Go to definition (LSP)", **lsp.ANNOTATIONS_READ_ONLY},
        lua=LUA,
    )


TOOL = make_tool()


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
