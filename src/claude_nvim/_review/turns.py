"""Claude's turns and what each changed: the files' texts before and after, within a memory
budget. No I/O here: the feature (``__init__.py``) reads the files and feeds this.

A turn runs from a Claude's prompt (UserPromptSubmit) to its Stop; a rejected turn ends without
Stop, at the next prompt. Changes made while no turn is open, by a Claude without claude-nvim's
hooks (seen by bufsync in loaded buffers), form turns of their own: one goes on while changes
keep coming, and ends :data:`QUIET_SECONDS` after the last, or when the user reviews it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

MAX_TURNS = 20
"""Turns kept, the oldest dropped first."""
MAX_BYTES = 50 * 2**20
"""Bytes kept over all turns, everything counted (the files' texts before and after, their
names, the prompts, :data:`ENTRY_BYTES` an entry), the oldest turns dropped first; a file
that does not fit even then is named in its turn but its text not kept."""
MAX_FILES = 1000
"""Files a turn keeps (with their texts or only their names); the others it only counts,
and the review says so."""
MAX_PROMPT = 2000
"""Characters of a prompt kept (it names the turn: a 16 MB prompt is not kept whole)."""
MAX_LABEL = 200
"""Characters of a Claude's label a turn keeps (counted in its entry)."""
ENTRY_BYTES = 512
"""What a turn, a file or a name costs beyond its texts (objects, dict slots, a label),
counted."""
QUIET_SECONDS = 30.0
"""A turn of changes by a Claude without hooks ends this long after its last change."""


@dataclass
class FileChange:
    """One file a turn changed: its bytes before the turn (``None``: it did not exist) and
    after (``None``: it does not exist, or not read yet)."""

    path: str
    before: bytes | None
    after: bytes | None = None

    def size(self) -> int:
        return len(self.before or b"") + len(self.after or b"") + name_size(self.path)


@dataclass
class Turn:
    """One turn of one Claude (``claude`` None: changes of a Claude without hooks)."""

    claude: int | None
    label: str
    prompt: str = ""
    started: float = 0.0
    number: int | None = None
    """Given when the turn first changes a file; what the user calls it (:ClaudeNvimReview N)."""
    open: bool = True
    last_change: float = 0.0
    files: dict[str, FileChange] = field(default_factory=dict)
    """By key: the file's real path (one file under two names is one change)."""
    too_big: dict[str, str] = field(default_factory=dict)
    """Files it changed whose text did not fit in the budget: key -> path."""
    dropped: int = 0
    """Files it changed past :data:`MAX_FILES`: counted, not kept."""
    reviewed: bool = False
    """The user saw it in a review (its files' signs went then)."""

    def size(self) -> int:
        return (ENTRY_BYTES + len(self.prompt)
                + sum(f.size() for f in self.files.values())
                + sum(name_size(path) for path in self.too_big.values()))

    def full(self) -> bool:
        return len(self.files) + len(self.too_big) >= MAX_FILES

    def file_count(self) -> int:
        """The files it changed, kept or not."""
        return len(self.files) + len(self.too_big) + self.dropped

    def summary(self) -> dict[str, object]:
        label = self.label or f"Claude #{self.claude}"
        return {"number": self.number, "label": label, "prompt": self.prompt,
                "files": self.file_count(), "open": self.open,
                "started": self.started}


