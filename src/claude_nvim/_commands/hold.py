"""``claude-nvim hold``: run claude in a holder that outlives this terminal, and attach to it;
``--attach SOCK``: attach to a running one (see :mod:`claude_nvim._hold`). The plugin's own
command lines skip the parser (``_hold.launch.quick``): this is for the others, and ``--help``."""

from __future__ import annotations

import argparse

from .._hold import client, launch
from . import fail


def run(args: argparse.Namespace) -> int:
    if args.attach:
        return client.attach(args.attach)
    argv = list(args.argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        return fail("hold: no command to run (claude-nvim hold [options] -- claude ...)")
    return launch.start(args.number, args.name, args.project, argv)
