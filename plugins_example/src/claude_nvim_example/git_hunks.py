"""gitHunks: where a buffer's current text (unsaved edits included) differs from git's HEAD."""

from __future__ import annotations

import difflib
import os
from typing import Any

import trio

import claude_nvim

LUA = r"""
local api = vim.api
local core = package.loaded['claude_nvim.core']
local M = {}

-- The buffer's name and lines; Python asks git and computes the hunks, off Neovim's loop.
function M.read(path)
  local buf = path == vim.NIL and api.nvim_get_current_buf() or core.find_buffer({ path })
  if buf == nil or api.nvim_buf_get_name(buf) == '' then return vim.NIL end
  return { api.nvim_buf_get_name(buf), api.nvim_buf_get_lines(buf, 0, -1, false) }
end

return M
"""


async def git_hunks(ctx: claude_nvim.ToolContext, args: dict[str, Any]) -> claude_nvim.ToolResult:
    found = await ctx.call_lua("read", args.get("filePath"))
    if found is None:
        where = args.get("filePath", "the current window")
        raise claude_nvim.ToolError(f"No file buffer for {where}")
    path, lines = found
    directory, name = os.path.split(path)
    shown = await trio.run_process(["git", "-C", directory, "show", f"HEAD:./{name}"],
                                   capture_stdout=True, capture_stderr=True, check=False)
    if shown.returncode != 0:
        return claude_nvim.json_result({"filePath": path, "tracked": False, "hunks": []})
    head = shown.stdout.decode("utf-8", "replace").splitlines()
    hunks = []
    matcher = difflib.SequenceMatcher(a=head, b=lines, autojunk=False)
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            continue
        kind = {"insert": "add", "delete": "delete", "replace": "change"}[tag]
        hunks.append({"type": kind, "oldStart": a0, "oldLines": a1 - a0,
                      "newStart": b0, "newLines": b1 - b0})
    return claude_nvim.json_result({"filePath": path, "tracked": True, "hunks": hunks})


TOOL = claude_nvim.Tool(
    name="gitHunks",
    description=(
        "List where a file's text in Neovim (unsaved edits included) differs from git HEAD: "
        "added, deleted and changed line ranges, 0-based. Without filePath: the current buffer."
    ),
    input_schema={
        "type": "object",
        "properties": {"filePath": {"type": "string", "description": "An open file's path"}},
    },
    handler=git_hunks,
    annotations={"title": "Git hunks", "readOnlyHint": True, "openWorldHint": False},
    lua=LUA,
)


@claude_nvim.hookimpl
def claude_nvim_register_tools(register: claude_nvim.Register) -> None:
    register(TOOL)
