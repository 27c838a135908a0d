"""The subcommands of ``claude-nvim``, one module each, each with ``run(args) -> int``.

``claude_nvim._cli`` parses the options of all of them and imports only the one that runs
(``claude-nvim mcp`` is :mod:`.relay`). A failure is one line on stderr (:func:`fail`), the
traceback only in the debug log; ``serve`` and ``claude`` run their server with
:func:`._running.run_server`, which turns what stopped it into an exit status or such a line.
"""

from __future__ import annotations

import logging
import sys

log = logging.getLogger("claude_nvim")


def fail(message: str, error: BaseException | None = None) -> int:
    """Say why the command failed, in one line; the traceback is for the debug log only."""
    if error is not None:
        log.debug("the failure in full:", exc_info=error)
    print(f"claude-nvim: {message}", file=sys.stderr)
    return 1
