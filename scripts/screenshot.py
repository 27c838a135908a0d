"""README's picture of the screen: a real Neovim with this checkout as its plugin, in tmux, after
`:ClaudeNvim` started a stand-in `claude` that proposes an edit (openDiff, as the real CLI does
in its manual mode). The stand-in only draws a few lines of text where claude's screen would
be: the real CLI needs an account and the network. Prints the screen, as tmux capture-pane
reads it.

    .venv/bin/python scripts/screenshot.py > /tmp/screen.txt
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from claude_nvim._nvim.headless import find_nvim

ROOT = Path(__file__).resolve().parent.parent
WIDTH, HEIGHT = 110, 28

BEFORE = '''def parse(text):
    rows = []
    for line in text.splitlines():
        rows.append(line.split(","))
    return rows


def total(rows):
    return sum(float(row[1]) for row in rows)
'''
AFTER = '''def parse(text):
    """The rows of a CSV text, blank lines left out."""
    rows = []
    for line in text.splitlines():
        if line.strip():
            rows.append(line.split(","))
    return rows


def total(rows):
    return sum(float(row[1]) for row in rows)
'''

# A stand-in for claude: connects as the CLI does, prints a transcript, proposes AFTER.
STAND_IN = '''#!{python}
import json, os, sys, trio
from claude_nvim.testing import mcp_client
print("\\x1b]0;\\u2733 skip blank lines\\x07", end="")
print(" * Claude Code (a stand-in)\\n")
print(" > parse() must skip blank lines\\n")
print(" * Update(parser.py)")
print("   Waiting for your verdict in Neovim...")
sys.stdout.flush()
async def main():
    port = os.environ["CLAUDE_CODE_SSE_PORT"]
    lock = os.path.join(os.environ["CLAUDE_CONFIG_DIR"], "ide", port + ".lock")
    token = json.load(open(lock))["authToken"]
    async with mcp_client(int(port), token, pid=os.getpid(), timeout=3600) as client:
        path = os.path.abspath("parser.py")
        await client.call_tool("openDiff", {{"old_file_path": path, "new_file_path": path,
            "new_file_contents": {after!r}, "tab_name": "parser.py (Claude's proposal)"}})
trio.run(main)
'''


def tmux(*args: str, check: bool = True) -> str:
    done = subprocess.run(["tmux", "-L", "claude-nvim-screenshot", *args], capture_output=True,
                          text=True, check=check, timeout=30)
    return done.stdout


def main() -> None:
    home = Path(tempfile.mkdtemp(prefix="claude-nvim-screenshot-"))
    try:
        project, bin_dir = home / "project", home / "bin"
        project.mkdir()
        bin_dir.mkdir()
        (project / "parser.py").write_text(BEFORE)
        claude = bin_dir / "claude"
        claude.write_text(STAND_IN.format(python=sys.executable, after=AFTER))
        claude.chmod(0o755)
        opts = (f"{{ cmd = {{ '{sys.executable}', '-m', 'claude_nvim' }}, "
                "diff = { open_in = 'current', layout = 'horizontal' } }")
        nvim = find_nvim()
        command = [nvim, "--clean", "--cmd", f"set runtimepath^={ROOT}",
                   "--cmd", f"lua require('claude_nvim').setup({opts})",
                   "--cmd", "set laststatus=3 noruler",
                   "--cmd", "set statusline=\\ %f%=%{v:lua.require'claude_nvim'.status()}\\ ",
                   "--cmd", "autocmd User ClaudeNvim* redrawstatus",
                   "parser.py"]
        env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(home),
               "CLAUDE_CONFIG_DIR": str(home / "claude"), "XDG_DATA_HOME": str(home / "data"),
               "XDG_STATE_HOME": str(home / "state"), "TERM": "xterm-256color"}
        shell = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        tmux("new-session", "-d", "-x", str(WIDTH), "-y", str(HEIGHT), "-c", str(project),
             f"env {shell} {shlex.join(command)}")
        wait_for("def total")
        tmux("send-keys", ":ClaudeNvim", "Enter")
        screen = wait_for("hunk", "1 diff")
        sys.stdout.write("\n".join(line.rstrip() for line in screen.splitlines()).rstrip() + "\n")
    finally:
        tmux("kill-server", check=False)
        shutil.rmtree(home, ignore_errors=True)


def wait_for(*texts: str, seconds: float = 60) -> str:
    """The screen once it shows every one of ``texts`` (and is the same twice in a row)."""
    deadline = time.monotonic() + seconds
    last = ""
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p")
        if all(t in screen for t in texts) and screen == last:
            return screen
        last = screen
        time.sleep(0.5)
    raise SystemExit(f"the screen never showed {texts}:\n{last}")


if __name__ == "__main__":
    main()
