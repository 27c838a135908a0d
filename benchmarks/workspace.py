"""The editor states the benchmark measures: files written into a workspace, and the Lua
chunks that build and inspect them in Neovim."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class State:
    name: str
    buffers: int  # files loaded in Neovim, the selected one included
    selected_lines: int  # the selected file's length; a linewise Visual selection covers it all
    other_lines: int  # length of every other file
    diagnostics: int  # spread evenly over all buffers


STATES = {
    "small": State("small", 1, 1, 200, 0),
    "medium": State("medium", 100, 1_000, 200, 1_000),
    "large": State("large", 1_000, 100_000, 200, 50_000),
}
QUICK_STATES = {
    "small": STATES["small"],
    "medium": STATES["medium"],
    # The 100,000-line selection stays (the targets are about it); fewer other buffers.
    "large": State("large", 100, 100_000, 200, 50_000),
}


def code_line(i: int) -> str:
    """Line ``i`` of a plausible Python file (a class every 200 lines, a method every 20): real
    code matters, Vim's Python syntax synchronises on ``def``/``class`` lines."""
    if i % 200 == 0:
        return f"class Component{i // 200}(Base):"
    if i % 20 == 1:
        return f"    def method_{i}(self, item: Item, offset: int = 0, scale: float = 1.0):"
    return f"        value_{i % 20} = compute(item, offset={i * 7 % 1000}, scale=0.{i % 10})  # {i}"


def write_file(path: Path, lines: int) -> None:
    path.write_text("".join(code_line(i) + "\n" for i in range(lines)), encoding="utf-8")


def make_workspace(root: Path, state: State) -> tuple[Path, list[Path]]:
    """Files for ``state``: the selected file first. Small state: a 200-line file."""
    selected = root / "selected.py"
    write_file(selected, max(state.selected_lines, state.other_lines))
    paths = [selected]
    for i in range(1, state.buffers):
        path = root / f"module_{i:04d}.py"
        write_file(path, state.other_lines)
        paths.append(path)
    return selected, paths


BUILD_LUA = r"""
local paths, ndiag = ...
local api = vim.api
local ns = api.nvim_create_namespace('claude_nvim_bench')
local first = api.nvim_get_current_buf()
local bufs = {}
for i, p in ipairs(paths) do
  local b = vim.fn.bufadd(p)
  vim.fn.bufload(b)
  vim.bo[b].buflisted = true
  bufs[i] = b
end
local per, extra = math.floor(ndiag / #bufs), ndiag % #bufs
for i, b in ipairs(bufs) do
  local count = per + (i <= extra and 1 or 0)
  if count > 0 then
    local nlines = api.nvim_buf_line_count(b)
    local diags = {}
    for k = 1, count do
      local lnum = math.floor((k - 1) * nlines / count)
      diags[k] = {
        lnum = lnum, col = 4, end_lnum = lnum, end_col = 24, severity = (k % 4) + 1,
        message = 'E' .. (500 + k % 50) .. ' bench diagnostic ' .. k .. ': line too long (88 > 79)',
        source = 'bench', code = 'E' .. (500 + k % 50),
      }
    end
    vim.diagnostic.set(ns, b, diags)
  end
end
api.nvim_set_current_buf(bufs[1])
if first ~= bufs[1] and api.nvim_buf_is_valid(first) and api.nvim_buf_get_name(first) == '' then
  api.nvim_buf_delete(first, { force = true })
end
return { #vim.diagnostic.get(nil), #api.nvim_list_bufs() }
"""

DIFF_VISIBLE_LUA = r"""
for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
  local buf = vim.api.nvim_win_get_buf(win)
  if vim.wo[win].diff and vim.b[buf].claude_nvim_proposal then return true end
end
return false
"""

ACCEPT_LUA = r"""
for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
  if vim.b[vim.api.nvim_win_get_buf(win)].claude_nvim_proposal then
    vim.api.nvim_set_current_win(win)
    vim.cmd('write')
    return true
  end
end
return false
"""


# Whether the buffer of file PATH has the review's signs (a turn was recorded and marked).
SIGNED_LUA = r"""
local ns = vim.api.nvim_get_namespaces().claude_nvim_review_signs
return ns ~= nil and #vim.api.nvim_buf_get_extmarks(vim.fn.bufnr(PATH), ns, 0, -1, {}) > 0
"""

# When each buffer last reloaded (FileChangedShellPost follows every reload), Neovim's clock.
RECORD_RELOADS_LUA = r"""
_G.claude_nvim_bench_reloads = {}
vim.api.nvim_create_autocmd('FileChangedShellPost', { callback = function(ev)
  _G.claude_nvim_bench_reloads[ev.buf] = (vim.uv or vim.loop).hrtime()
end })
"""

# When the buffer of file `path` reloaded, if its last line is `last` by now; else false.
RELOADED_LUA = r"""
local path, last = ...
local buf = vim.fn.bufnr(path)
local lines = vim.api.nvim_buf_get_lines(buf, -2, -1, false)
return lines[1] == last and _G.claude_nvim_bench_reloads[buf] or false
"""


# ---------------------------------------------------------------------------------------------
# Statistics


