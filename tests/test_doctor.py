"""`claude-nvim doctor` against a real Neovim, a stand-in claude and real lock directories."""

from __future__ import annotations

import os
import subprocess
import sys

CLAUDE_NVIM = [sys.executable, "-m", "claude_nvim"]


def doctor(tmp_path, *args, **env):
    fake = tmp_path / "bin" / "claude"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(f"#!{sys.executable}\nprint('2.1.330 (Claude Code)')\n")
    fake.chmod(0o755)
    environment = {k: v for k, v in os.environ.items() if k != "NVIM"}
    environment.update(CLAUDE_CONFIG_DIR=str(tmp_path / "cfg"), CLAUDE_NVIM_CLAUDE=str(fake))
    environment.update(env)
    return subprocess.run([*CLAUDE_NVIM, "doctor", *args], env=environment, capture_output=True,
                          text=True, timeout=60)


def test_a_healthy_setup_passes(nvim_address, tmp_path):
    done = doctor(tmp_path, "--nvim", nvim_address)
    assert done.returncode == 0, done.stdout
    assert "ok   Neovim 0." in done.stdout
    assert "claude 2.1.330 (Claude Code)" in done.stdout


def test_problems_are_named_with_their_fix(tmp_path):
    ide = tmp_path / "cfg" / "ide"
    ide.mkdir(parents=True)
    os.chmod(ide, 0o755)
    (ide / "1234.lock").write_text("{}")
    os.chmod(ide / "1234.lock", 0o644)
    done = doctor(tmp_path, "--nvim", str(tmp_path / "no.sock"),
                  CLAUDE_NVIM_CLAUDE="no-such-claude-here")
    assert done.returncode == 1
    out = done.stdout
    assert "FIX  Neovim at" in out and "not reachable" in out
    assert "FIX  `claude` is not on PATH" in out
    assert f"-> chmod 700 {ide}" in out
    assert f"-> chmod 600 {ide / '1234.lock'}" in out
