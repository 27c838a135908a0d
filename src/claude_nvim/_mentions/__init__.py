"""@-mentions: the user's commands that send a selection or a file to Claude (``at_mentioned``).

``:ClaudeNvimSend`` sends the selected lines (or the current line); ``:ClaudeNvimAdd {path}
[start] [end]`` sends a file, a line range of it, or a directory (both in ``lua/mentions.lua``).
The server sends each to one Claude, the one whose terminal the user was in last
(:mod:`claude_nvim.claudes`); with no client ready it queues them for a while
(:data:`QUEUE_SECONDS`, :class:`~claude_nvim.outboxes.Outboxes`).
"""

from __future__ import annotations

MODULE = "claude_nvim.mentions"
NOTIFICATION = "claude_nvim_mention"
QUEUE_SECONDS = 10.0
