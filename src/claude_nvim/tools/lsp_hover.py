"""lspHover: the hover documentation (type, signature, docstring) at a position."""

from __future__ import annotations

from functools import partial

from .._tool import JSON, MODEL, Register, Tool, ToolContext, ToolResult
from ..hookspecs import hookimpl
from . import _lsp_tools as lsp

LUA = lsp.lua_module(r"""
-- MarkedString | MarkedString[] | MarkupContent -> markdown.
local function markdown(contents)
  if type(contents) == 'string' then return contents end
  if type(contents) ~= 'table' then return '' end
  if contents.kind ~= nil then return type(contents.value) == 'string' and contents.value or '' end
  if contents.language ~= nil then
    return '```' .. contents.language .. '\n' .. (contents.value or '') .. '\n```'
  end
  local parts = {}
  for _, part in ipairs(contents) do
    local text = markdown(part)
    if text ~= '' then parts[#parts + 1] = text end
  end
  return table.concat(parts, '\n\n')
end

function M.run(id, req)
  L.run(id, req, 'textDocument/hover', function(client, buf)
    return L.position_params(req, client, buf)
  end, function(answers, read, buf)
    local parts, range = {}, nil
    local path = api.nvim_buf_get_name(buf)
    for _, a in ipairs(answers) do
      if type(a.result) == 'table' then
        local text = vim.trim(markdown(a.result.contents))
        if text ~= '' then parts[#parts + 1] = text end
        if range == nil and type(a.result.range) == 'table' then
          range = L.range(a.result.range, a.client.offset_encoding or 'utf-16', path, read)
        end
      end
    end
    local contents, cut = L.cut(table.concat(parts, '\n\n---\n\n'), req.max_hover)
    return { contents = contents, range = range, truncated = cut or nil }
  end)
end
""")


async def lsp_hover(ctx: ToolContext, args: JSON,
                    limits: lsp.Limits = lsp.DEFAULT_LIMITS) -> ToolResult:
    return await lsp.run(ctx, lsp.file_request(ctx, args), limits)


def make_tool(limits: lsp.Limits = lsp.DEFAULT_LIMITS) -> Tool:
    """The tool, waiting and answering within ``limits``."""
    return Tool(
        name="lspHover",
        description=(
            "Hover information (type, signature, documentation) for the symbol at a position, "
            "answered by the language server Neovim has attached to the file. Give the file and "
            'a 0-based position (character in UTF-16 units). Answers {"contents": markdown, '
            '"range"?}; contents is "" when the server has nothing to say there.'
        ),
        input_schema=lsp.POSITION_SCHEMA,
        handler=partial(lsp_hover, limits=limits),
        exposure=MODEL,
        annotations={"title": "Hover (LSP)", **lsp.ANNOTATIONS_READ_ONLY},
        lua=LUA,
    )


TOOL = make_tool()


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
