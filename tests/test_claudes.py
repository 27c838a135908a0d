"""Several Claudes: which terminal a claude runs in, and who gets an @-mention."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from claude_nvim import ConnectionInfo
from claude_nvim._claudes import Claude, Claudes, Terminal
from claude_nvim._claudes.processes import holds_socket, parent_pid

# A made-up process tree: 100 (nvim) -> 200 (terminal job: claude-nvim claude) -> 201 (claude);
# 100 -> 300 (terminal job: a shell) -> 301 (claude); 400 runs outside Neovim.
PARENTS = {201: 200, 200: 100, 301: 300, 300: 100, 100: 1, 400: 1}
TERMINALS = [Terminal(buffer=5, job_pid=200), Terminal(buffer=9, job_pid=300)]


def claudes() -> Claudes:
    return Claudes(parent_of=PARENTS.get)


def listening(registry: Claudes, connection_id: int, pid: int | None,
              terminal: Terminal | None = None, proven: bool | None = None) -> Claude:
    """The record of a Claude on connection ``connection_id`` that says it is ``pid``, found in
    ``terminal``, listening."""
    claude = registry.add(ConnectionInfo(connection_id, client_pid=pid))
    claude.terminal, claude.proven, claude.listening = terminal, proven, True
    return claude


def record(connection_id: int, pid: int | None, terminal: Terminal | None = None,
           proven: bool | None = None) -> Claude:
    """A Claude's record, in no registry."""
    return Claude(ConnectionInfo(connection_id, client_pid=pid), terminal, proven)


READY = range(100)
"""Every connection id: all are ready for a mention."""


def test_a_claude_belongs_to_the_terminal_its_process_descends_from():
    registry = claudes()
    assert registry.terminal_of(201, TERMINALS) == TERMINALS[0]  # the job's child
    assert registry.terminal_of(300, TERMINALS) == TERMINALS[1]  # the job itself
    assert registry.terminal_of(400, TERMINALS) is None  # outside Neovim
    assert registry.terminal_of(None, TERMINALS) is None


def test_the_mention_goes_to_the_claude_of_the_terminal_visited_last():
    registry = claudes()
    first = listening(registry, 1, 201, registry.terminal_of(201, TERMINALS))
    second = listening(registry, 2, 301, registry.terminal_of(301, TERMINALS))
    assert registry.mention_target([5, 9], READY) is first
    assert registry.mention_target([9, 5], READY) is second
    # A terminal without a Claude (its claude exited) is passed over.
    registry.remove(2)
    assert registry.mention_target([9, 5], READY) is first
    # So is a Claude that is not ready for mentions (its outbox closed).
    assert registry.mention_target([5], {2}) is None


def test_with_no_visited_terminal_the_latest_claude_gets_it():
    registry = claudes()
    assert registry.mention_target([], READY) is None
    listening(registry, 1, 201, TERMINALS[0])
    listening(registry, 2, 400, None)
    assert registry.mention_target([], READY).id == 2
    assert registry.mention_target([42], READY).id == 2  # a terminal of no Claude


def test_the_latest_to_connect_is_by_connection_not_by_when_it_was_identified():
    registry = Claudes(parent_of=lambda pid: None)
    listening(registry, 2, 400)  # identified first, connected second
    listening(registry, 1, 300)
    assert registry.mention_target([], READY).id == 2


def test_labels_name_the_terminal_else_the_pid():
    assert record(1, 201, TERMINALS[0]).describe() == "the Claude in terminal buffer 5"
    assert record(2, 400).describe() == "the Claude with pid 400"
    ours = Terminal(buffer=7, job_pid=200, name="/w/Claude 2", label="Claude 2")  # the plugin's
    assert record(3, 201, ours).describe() == "Claude 2"
    named = Terminal(buffer=9, job_pid=300, name="build")  # a terminal the user named
    assert record(5, 301, named).describe() == "the Claude in build"
    plain = Terminal(buffer=8, job_pid=200, name="term:///tmp//200:claude")
    assert record(4, 201, plain).describe() == "the Claude in terminal buffer 8"
    assert record(6, None).describe() == "Claude #6"


def test_the_real_parent_of_a_real_process():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        assert parent_pid(child.pid) == os.getpid()
        assert Claudes().terminal_of(child.pid, [Terminal(1, os.getpid())]) is not None
    finally:
        child.kill()
        child.wait()
    assert parent_pid(child.pid) is None  # gone


def test_a_claimed_pid_is_believed_only_if_its_process_tree_holds_the_connection():
    # 201 descends from terminal 5's job; whether its tree holds the connection decides.
    for proof, terminal in ((True, TERMINALS[0]), (None, TERMINALS[0]), (False, None)):
        registry = Claudes(parent_of=PARENTS.get, holds=lambda pid, c, s, proof=proof: proof)
        claude = registry.add(ConnectionInfo(1, client_pid=201))
        registry.locate(claude, TERMINALS, ("127.0.0.1", 5000), ("127.0.0.1", 80))
        assert (claude.terminal, claude.proven) == (terminal, proof)
    # Disproven, its pid names nobody to the user, nor to Neovim.
    assert record(1, 201, None, proven=False).describe() == "Claude #1"
    assert "pid" not in record(1, 201, None, proven=False).entry()


def test_unproven_a_claim_on_the_terminal_of_a_connected_claude_is_refused():
    registry = claudes()
    first = record(1, 201, TERMINALS[0], proven=None)
    assert registry.disputed(first) is None
    first = listening(registry, 1, 201, TERMINALS[0])
    assert registry.disputed(record(2, 200, TERMINALS[0], proven=None)) is first
    assert registry.disputed(record(3, 200, TERMINALS[0], proven=True)) is None  # proven
    assert registry.disputed(record(4, 301, TERMINALS[1], proven=None)) is None  # another
    # One connected but not listening yet claims nothing.
    registry.add(ConnectionInfo(5, client_pid=301)).terminal = TERMINALS[1]
    assert registry.disputed(record(6, 300, TERMINALS[1], proven=None)) is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_the_holder_of_a_real_connection():
    with socket.create_server(("127.0.0.1", 0)) as server, \
            socket.create_connection(server.getsockname()) as client:
        accepted, _ = server.accept()
        with accepted:
            ends = client.getsockname(), server.getsockname()
            assert holds_socket(os.getpid(), *ends) is True
            assert holds_socket(os.getppid(), *ends) is True  # through a descendant: us
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
            try:
                assert holds_socket(child.pid, *ends) is False
            finally:
                child.kill()
                child.wait()
            # The other direction is the server's socket, which we hold too; a connection
            # that does not exist cannot be proven either way.
            assert holds_socket(os.getpid(), ends[1], ends[0]) is True
            assert holds_socket(os.getpid(), ("127.0.0.1", 1), ends[1]) is None
