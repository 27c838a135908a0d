"""Claude's turns and their changes within the memory budget (claude_nvim._review.turns)."""

from __future__ import annotations

import os

import pytest

from claude_nvim._review import disk
from claude_nvim._review.turns import (
    ENTRY_BYTES,
    MAX_BYTES,
    MAX_FILES,
    MAX_PROMPT,
    MAX_TURNS,
    Turns,
    name_size,
)


def turn_changing(turns: Turns, claude: int, files: dict[str, tuple[bytes | None, bytes | None]],
                  now: float = 0.0, prompt: str = "do it"):
    turn = turns.start(claude, f"Claude {claude}", prompt, now)
    for path, (before, after) in files.items():
        turns.add(turn, path, path, before, now)
        turns.written(turn, path, after)
    return turns.end(claude)


def test_the_budget_is_stated():
    assert (MAX_TURNS, MAX_BYTES) == (20, 50 * 2**20)


def test_a_turn_is_numbered_when_it_first_changes_a_file_and_kept_only_if_it_did():
    turns = Turns()
    assert turn_changing(turns, 1, {}) is None  # answered a question: nothing to review
    first = turn_changing(turns, 1, {"/a": (b"a\n", b"A\n")})
    assert first.number == 1 and not first.open
    assert turn_changing(turns, 2, {"/b": (b"b\n", b"b\n")}) is None  # changed back
    second = turn_changing(turns, 2, {"/c": (None, b"new\n"), "/d": (b"d\n", b"d\n")})
    assert second.number == 3 and list(second.files) == ["/c"]
    assert [t.number for t in turns] == [1, 3]
    assert turns.get(None) is second and turns.get(1) is first and turns.get(2) is None
    assert turns.latest_with("/a") is first and turns.latest_with("/zz") is None


def test_the_oldest_turns_go_first_past_the_turn_count():
    turns = Turns(max_turns=3)
    for i in range(5):
        turn_changing(turns, 1, {f"/f{i}": (b"x", b"y")})
    assert [t.number for t in turns] == [3, 4, 5]
    assert turns.total_bytes == sum(t.size() for t in turns) == 3 * (
        ENTRY_BYTES + len("do it") + 2 + name_size("/f0"))


def test_the_oldest_turns_go_first_past_the_bytes_and_an_open_turn_stays():
    done = ENTRY_BYTES + len("do it")  # a turn, its prompt
    turns = Turns(max_bytes=2 * done + 2 * name_size("/a") + 100)
    turn_changing(turns, 1, {"/a": (b"a" * 30, b"b" * 30)})  # 60 bytes of text
    turn_changing(turns, 1, {"/b": (b"c" * 20, b"d" * 20)})  # 40: the budget full
    assert turns.total_bytes == turns.max_bytes
    working = turns.start(2, "Claude 2", "", 0.0)
    assert turns.add(working, "/c", "/c", b"e" * 10, 0.0)  # the oldest turn makes room
    assert [t.number for t in turns] == [2, 3]
    assert turns.total_bytes == done + name_size("/b") + 40 + ENTRY_BYTES + name_size("/c") + 10
    assert not turns.add(working, "/big", "/big", b"f" * 2000, 0.0)  # never fits
    assert working.too_big == {"/big": "/big"} and [t.number for t in turns] == [3]
    turns.written(working, "/c", b"g" * 2000)  # its own turn is never dropped for itself
    assert "/c" not in working.files and working.too_big["/c"] == "/c"
    assert turns.total_bytes == ENTRY_BYTES + name_size("/big") + name_size("/c")


def test_prompts_and_names_count_and_a_prompt_is_kept_cut():
    turns = Turns(max_bytes=10 * 2**20)
    for _ in range(8):  # 16 MB prompts: 2,000 characters of each are kept
        turn_changing(turns, 1, {"/a": (b"a", b"b")}, prompt="x" * 16 * 2**20)
    assert [len(t.prompt) for t in turns] == [MAX_PROMPT] * 8
    assert turns.total_bytes == sum(t.size() for t in turns) < 8 * (MAX_PROMPT + 4 * ENTRY_BYTES)
    # Long names fill the budget as texts do: the oldest turns go.
    for i in range(20):
        turn_changing(turns, 2, {f"/{i}/{n}/" + "d" * 3000: (None, b"") for n in range(100)})
    assert turns.total_bytes == sum(t.size() for t in turns) <= turns.max_bytes


def test_a_turn_keeps_at_most_max_files_and_counts_the_others():
    turns = Turns()
    turn = turns.start(1, "Claude 1", "", 0.0)
    for n in range(MAX_FILES + 500):
        turns.add(turn, f"/f{n}", f"/f{n}", b"x", 0.0)
    for n in range(10):  # named but not kept (unreadable): counted as well once full
        turns.too_big(turn, f"/big{n}", f"/big{n}")
    assert len(turn.files) == MAX_FILES and turn.dropped == 510 and not turn.too_big
    assert turn.summary()["files"] == MAX_FILES + 510
    turns.end(1)
    assert turns.total_bytes == turn.size()


def test_one_file_under_two_names_is_one_change_and_its_first_text_stays():
    turns = Turns()
    turn = turns.start(1, "Claude 1", "", 0.0)
    turns.add(turn, "/real/a", "/link/a", b"first", 0.0)
    turns.add(turn, "/real/a", "/real/a", b"second", 1.0)
    assert list(turn.files) == ["/real/a"] and turn.files["/real/a"].before == b"first"
    assert turn.files["/real/a"].path == "/link/a" and turns.owner_of("/real/a") is turn


def test_a_new_prompt_ends_the_open_turn():
    turns = Turns()
    first = turns.start(1, "Claude 1", "one", 0.0)
    turns.add(first, "/a", "/a", b"a", 0.0)
    turns.written(first, "/a", b"A")
    second = turns.start(1, "Claude 1", "two", 1.0)  # the first was rejected: no Stop
    assert not first.open and second.open and turns.current(1) is second
    assert turns.open_turns() == [second]


def test_a_file_over_the_limit_is_refused_from_its_size_unread(tmp_path, monkeypatch):
    big, small = tmp_path / "big", tmp_path / "small"
    with big.open("wb") as f:
        f.truncate(64 * 2**20)  # sparse: 64 MB that costs no disk
    read: list[int] = []
    real_read = os.read

    def counting_read(fd: int, size: int) -> bytes:
        data = real_read(fd, size)
        read.append(len(data))
        return data

    monkeypatch.setattr(os, "read", counting_read)
    with pytest.raises(disk.Unreadable, match="over"):
        disk.read(str(big), 2**20)
    assert sum(read) == 0
    small.write_bytes(b"x" * 3000)
    assert disk.read(str(small), 3000) == b"x" * 3000
    read.clear()
    with pytest.raises(disk.Unreadable, match="over"):
        disk.read(str(small), 1000)
    assert sum(read) == 0
