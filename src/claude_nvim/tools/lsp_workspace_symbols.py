"""lspWorkspaceSymbols: symbols matching a query across the project, by the language servers."""

from __future__ import annotations

from functools import partial

from .._tool import JSON, MODEL, Register, Tool, ToolContext, ToolResult
from ..hookspecs import hookimpl
from . import _lsp_tools as lsp

LUA = lsp.lua_module(r"""
local METHOD = 'workspace/symbol'

function M.run(id, req)
  local params = { query = req.query }
  local function convert(answers, read) return L.symbols(answers, read, req.max_symbols, nil) end
  if req.candidates then
    return L.run(id, req, METHOD, function() return params end, convert)
  end
  -- No file: every language server running in Neovim that can answer.
  L.begin(id, 'asking the language servers')
  L.guard(id, function()
    local clients = L.ready(nil, METHOD)
    if #clients == 0 then return L.fail(id, L.no_client(nil, METHOD)) end
    L.send(id, nil, clients, METHOD, params, convert)
  end)()
end
""")


async def lsp_workspace_symbols(ctx: ToolContext, args: JSON,
                                limits: lsp.Limits = lsp.DEFAULT_LIMITS) -> ToolResult:
    request = lsp.file_request(ctx, args) if "filePath" in args else {}
    request["query"] = args["query"]
    return await lsp.run(ctx, request, limits)


def make_tool(limits: lsp.Limits = lsp.DEFAULT_LIMITS) -> Tool:
    """The tool, waiting and answering within ``limits``."""
    return Tool(
        name="lspWorkspaceSymbols",
        description=(
            "Search the project's symbols by name, answered by the language servers running in "
            "Neovim (with `filePath`: only those attached to that file). Answers "
            '{"symbols":[{"name","kind","uri","range"?,"containerName"?}]}, at most '
            f'{limits.max_symbols} (then "truncated":true and "total"). Not every server supports '
            "this."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "Text to match symbol names against (servers match fuzzily).",
                },
                "filePath": lsp.FILE_PATH,
            },
            "required": ["query"],
        },
        handler=partial(lsp_workspace_symbols, limits=limits),
        exposure=MODEL,
        annotations={"title": "Workspace symbols (LSP)", **lsp.ANNOTATIONS_READ_ONLY},
        lua=LUA,
    )


TOOL = make_tool()


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
