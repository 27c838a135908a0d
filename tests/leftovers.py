"""The suite checks itself: a test run leaves no process, temporary directory or user behind.

A pytest plugin (tests/conftest.py loads it). When the run starts, the process running it (the
xdist controller, or the only one with ``-n 0``):

* marks every process the run starts: :data:`MARK` in the environment, which children inherit
  (``/proc/PID/environ``); each test gets its own value, a fixture of a wider scope the worker's;
* gives the run a temporary directory of its own, ``$TMPDIR`` for everything it starts
  (pytest's ``tmp_path`` stays where pytest keeps it: ``$PYTEST_DEBUG_TEMPROOT``);
* names the system users a test may make (:func:`user_name`).

After each test, what it started must be gone (waited for up to :data:`LINGER` seconds, the
time a process has to end once told to): what is left is killed by pid, and the test errors in
teardown naming it. When the run ends, what any test left (processes, users of the run, any
entry in its temporary directory but Neovim's own) is removed and fails the run, with a list.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

MARK = "CLAUDE_NVIM_TEST_RUN"
"""The environment variable that marks the processes of a run: ``RUN/WORKER/TEST``."""
USERS = "CLAUDE_NVIM_TEST_USERS"
"""The prefix of the names of the system users a run may make (``claude-nvim-RUN``)."""
OUTSIDE = "CLAUDE_NVIM_TEST_SYSTEM_TMPDIR"
"""The temporary directory outside the run's: for caches kept between runs (sshd_bundle)."""
LINGER = float(os.environ.get("CLAUDE_NVIM_TEST_LINGER") or 30)
"""Seconds a process a test started has, after the test, to be gone: generous, since a busy
machine can take seconds to end a process; only a leak waits this long."""


def _worker(config: pytest.Config) -> str | None:
    workerinput = getattr(config, "workerinput", None)
    return None if workerinput is None else str(workerinput["workerid"])


def pytest_configure(config: pytest.Config) -> None:
    worker = _worker(config)
    if worker is None:  # the process the run began with
        run = secrets.token_hex(4)
        outside = tempfile.gettempdir()
        own = tempfile.mkdtemp(prefix=f"claude-nvim-tests-{run}-")
        os.chmod(own, 0o1777)  # as /tmp: a second user's processes make their files there too
        os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", outside)
        os.environ.update({MARK: run, USERS: f"claude-nvim-{run}", OUTSIDE: outside,
                           "TMPDIR": own})
        tempfile.tempdir = None  # gettempdir() reads $TMPDIR again
        config.stash[_RUN] = _Run(run, worker="main", temporary=Path(own))
    else:  # an xdist worker: the controller's run, inherited
        config.stash[_RUN] = _Run(os.environ[MARK].split("/")[0], worker=worker)
    config.pluginmanager.register(config.stash[_RUN], "claude_nvim_leftovers")


def user_name() -> str:
    """A new name for a system user that a test makes (and removes): ``claude-nvim-RUN-N``."""
    return f"{os.environ[USERS]}-{next(_users)}{os.getpid() % 100000}"


_users = itertools.count(1)


def running_as(uid: int) -> list[int]:
    """The pids of the running processes of ``uid`` (zombies left out)."""
    found = []
    for pid in _pids():
        with contextlib.suppress(OSError, ValueError, IndexError):
            status = Path(f"/proc/{pid}/status").read_text()
            if int(status.split("\nUid:")[1].split()[0]) == uid \
                    and "\nState:\tZ" not in status:
                found.append(pid)
    return found


def remove_user(name: str) -> None:
    """Remove a system user made by the run: its processes (given :data:`LINGER` s to end
    on their own first: a remote shell removes its directory as it ends), then it and its
    home."""
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    deadline = time.monotonic() + LINGER
    while running_as(uid) and time.monotonic() < deadline:
        time.sleep(0.05)
    for _ in range(50):
        for pid in running_as(uid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        done = subprocess.run(["userdel", "--remove", name], capture_output=True, text=True,
                              check=False)
        if done.returncode in (0, 6):  # 6: no such user
            return
        time.sleep(0.1)  # "currently used by process": it is still ending
    raise RuntimeError(f"userdel {name}: {done.stderr.strip()}")


def _pids() -> Iterator[int]:
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            yield int(entry.name)


def marked(match: str, *, prefix: bool = False) -> dict[int, str]:
    """The running processes whose :data:`MARK` is ``match`` (or starts with it): their
    command lines. Zombies have no environment any more: ended, they are not counted."""
    found = {}
    wanted = f"{MARK}={match}".encode()
    for pid in _pids():
        if pid == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        for variable in environ.split(b"\0"):
            if variable == wanted or (prefix and variable.startswith(wanted)):
                with contextlib.suppress(OSError):
                    command = Path(f"/proc/{pid}/cmdline").read_bytes()
                    found[pid] = command.replace(b"\0", b" ").decode(errors="replace")[:300]
                break
    return found


def end_leftovers(match: str, *, prefix: bool = False) -> dict[int, str]:
    """Wait up to :data:`LINGER` s for the marked processes to end; kill, by pid, those that
    did not, and return them."""
    deadline = time.monotonic() + LINGER
    while (left := marked(match, prefix=prefix)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return left


class _Run:
    """The run's marks and, in the process it began with, its checks at the end."""

    def __init__(self, run: str, *, worker: str, temporary: Path | None = None) -> None:
        self.run = run
        self.worker = worker
        self.temporary = temporary
        self.tests = itertools.count(1)
        self.test = ""
        self.problems: list[str] = []

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        self.test = os.environ[MARK] = f"{self.run}/{self.worker}/{next(self.tests)}"
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[object]) -> Iterator[object]:
        if fixturedef.scope == "function":
            return (yield)
        mark, os.environ[MARK] = os.environ[MARK], f"{self.run}/{self.worker}/{fixturedef.scope}"
        try:
            return (yield)
        finally:
            os.environ[MARK] = mark

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        try:
            return (yield)
        finally:
            os.environ[MARK] = f"{self.run}/{self.worker}"
            if left := end_leftovers(self.test):
                raise AssertionError(
                    f"the test left processes running (killed now): {_listed(left)}")

    @pytest.hookimpl(trylast=True)  # after xdist has ended its workers
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.temporary is None:
            return
        if left := end_leftovers(self.run, prefix=True):
            self.problems.append(f"processes (killed now): {_listed(left)}")
        prefix = os.environ[USERS]
        for user in pwd.getpwall():
            if user.pw_name.startswith(prefix):
                self.problems.append(f"the system user {user.pw_name} (removed now)")
                remove_user(user.pw_name)
        nvim_own = {f"nvim.{pwd.getpwuid(os.geteuid()).pw_name}"}  # Neovim keeps its parent
        entries = sorted(p.name for p in self.temporary.iterdir() if p.name not in nvim_own)
        if entries:
            self.problems.append(f"in the run's $TMPDIR ({self.temporary}), removed now: "
                                 + ", ".join(entries))
        shutil.rmtree(self.temporary, ignore_errors=True)
        if self.problems:
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            text = "the test run left behind:\n  " + "\n  ".join(self.problems)
            if reporter is not None:
                reporter.ensure_newline()
                reporter.write_sep("=", "leftovers", red=True)
                reporter.write_line(text)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _listed(processes: dict[int, str]) -> str:
    return "; ".join(f"pid {pid}: {command}" for pid, command in processes.items())


_RUN = pytest.StashKey[_Run]()
