"""Claude's turns and their changes within the memory budget (claude_nvim._review.turns)."""

from __future__ import annotations

from claude_nvim._review.turns import MAX_BYTES, MAX_TURNS, Turns


def turn_changing(turns: Turns, claude: int, files: dict[str, tuple[bytes | None, bytes | None]],
                  now: float = 0.0):
    turn = turns.start(claude, f"Claude {claude}", "do it", now)
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
    assert turns.total_bytes == 6


def test_the_oldest_turns_go_first_past_the_bytes_and_an_open_turn_stays():
    turns = Turns(max_bytes=100)
    turn_changing(turns, 1, {"/a": (b"a" * 30, b"b" * 30)})  # 60 bytes
    turn_changing(turns, 1, {"/b": (b"c" * 20, b"d" * 20)})  # 40: 100 in all
    assert turns.total_bytes == 100
    working = turns.start(2, "Claude 2", "", 0.0)
    assert turns.add(working, "/c", "/c", b"e" * 10, 0.0)  # the oldest turn makes room
    assert [t.number for t in turns] == [2, 3] and turns.total_bytes == 50
    assert not turns.add(working, "/big", "/big", b"f" * 200, 0.0)  # never fits
    assert working.too_big == {"/big": "/big"} and [t.number for t in turns] == [3]
    turns.written(working, "/c", b"g" * 95)  # its own turn is never dropped for itself
    assert "/c" not in working.files and working.too_big["/c"] == "/c"
    assert turns.total_bytes == 0


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
