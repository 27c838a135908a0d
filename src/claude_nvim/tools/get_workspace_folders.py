"""getWorkspaceFolders: Neovim's cwd and its language servers' workspace folders."""

from __future__ import annotations

import os

from .._nvim.lua import CORE
from .._paths import file_url
from .._tool import BOTH, JSON, Register, Tool, ToolContext, ToolResult, json_result
from ..hookspecs import hookimpl

# The Neovim half is the core module's `workspace_folders`, the same list the lock file holds.


async def get_workspace_folders(ctx: ToolContext, args: JSON) -> ToolResult:
    paths = ctx.paths.folders_to_claude(await ctx.editor.call_lua(CORE, "workspace_folders"))
    folders = [
        {"name": os.path.basename(p) or p, "uri": file_url(p), "path": p, "index": i}
        for i, p in enumerate(paths)
    ]
    return json_result({"success": True, "folders": folders,
                        "rootPath": paths[0] if paths else None})


TOOL = Tool(
    name="getWorkspaceFolders",
    description="Get the workspace folders open in Neovim: its working directory and the "
                "root folders of its language servers.",
    input_schema={"type": "object", "properties": {}},
    handler=get_workspace_folders,
    exposure=BOTH,
    annotations={"title": "Get workspace folders", "readOnlyHint": True,
                 "openWorldHint": False},
)


@hookimpl
def claude_nvim_register_tools(register: Register) -> None:
    register(TOOL)
