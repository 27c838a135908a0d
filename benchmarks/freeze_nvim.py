"""What Claude's names, turns and hooks cost Neovim (issue 27, Neovim's side).

* titles: one refresh tick of the Claudes' names (``claudes.refresh``, every second while a
  Claude runs) and one draw of the Claude window's bar (``claudes.bar``), with one Claude whose
  title is 10,000 characters and with 50 Claudes of 1,000-character titles; a new title each
  tick (claude's spinner turns), so nothing is served from a cache. Measured inside Neovim.
* turn: a turn that wrote 600 files ends (Stop) while Neovim has 200 buffers loaded (50 of them
  the turn's): Neovim's longest answer to a freeze probe (``nvim_eval("1")`` in a loop, its own
  process) from the Stop until the signs are in the 50 buffers; the server in this process,
  its hooks run as claude runs them (tests/helpers.HookedClaude).
* flood: the states of a hidden Claude alternate between waiting and done, 3,600 a second (as
  many as the hook flood of the issue made messages), sent through the server's Lua entry the
  hooks use (``claude_nvim.hooks.update``, as RPC notifications) for 5 s, the plugin loaded and
  a UI attached: the notices the user got, Neovim's CPU time and its longest answer to the
  probe meanwhile (until it has handled them all; the probe's own round trips count in the
  CPU); and the same without the plugin (the server's Lua alone).

    .venv/bin/python benchmarks/freeze_nvim.py [--only titles,turn,flood] [--ticks N]

Before and after: run it once more on another checkout's code, e.g. the base commit's in a
``git worktree`` at DIR: ``PYTHONPATH=DIR/src .venv/bin/python benchmarks/freeze_nvim.py
--root DIR`` (the server's Python and Lua from DIR/src, the plugin's Lua from DIR).
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trio

import claude_nvim
from claude_nvim._nvim import editor_for
from claude_nvim._nvim.editor import Editor
from claude_nvim._nvim.headless import headless_nvim
from claude_nvim.testing import mcp_client, running_app

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from bench import Probe, ProcWatch  # noqa: E402

from helpers import HookedClaude, published_settings  # noqa: E402

NVIM_ARGS = ("--clean", "--cmd", "let g:loaded_python3_provider = 0")

# Fake Claudes for claudes.lua (terminal.list replaced): `count` buffers whose terminal titles
# are `length` characters, one of them in a window of its own (the Claude window); then `ticks`
# refresh ticks, each with the spinner turned (and with `renamed`, a new name in each title),
# and `ticks` draws of the bar. Milliseconds.
TITLES_LUA = """
local root, count, length, ticks, renamed = ...
vim.opt.rtp:prepend(root)
local claudes = require('claude_nvim.claudes')
local terminal = require('claude_nvim.terminal')
local fake = {}
for i = 1, count do
  fake[i] = { n = i, buf = vim.api.nvim_create_buf(true, true), job = 1, started = os.time() }
