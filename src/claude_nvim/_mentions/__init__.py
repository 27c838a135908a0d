"""@-mentions: the user's commands that send a selection or a file to Claude (``at_mentioned``).

``:ClaudeNvimSend`` sends the selected lines (or the current line); ``:ClaudeNvimAdd {path}
[start] [end]`` sends a file, a line range of it, or a directory (both in ``mentions.lua``).
The server sends each to one Claude, the one whose terminal the user was in last
(:class:`~claude_nvim._claudes.Claudes`); with no client ready it queues them for a while
(:data:`QUEUE_SECONDS`, :class:`~.outboxes.Outboxes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._feature import JSON, Feature, NotificationHandler
from .._nvim.editor import Editor
from .._nvim.lua import CORE, shared_module
from .._wire.jsonrpc import notification
from .outboxes import Outboxes

MODULE = "claude_nvim.mentions"
NOTIFICATION = "claude_nvim_mention"
QUEUE_SECONDS = 10.0
OUTSIDE = ("not sent to Claude: outside the folders mapped for it (serve --path-map), a Claude "
           "on another host sees only those")
"""What the user is told of a mention of a file outside the map."""


class MentionsFeature(Feature):
    """``claude_nvim.mentions``: the user's :ClaudeNvimSend and :ClaudeNvimAdd, sent to one IDE
    client as ``at_mentioned``: the Claude of the terminal the user was in last (queued in
    ``outboxes`` while there is none)."""

    lua = shared_module(__name__, "mentions")

    def __init__(self, outboxes: Outboxes) -> None:
        self.outboxes = outboxes

    def notifications(self) -> Mapping[str, NotificationHandler]:
        return {NOTIFICATION: self._mention}

    def options(self, editor: Editor) -> JSON:
        return {"event": NOTIFICATION}

    def _mention(self, args: list[Any]) -> None:
        # A mention or a list of them; the terminals the user visited; the Claudes' labels.
        mentions, recent, labels = [*args, None, None, None][:3]
        if isinstance(mentions, dict):
            mentions = [mentions]
        if self.nursery is None or not isinstance(mentions, list):
            return
        mapped = [self.paths.to_claude_fields(m) for m in mentions if isinstance(m, dict)]
        messages = [notification("at_mentioned", m) for m in mapped if m is not None]
        if len(messages) < len(mapped) and self.editor is not None:  # files outside the map
            self.editor.call_lua_soon(CORE, "tell", OUTSIDE, "WARN")
        buffers = [b for b in recent if isinstance(b, int)] if isinstance(recent, list) else []
        names = {int(b): str(label) for b, label in labels.items() if str(b).isdigit()
                 } if isinstance(labels, dict) else {}
        if messages:
            self.outboxes.send_mention(messages, buffers, self.nursery, names)
