"""Claudes that outlive Neovim: the project's directory (Python and Lua agree, a root that is
not ours alone is refused), the holder's wire, and ``claude-nvim hold`` in a real terminal."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from claude_nvim._hold import protocol as p
from claude_nvim._nvim.headless import find_nvim
from claude_nvim._project import UnsafeDirectory, project_dir

ROOT = Path(__file__).resolve().parent.parent


def lua_project_dir(cwd: Path, env: dict[str, str]) -> str:
    """What lua/claude_nvim/project.lua says, in a real Neovim: the path, or 'nil: why'."""
    script = ("local dir, why = require('claude_nvim.project').dir(_G.arg[1]) "
              "io.stdout:write(dir or ('nil: ' .. why))")
    chunk = cwd.parent / "project.lua"
    chunk.write_text(script)
    done = subprocess.run(
        [find_nvim(), "--clean", "--headless", "--cmd", f"set rtp^={ROOT}",
         "-l", str(chunk), str(cwd)], capture_output=True, text=True, env=env, timeout=60,
        check=False)
    return done.stdout or done.stderr


@pytest.fixture
def runtime(tmp_path, monkeypatch) -> Path:
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    return run


def test_python_and_lua_agree_on_the_project_directory(tmp_path, runtime, monkeypatch):
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(project)
    made = project_dir(str(link))  # the real path is what counts
    assert made.parent == runtime / "claude-nvim"
    assert made == project_dir(str(project)) != project_dir(str(project / "sub"))
    assert lua_project_dir(link, dict(os.environ)) == str(made)
    assert (made.stat().st_mode & 0o777, made.parent.stat().st_mode & 0o777) == (0o700, 0o700)
    # Without XDG_RUNTIME_DIR: $TMPDIR/claude-nvim-<uid>, the same in both.
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    fallback = project_dir(str(project))
    assert fallback.parent == tmp_path / f"claude-nvim-{os.getuid()}"
    assert lua_project_dir(project, dict(os.environ)) == str(fallback)


@pytest.mark.parametrize("how", ["symlink", "group bits", "other owner"])
def test_a_root_that_is_not_ours_alone_is_refused(tmp_path, runtime, how):
    root = runtime / "claude-nvim"
    if how == "symlink":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir(mode=0o700)
        root.symlink_to(elsewhere)
    else:
        root.mkdir(mode=0o700)
        if how == "group bits":
            root.chmod(0o770)
        elif os.getuid() != 0:
            pytest.skip("only root can give a directory to another user")
        else:
            os.chown(root, 12345, 12345)
    with pytest.raises(UnsafeDirectory):
        project_dir(str(tmp_path))
    assert lua_project_dir(tmp_path, dict(os.environ)).startswith("nil: ")
    assert list(root.iterdir()) == []  # nothing made in it


def test_frames_come_out_as_they_went_in_whatever_the_cuts():
    stream = p.frame(p.ATTACH, p.window(40, 120)) + p.frame(p.INPUT, b"hi") + p.frame(p.STOP)
    for cut in range(len(stream) + 1):
        reader = p.Reader()
        got = reader.feed(stream[:cut]) + reader.feed(stream[cut:])
        assert got == [(p.ATTACH, p.window(40, 120)), (p.INPUT, b"hi"), (p.STOP, b"")]
    assert p.read_window(got[0][1]) == (40, 120)
    with pytest.raises(p.ProtocolError):
        p.Reader().feed(b"Z\0\0\0\0")
    with pytest.raises(p.ProtocolError):
        p.Reader(limit=10).feed(p.frame(p.INPUT, b"x" * 11))


def test_the_ring_keeps_the_last_bytes_and_no_more():
    ring = p.Ring(10)
    for chunk in (b"0123", b"4567", b"89ab", b"", b"cdefghijklmnop"):
        ring.write(chunk)
    assert ring.contents() == b"ghijklmnop"
    ring.write(b"q")
    assert ring.contents() == b"hijklmnopq"
    assert sum(map(len, ring._chunks)) == 10
