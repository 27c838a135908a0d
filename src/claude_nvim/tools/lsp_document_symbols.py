"""lspDocumentSymbols: the symbols (classes, functions, ...) of one file, flattened."""

from __future__ import annotations

from functools import partial

from .._tool import JSON, MODEL, Register, Tool, ToolContext, ToolResult
from ..hookspecs import hookimpl
from . import _lsp_tools as lsp

LUA = lsp.lua_module(r"""
function M.run(id, req)
  L.run(id, req, 'textDocument/documentSymbol', function(client, buf)
    return { textDocument = { uri = vim.uri_from_bufnr(buf) } }
  end, function(answers, read, buf)
    local path = api.nvim_buf_get_name(buf)
    local answer = L.symbols(answers, read, req.max_symbols, path)
    answer.uri = core.file_url(path)
    return answer
  end)
end
""")


async def lsp_document_symbols(ctx: ToolContext, args: JSON,
                               limits: lsp.Limits = lsp.DEFAULT_LIMITS) -> ToolResult:
    return await lsp.run(ctx, lsp.file_request(ctx, args), limits)


def make_tool(limits: lsp.Limits = lsp.DEFAULT_LIMITS) -> Tool:
    """The tool, waiting and answering within ``limits``."""
    return Tool(
        name="lspDocumentSymbols",
        description=(
            "List the symbols of a file (classes, functions, methods, variables, ...), answered "
            "by the language server Neovim has attached to it. Answers "
            '{"uri","symbols":[{"name","kind","range","containerName"?,"detail"?}]}, flattened '
            f'in the server\'s order, at most {limits.max_symbols} (then "truncated":true and '
            '"total"); 0-based ranges, characters in UTF-16 units.'
        ),
        input_schema={
            "type": "object",
            "properties": {"filePath": lsp.FILE_PATH},
            "required": ["filePath"],
        },
        handler=partial(lsp_document_symbols, limits=limits),
        exposure=MODEL,
        annotations={"title": "Document symbols (LSP)", **lsp.ANNOTATIONS_READ_ONLY},
        lua=LUA,
    )


TOOL = make_tool()


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