class Turns:
    """Every Claude's turns, numbered in the order they first changed a file."""

    def __init__(self, max_turns: int = MAX_TURNS, max_bytes: int = MAX_BYTES) -> None:
        self.max_turns = max_turns
        self.max_bytes = max_bytes
        self._numbers = itertools.count(1)
        self._kept: list[Turn] = []  # numbered, oldest first
        self._open: dict[int | None, Turn] = {}  # by Claude (None: the Claudes without hooks)
        self._bytes = 0

    def __iter__(self) -> Iterator[Turn]:
        return iter(self._kept)

    @property
    def total_bytes(self) -> int:
        return self._bytes

    def start(self, claude: int | None, label: str, prompt: str, now: float) -> Turn:
        """A new turn of ``claude``; its open one, if any, ends (a rejected turn has no Stop)."""
        self.end(claude)
        turn = self._open[claude] = Turn(claude, label[:MAX_LABEL], prompt[:MAX_PROMPT],
                                         started=now, last_change=now)
        return turn

    def current(self, claude: int | None) -> Turn | None:
        return self._open.get(claude)

    def open_turns(self) -> list[Turn]:
        return list(self._open.values())

    def end(self, claude: int | None) -> Turn | None:
        """End ``claude``'s open turn; it, if it changed anything."""
        turn = self._open.pop(claude, None)
        if turn is None:
            return None
        turn.open = False
        for key in [k for k, f in turn.files.items() if f.before == f.after]:
            self._drop_file(turn, key)  # changed and changed back: nothing to review
        if not turn.files and not turn.too_big and not turn.dropped \
                and turn.number is not None:
            self._kept.remove(turn)
            self._bytes -= turn.size()
        return turn if turn.number is not None and turn in self._kept else None

    def owner_of(self, key: str) -> Turn | None:
        """The open turn that already has the file ``key``."""
        return next((t for t in self._open.values() if key in t.files or key in t.too_big),
                    None)

    def add(self, turn: Turn, key: str, path: str, before: bytes | None, now: float) -> bool:
        """File ``key`` (named ``path``) is about to change, or just did, in ``turn``;
        ``before``: its bytes before. The first before of a turn stays. Returns whether its
        text is kept."""
        turn.last_change = now
        if key in turn.files or key in turn.too_big:
            return key in turn.files
        self._number(turn)
        if turn.full():
            turn.dropped += 1
            return False
        change = FileChange(path, before)
        if not self._room(change.size(), turn):
            self.too_big(turn, key, path)
            return False
        turn.files[key] = change
        self._bytes += change.size()
        return True

    def too_big(self, turn: Turn, key: str, path: str) -> None:
        """File ``key`` (named ``path``) changed in ``turn`` but its text is not kept."""
        if key in turn.too_big:
            return
        self._number(turn)
        if turn.full():
            turn.dropped += 1
        elif self._room(name_size(path), turn):
            turn.too_big[key] = path
            self._bytes += name_size(path)
        else:
            turn.dropped += 1

    def written(self, turn: Turn, key: str, after: bytes | None) -> None:
        """What file ``key`` holds now, after ``turn``'s change."""
        change = turn.files.get(key)
        if change is None:
            return
        old = len(change.after or b"")
        if not self._room(len(after or b"") - old, turn):
            self._drop_file(turn, key)
            self.too_big(turn, key, change.path)
            return
        change.after = after
        self._bytes += len(after or b"") - old

    def get(self, number: int | None) -> Turn | None:
        """Turn ``number``, or the latest one (``None``)."""
        if number is None:
            return self._kept[-1] if self._kept else None
        return next((t for t in self._kept if t.number == number), None)

    def latest_with(self, key: str) -> Turn | None:
        return next((t for t in reversed(self._kept) if key in t.files), None)

    def _number(self, turn: Turn) -> None:
        if turn.number is None:
            turn.number = next(self._numbers)
            self._kept.append(turn)
            self._bytes += turn.size()
            self._trim(0, turn)

    def _room(self, size: int, turn: Turn) -> bool:
        """Make room for ``size`` more bytes in ``turn``, dropping the oldest other turns."""
        self._trim(size, turn)
        return self._bytes + size <= self.max_bytes

    def _trim(self, size: int, keep: Turn) -> None:
        while len(self._kept) > self.max_turns or (self._bytes + size > self.max_bytes):
            oldest = next((t for t in self._kept if t is not keep and not t.open), None)
            if oldest is None:
                return
            self._kept.remove(oldest)
            self._bytes -= oldest.size()

    def _drop_file(self, turn: Turn, key: str) -> None:
        change = turn.files.pop(key)
        self._bytes -= change.size()


def name_size(path: str) -> int:
    """What a file's entry costs beyond its texts: its name twice (key and path) and the
    entry."""
    return ENTRY_BYTES + 2 * len(path)
