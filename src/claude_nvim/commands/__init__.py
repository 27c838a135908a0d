"""The subcommands of ``claude-nvim``, one module each, each with ``run(args) -> int``.

``claude_nvim.cli`` parses the options of all of them and imports only the one that runs.
A failure is one line on stderr (:func:`fail`); a server's stop reason is
:func:`claude_nvim.commands.serving.stopped`'s.
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
