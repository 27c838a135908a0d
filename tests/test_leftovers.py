"""tests/leftovers.py: a test run fails on what its tests leave behind, and removes it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

LEAKY = """
import subprocess, tempfile

def test_leaves_a_process():
    subprocess.Popen(["sleep", "600"], start_new_session=True)  # a group of its own, even

def test_leaves_a_directory():
    tempfile.mkdtemp(prefix="claude-nvim-")

def test_ends_what_it_starts():
    subprocess.run(["true"], check=True)
"""


@pytest.fixture
def leaky(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makepyfile(test_leaky=LEAKY)
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    monkeypatch.setenv("CLAUDE_NVIM_TEST_LINGER", "0.5")
    return pytester


def test_a_process_a_test_leaves_is_killed_and_the_test_errors(leaky):
    result = leaky.runpytest_subprocess("-p", "leftovers", "-k", "process or ends")
    result.assert_outcomes(passed=2, errors=1)
    left = re.search(r"the test left processes running \(killed now\): pid (\d+): sleep 600",
                     result.stdout.str())
    assert left, result.stdout.str()
    assert not os.path.exists(f"/proc/{left.group(1)}/environ") or _zombie(int(left.group(1)))


def test_a_run_whose_tests_pass_fails_on_a_directory_left_and_removes_it(leaky):
    result = leaky.runpytest_subprocess("-p", "leftovers", "-k", "directory")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    said = re.search(r"in the run's \$TMPDIR \((\S+)\), removed now: claude-nvim-\w+",
                     result.stdout.str())
    assert said, result.stdout.str()
    assert not os.path.exists(said.group(1))


def test_a_run_that_leaves_nothing_passes(leaky):
    result = leaky.runpytest_subprocess("-p", "leftovers", "-k", "ends")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    assert "leftovers" not in result.stdout.str()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z"
    except OSError:
        return True
