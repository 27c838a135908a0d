"""tox's inline plugin: a command that exits with :data:`SKIPPED` marks its environment SKIP.

tox 4 has no setting that maps an exit status to "skipped"; it reports SKIP for an environment
whose run raises its ``Skip``. ``nvim010``/``nvim012`` exit so (scripts/with_nvim.py) when there
is no such Neovim here, and the summary says ``SKIP``, not ``OK``.
"""

from __future__ import annotations

from typing import Any

from tox.plugin import impl
from tox.tox_env.errors import Skip

SKIPPED = 77
"""The exit status of a command that did not run its tests (Automake's convention)."""


@impl
def tox_after_run_commands(tox_env: Any, exit_code: int, outcomes: list[Any]) -> None:
    if exit_code == SKIPPED:
        raise Skip(f"{tox_env.name}: a command exited with {SKIPPED}: it did not run")
