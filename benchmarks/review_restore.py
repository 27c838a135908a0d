"""What a Neovim that takes a lingering server over pays for the review's turns (issue 29).

A server outlives its Neovim with the review full: 20 turns (``MAX_TURNS``) of 1,000 files
(``MAX_FILES``) of 1 KB each, its memory budget (``MAX_BYTES``) reached, the last turn's 5
files of 1 MB among them; the first Neovim is killed; a second one of the project, with 200
buffers loaded (150 of them files of the turns, the 5 big ones included), asks the server to
attach (``server.sock``, as the plugin's ``linger.lua`` does). Measured: Neovim's longest answer
to a freeze probe (``nvim_eval("1")`` in a loop, its own process) from the request until the
status counts the last turn and every loaded file of the turns shows its signs, and how long
that took. The server runs in this process; its turns are recorded as its hooks record them
(``Turns.start``/``add``, then the turn's end reads each file).

    .venv/bin/python -m benchmarks.review_restore [--turns 20] [--files 1000]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

import trio

from benchmarks.freeze_nvim import attached, probe, until
from claude_nvim import _project
from claude_nvim._nvim.headless import headless_nvim
from claude_nvim._review import ReviewFeature
from claude_nvim.testing import mcp_client, running_app

NVIM_ARGS = ("--clean", "--cmd", "let g:loaded_python3_provider = 0")
LOAD = """local bufs = {}
for _, p in ipairs(...) do
  local buf = vim.fn.bufadd(p); vim.fn.bufload(buf); bufs[#bufs + 1] = buf
end
return bufs"""
SIGNED = """local bufs, files = ...
local review = require('claude_nvim.review')
if review.to_review() ~= files then return false end
for _, buf in ipairs(bufs) do
  if #vim.api.nvim_buf_get_extmarks(buf, -1, 0, -1, { type = 'sign' }) == 0 then return false end
end
return true"""


async def record(review: ReviewFeature, root: Path, turns: int, files: int,
                 big: int) -> list[Path]:
    """``turns`` turns of ``files`` files each (the last one's first ``big`` of 1 MB), ended
    as a Stop ends them; the paths of the turns still kept, the latest first."""
    kept: list[Path] = []
    for t in range(turns):
        claude = 1000 + t  # one Claude a turn: each its own
        turn = review.turns.start(claude, f"Claude {t}", f"turn {t}", time.time())
        paths = []
        for f in range(files):
            path = root / f"t{t}" / f"f{f}.txt"
            path.parent.mkdir(exist_ok=True)
            size = 1 << 20 if t == turns - 1 and f < big else 1024
            before = b"".join(b"line %6d of the file, before\n" % i for i in range(size // 30))
            path.write_bytes(before)
            review.turns.add(turn, str(path), str(path), before, time.time())
            path.write_bytes(before.replace(b"0 of", b"0 OF"))  # every tenth line changed
            paths.append(path)
        await review._finish(claude)  # its files read again, as a Stop does
        kept[:0] = paths
    numbered = {str(p) for turn in review.turns for c in turn.files.values() for p in [c.path]}
    return [p for p in kept if str(p) in numbered]


async def restore(turns: int, files: int, loaded: int, others: int, big: int) -> str:
    with tempfile.TemporaryDirectory(prefix="review-restore-") as tmp:
        root = Path(tmp)
        (root / "run").mkdir(mode=0o700)
        os.environ["XDG_RUNTIME_DIR"] = str(root / "run")
        project = root / "project"
        project.mkdir()
        with headless_nvim(cwd=project, args=NVIM_ARGS) as (first, first_process):
            async with trio.open_nursery() as nursery:
                async def serve(task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED
                                ) -> None:
                    with contextlib.suppress(BaseExceptionGroup):  # EditorGone at the end
                        async with running_app(first, lock_directory=root / "ide",
                                               linger=True) as app:
                            task_status.started(app)
                            await trio.sleep_forever()

                app = await nursery.start(serve)
                review = next(f for f in app.features if isinstance(f, ReviewFeature))
                async with mcp_client(app.port, app.token):  # a Claude keeps the server
                    first_process.kill()
                    record_path = _project.project_dir(str(project)) / "server.json"
                    with trio.fail_after(60):
                        while not record_path.exists():
                            await trio.sleep(0.02)
                    kept = await record(review, project, turns, files, big)
                    bigs = [p for p in kept if p.stat().st_size > 4096]
                    small = [p for p in kept if p not in bigs]
                    step = max(len(small) // (loaded - len(bigs)), 1)
                    marked = bigs + small[::step][:loaded - len(bigs)]
                    extra = [project / f"other{i}.txt" for i in range(others)]
                    for path in extra:
                        path.write_text("one\ntwo\n")
                    with headless_nvim(cwd=project, args=NVIM_ARGS) as (second, _):
                        async with attached(second) as nvim:
                            bufs = await nvim.exec_lua(LOAD, [str(p) for p in marked + extra])
                            socket = json.loads(record_path.read_text())["socket"]
                            async with probe(second) as watching:
                                await watching.start()
                                t0 = time.perf_counter()
                                stream = await trio.open_unix_socket(socket)
                                async with stream:
                                    await stream.send_all(json.dumps({"nvim": second})
                                                          .encode() + b"\n")
                                    answer = json.loads(await stream.receive_some(4096))
                                    assert answer.get("ok"), answer
                                await until(nvim, SIGNED, bufs[:len(marked)], files)
                                took = time.perf_counter() - t0
                                seen = await watching.stop()
                nursery.cancel_scope.cancel()
    kept_turns = len({p.parent for p in kept})
    return (f"restore {kept_turns} turns kept of {turns} ({len(kept):,} files, {len(bigs)} of "
            f"1 MB), {len(marked) + others} buffers ({len(marked)} of them the turns'): longest "
            f"freeze {seen['max']:8.1f} ms, answers over 50 ms {seen['over_50ms']}, status and "
            f"signs in {took:6.2f} s")


async def main(args: argparse.Namespace) -> None:
    print(await restore(args.turns, args.files, 150, 50, args.big), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--big", type=int, default=5, help="files of 1 MB in the last turn")
    trio.run(main, parser.parse_args())
