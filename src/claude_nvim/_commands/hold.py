"""``claude-nvim hold``: run claude in a holder that outlives this terminal, and attach to it;
``--attach SOCK``: attach to a running one (see :mod:`claude_nvim._hold`). Standard library
only, and quick to start: it is the command of every Claude terminal of the Neovim plugin."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from .._hold import client, holder
from .._project import project_dir
from . import fail


def run(args: argparse.Namespace) -> int:
    if args.attach:
        return client.attach(args.attach)
    argv = list(args.argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        return fail("hold: no command to run (claude-nvim hold [options] -- claude ...)")
    try:
        directory = project_dir(args.project or os.getcwd())
        listener = holder.bind(directory / f"claude-{args.number}.sock")
    except OSError as exc:
        return fail(f"hold: {exc}", exc)
    size = client.window(sys.stdin.fileno())
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the holder: claude's terminal from now on
        os.close(ready_r)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        code = 1
        try:
            holder.daemonise()
            record = {"holder": os.getpid(), "number": args.number, "name": args.name,
                      "argv": argv, "project": os.path.realpath(args.project or os.getcwd()),
                      "socket": listener.getsockname(), "started": time.time(),
                      "attached": None}
            held = holder.Holder(listener, directory / f"claude-{args.number}.json", record,
                                 argv, size)
            os.write(ready_w, b"ok")
            os.close(ready_w)
            code = held.run()
        except BaseException as exc:
            os.write(ready_w, f"hold: {exc}".encode()[:4000])
        os._exit(code)
    # The client: its holder, a child that lives on, reaped by the system when it ends.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    os.close(ready_w)
    path = listener.getsockname()
    listener.close()
    said = b""
    while chunk := os.read(ready_r, 4096):
        said += chunk
    os.close(ready_r)
    if said != b"ok":
        return fail(said.decode(errors="replace") or "hold: the holder did not start")
    return client.attach(path)