end
terminal.list = function() return fake end
vim.cmd('vsplit')
vim.api.nvim_win_set_buf(0, fake[1].buf)
local win = vim.api.nvim_get_current_win()
local SPIN = { '✢', '✳', '✶', '✻', '✽' }
local words = string.rep('fix the parser ', math.ceil(length / 15))
local hr = (vim.uv or vim.loop).hrtime
local refresh, bar = {}, {}
for t = 1, ticks do
  for i, claude in ipairs(fake) do
    vim.b[claude.buf].term_title = (SPIN[t % #SPIN + 1] .. ' ' .. (renamed and t or 0) .. ' ' .. i
      .. ' ' .. words):sub(1, length)
  end
  local t0 = hr()
  claudes.refresh()
  refresh[#refresh + 1] = (hr() - t0) / 1e6
  vim.g.statusline_winid = win
  t0 = hr()
  claudes.bar()
  bar[#bar + 1] = (hr() - t0) / 1e6
end
table.sort(refresh)
table.sort(bar)
return { refresh = refresh[math.ceil(#refresh / 2)], refresh_max = refresh[#refresh],
         bar = bar[math.ceil(#bar / 2)], bar_max = bar[#bar],
         label = vim.b[fake[1].buf].claude_nvim_label }
"""


async def titles(root: Path, ticks: int) -> list[str]:
    rows = []
    for count, length, renamed in ((1, 10_000, True), (50, 1_000, False), (50, 1_000, True)):
        with tempfile.TemporaryDirectory(prefix="freeze-nvim-") as tmp, \
                headless_nvim(cwd=tmp, args=NVIM_ARGS) as (address, _process):
            async with attached(address) as nvim:
                got = await nvim.exec_lua(TITLES_LUA, str(root), count, length, ticks, renamed)
        what = "a new name each tick" if renamed else "the spinner turns"
        rows.append(f"titles  {count:>2} Claude(s), {length:>6,}-char titles, {what:20}: tick "
                    f"{got['refresh']:9.3f} ms (max {got['refresh_max']:9.3f}), bar "
                    f"{got['bar']:7.3f} ms (max {got['bar_max']:7.3f}); label "
                    f"{len(got['label'])} chars")
    return rows


@contextlib.asynccontextmanager
async def attached(address: str) -> AsyncIterator[Editor]:
    """A client of Neovim that waits as long as it takes (the code before may freeze it)."""
    editor = editor_for(address, timeout=3600.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(editor.run)
        try:
            yield editor
        finally:
            nursery.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def probe(address: str) -> AsyncIterator[Probe]:
    process = await trio.lowlevel.open_process(
        [sys.executable, str(HERE / "bench.py"), "--probe", address, "--probe-gap-ms", "1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    watching = Probe(process)
    try:
        yield watching
    finally:
        await watching.quit()


async def until(nvim: Editor, lua: str, *args: Any, timeout: float = 600.0) -> None:
    with trio.fail_after(timeout):
        while not await nvim.exec_lua(lua, *args):
            await trio.sleep(0.02)


SIGNED = """for _, buf in ipairs(...) do
  if #vim.api.nvim_buf_get_extmarks(buf, -1, 0, -1, { type = 'sign' }) == 0 then return false end
end
return true"""


async def turn(files: int, buffers: int, loaded: int) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="freeze-nvim-") as tmp, \
            headless_nvim(cwd=tmp, args=NVIM_ARGS) as (address, _process):
        root = Path(tmp)
        paths = [root / f"f{i}.py" for i in range(files)]
        others = [root / f"other{i}.py" for i in range(buffers - loaded)]
        for path in [*paths, *others]:
            path.write_text("one\ntwo\n")
        async with running_app(address, lock_directory=root / "ide") as app, \
                attached(address) as nvim, \
                mcp_client(app.port, app.token) as client:
            bufs = await nvim.exec_lua("""local bufs = {}
                for _, p in ipairs(...) do
                  local buf = vim.fn.bufadd(p); vim.fn.bufload(buf); bufs[#bufs + 1] = buf
                end
                return bufs""", [str(p) for p in [*paths[:loaded], *others]])
            with trio.fail_after(10):
                while not app.hooks.entries():
                    await trio.sleep(0.02)
            claude = HookedClaude(client, published_settings(app.claude_args), root)
            await claude.prompt("Number them all.")
            for path in paths:
                await claude.edit(path, "two", "2")
            async with probe(address) as watching:
                await watching.start()
                t0 = time.perf_counter()
                await claude.stop()
                await until(nvim, SIGNED, bufs[:loaded])
                took = time.perf_counter() - t0
                seen = await watching.stop()
    return [f"turn    {files} files, {buffers} buffers ({loaded} of them the turn's): longest "
            f"freeze {seen['max']:8.1f} ms, answers over 50 ms {seen['over_50ms']}, signs in "
            f"{took:6.2f} s"]


FLOOD_SETUP = """
local root = ...
vim.opt.rtp:prepend(root)
vim.cmd('runtime plugin/claude_nvim.lua')
local plugin = require('claude_nvim')
_G.notices = 0
local tell = plugin.tell
plugin.tell = function(...) _G.notices = _G.notices + 1; return tell(...) end
"""


async def flood(root: Path, seconds: float, rate: int, plugin: bool = True) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="freeze-nvim-") as tmp, \
            headless_nvim(cwd=tmp, args=NVIM_ARGS) as (address, process):
        watch = ProcWatch(process.pid)
        async with running_app(address, lock_directory=Path(tmp) / "ide"), \
                attached(address) as nvim, \
                attached(address) as hooks:
            await nvim.request("nvim_ui_attach", 120, 40, {"ext_linegrid": True})
            if plugin:
                await nvim.exec_lua(FLOOD_SETUP, str(root))
            sent = 0
            async with probe(address) as watching:
                await watching.start()
                cpu = watch.cpu()
                start = time.perf_counter()
                while (elapsed := time.perf_counter() - start) < seconds:
                    for _ in range(int(elapsed * rate) - sent):
                        sent += 1
                        state = "waiting" if sent % 2 else "done"
                        hooks.call_lua_soon("claude_nvim.hooks", "update",
                                            {"id": 1, "state": state, "since": sent,
                                             "label": "Claude 1"}, True)
                    await trio.sleep(0.01)
                await until(nvim, "return true")  # all it was sent, handled
                seen = await watching.stop()
                cpu = watch.cpu() - cpu
            notices = await nvim.exec_lua("return _G.notices or 0")
    return [f"flood   {sent:,} states in {seconds:.0f} s{'' if plugin else ', no plugin'}: "
            f"{notices:,} notices; Neovim's CPU {cpu:5.2f} s, longest answer {seen['max']:8.1f} "
            f"ms, answers over 50 ms {seen['over_50ms']}"]


async def main(args: argparse.Namespace) -> None:
    print(f"claude_nvim from {Path(claude_nvim.__file__).parent}, plugin from {args.root}")
    only = set(args.only.split(","))
    if "titles" in only:
        for row in await titles(args.root, args.ticks):
            print(row, flush=True)
    if "turn" in only:
        for row in await turn(600, 200, 50):
            print(row, flush=True)
    if "flood" in only:
        for plugin in (True, False):
            for row in await flood(args.root, 5.0, args.flood_rate, plugin):
                print(row, flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=HERE.parent,
                        help="the checkout whose plugin Lua (lua/, plugin/) is measured")
    parser.add_argument("--only", default="titles,turn,flood")
    parser.add_argument("--ticks", type=int, default=5)
    parser.add_argument("--flood-rate", type=int, default=3600,
                        help="states a second (the issue saw 10,000-18,000 messages in 5 s)")
    trio.run(main, parser.parse_args())
