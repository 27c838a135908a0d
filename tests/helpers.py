"""What claude-nvim's own tests share: driving Neovim like a user, hand-made WebSocket bytes,
pending diffs, an MCP session with stand-in tools, and the Linux counts the tests read.
(Plugin authors' helpers are in ``claude_nvim.testing``; the fixtures are in conftest.py.)"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import re
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from claude_nvim import Tool, ToolError, text_result
from claude_nvim._big_reads import BigReads
from claude_nvim._diffs import DiffRegistry
from claude_nvim._errors import EditorError, EditorGone, EditorTimeout
from claude_nvim._hooks import Hooks
from claude_nvim._lsp.replies import Replies
from claude_nvim._mcp import McpSession
from claude_nvim._tool import ConnectionInfo
from claude_nvim._wire import frames
from claude_nvim.tools._context import BuiltinContext

if TYPE_CHECKING:  # imported by conftest.py: pytest must load claude_nvim.testing first
    from claude_nvim.testing import McpClient

WAIT = 60.0
"""Seconds a test waits for a condition before failing: a guard against hangs only. Tests wait
for what they expect (``eventually``, ``trio.fail_after(WAIT)`` around a loop), never for a
time; a busy machine takes seconds where an idle one takes milliseconds."""


async def call(client: McpClient, name: str, arguments: dict | None = None) -> Any:
    """The decoded answer of a tool call that must succeed (McpClient.call_json)."""
    return await client.call_json(name, arguments)


async def error(client: McpClient, name: str, arguments: dict | None = None) -> str:
    """The message of a tool call that must fail (McpClient.tool_error)."""
    return await client.tool_error(name, arguments)

# Neovim, as the user drives it


async def attach_ui(nvim, width: int = 80, height: int = 24) -> None:
    """Attach a UI, as a user's terminal would (a small one: messages are wide in it): a
    prompt would really stop Neovim, and focus behaves for real."""
    await nvim.request("nvim_ui_attach", width, height, {"ext_linegrid": True})


async def edit(nvim, path: Path | str) -> int:
    """``:edit path`` in the current window, as the user would; the buffer's number."""
    return await nvim.exec_lua(
        "vim.cmd('edit ' .. vim.fn.fnameescape(...)); return vim.api.nvim_get_current_buf()",
        str(path))


async def mode(nvim) -> str:
    """Neovim's mode (``nvim_get_mode``): "n", "v", "i", ..."""
    return (await nvim.request("nvim_get_mode"))["mode"]


async def messages(nvim) -> str:
    """What ``:messages`` shows."""
    return (await nvim.request("nvim_exec2", "messages", {"output": True}))["output"]


async def eventually(nvim, lua: str, *args: Any, timeout: float = WAIT) -> Any:
    """Poll a Lua chunk in Neovim until it returns something truthy; returns that."""
    with trio.fail_after(timeout):
        while True:
            value = await nvim.exec_lua(lua, *args)
            if value:
                return value
            await trio.sleep(0.01)


async def type_into(nvim, buf: int, text: str) -> None:
    """Type ``text`` into the Claude of terminal ``buf``, as keys typed there (a held Claude's
    terminal has no job to chansend to)."""
    assert await nvim.exec_lua("return require('claude_nvim.terminal').input(...)", text, buf)


class Processes:
    """The processes a test starts (the ``processes`` fixture): each in a session of its own,
    so that what it starts (``serve --headless``'s Neovim) is in its process group; at the end
    of the test, pass or fail, each group is killed and each process waited for."""

    def __init__(self) -> None:
        self.started: list[trio.Process] = []

    async def start(self, command: list[str], **options: Any) -> trio.Process:
        process = await trio.lowlevel.open_process(command, start_new_session=True, **options)
        self.started.append(process)
        return process

    async def end(self) -> None:
        for process in self.started:
            with contextlib.suppress(ProcessLookupError):  # the group is gone already
                os.killpg(process.pid, signal.SIGKILL)
            with trio.CancelScope(shield=True), trio.fail_after(WAIT):
                await process.wait()


class Gate:
    """A named pipe that holds Neovim busy until the test lets it go: busy for as long as the
    test needs, not for a time. ``await nvim.exec_lua(gate.HOLD, gate.path)`` blocks Neovim
    (reading the pipe); :meth:`held` waits until it is blocked there; :meth:`release` ends it."""

    HOLD = "io.open(..., 'r'):read('*a')"

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = str(path)
        self._writer: int | None = None

    async def held(self) -> None:
        """Once Neovim is reading the pipe (a writer can open it only then)."""
        with trio.fail_after(WAIT):
            while self._writer is None:
                try:
                    self._writer = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
                except OSError:  # ENXIO: no reader yet
                    await trio.sleep(0.01)

    async def release(self) -> None:
        await self.held()
        assert self._writer is not None
        os.close(self._writer)  # end of file: the read returns
        self._writer = None


def environment(config_dir: Path | str, **extra: str) -> dict[str, str]:
    """This process's environment for a ``claude-nvim`` command, with ``config_dir`` as
    ``CLAUDE_CONFIG_DIR`` and none of the variables a Neovim terminal or the user would set."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NVIM", "CLAUDE_NVIM_DISABLE", "CLAUDE_CODE_SSE_PORT")}
    return {**env, "CLAUDE_CONFIG_DIR": str(config_dir), **extra}


def inotify_watches(pid: int) -> int:
    """How many inotify watches process ``pid`` holds, as Linux counts them (libuv's
    fs_event watchers are inotify watches: one per watched directory)."""
    watches = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            if os.readlink(fd) == "anon_inode:inotify":
                info = (Path(f"/proc/{pid}/fdinfo") / fd.name).read_text()
                watches += sum(line.startswith("inotify wd:") for line in info.splitlines())
    return watches


# Diffs

TAB = "✻ [Claude Code] a.py (f8942c) ⧉"


class PendingDiff:
    """An openDiff call running in a task: its outcome once the user answered."""

    def __init__(self, client: McpClient, args: dict):
        self.client, self.args, self.result = client, args, None
        self.done = trio.Event()

    async def run(self):
        self.result = await self.client.call_tool("openDiff", self.args)
        self.done.set()

    async def outcome(self, timeout: float = WAIT) -> list[str]:
        with trio.fail_after(timeout):
            await self.done.wait()
        return [item["text"] for item in self.result["content"]]


def diff_args(path, contents, tab=TAB) -> dict:
    """openDiff's arguments as the CLI sends them, for a change of ``path`` to ``contents``."""
    return {"old_file_path": str(path), "new_file_path": str(path),
            "new_file_contents": contents, "tab_name": tab}


# WebSocket bytes by hand

KEY = base64.b64encode(b"0123456789abcdef")


def upgrade(*extra: bytes, version: bytes = b"13", key: bytes = KEY) -> bytes:
    """A WebSocket upgrade request, with ``extra`` header lines."""
    lines = [b"GET /x HTTP/1.1", b"Host: 127.0.0.1", b"Upgrade: websocket",
             b"Connection: keep-alive, Upgrade", b"Sec-WebSocket-Version: " + version,
             b"Sec-WebSocket-Key: " + key, *extra]
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def raw_upgrade(port: int, token: str) -> trio.SocketStream:
    """A bare TCP connection that has done the WebSocket upgrade, for hand-made frames."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(
        f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        f"Sec-WebSocket-Version: 13\r\nx-claude-code-ide-authorization: {token}\r\n\r\n"
        .encode())
    response = b""
    while b"\r\n\r\n" not in response:
        response += await stream.receive_some(4096)
    assert response.startswith(b"HTTP/1.1 101")
    return stream


def masked_frame(opcode: int, payload: bytes) -> bytes:
    """A final client frame (masked, as a client's must be)."""
    return frames.frame(opcode, payload, mask=b"\x01\x02\x03\x04")


# An MCP session with stand-in tools, without a socket or Neovim


async def echo(ctx, args):
    return text_result(json.dumps(args))


async def fails(ctx, args):
    raise RuntimeError("kaboom")


async def refuses(ctx, args):
    raise ToolError("File not found: /nope")


def raises(error):
    async def handler(ctx, args):
        raise error

    return handler


async def slow(ctx, args):
    await trio.sleep_forever()


async def not_a_result(ctx, args):
    return "oops"


SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "line": {"type": "integer", "minimum": 1}},
    "required": ["path"],
}
TOOLS = {
    "echo": Tool("echo", SCHEMA, echo, description="Echo.", annotations={"readOnlyHint": True}),
    "hidden": Tool("hidden", {"type": "object"}, echo),
    "fails": Tool("fails", {"type": "object"}, fails, description="Fails."),
    "refuses": Tool("refuses", {"type": "object"}, refuses, description="Refuses."),
    "lua_error": Tool("lua_error", {"type": "object"}, raises(EditorError("E5108: oops"))),
    "no_answer": Tool("no_answer", {"type": "object"}, raises(EditorTimeout("no answer in 5 s"))),
    "gone": Tool("gone", {"type": "object"}, raises(EditorGone("Neovim closed the connection"))),
    "slow": Tool("slow", {"type": "object"}, slow, description="Slow."),
    "bad": Tool("bad", {"type": "object"}, not_a_result, description="Bad."),
}


def session() -> McpSession:
    """An MCP session serving :data:`TOOLS`, with no editor behind it."""
    def context(tool, connection):
        return BuiltinContext(tool=tool, editor=None, connection=connection,
                              log=logging.getLogger("t"), big_reads=BigReads(),
                              diffs=DiffRegistry(), replies=Replies(), hooks=Hooks())

    return McpSession(ConnectionInfo(1), TOOLS, context)


# A connection a process in a Neovim terminal holds (as a claude holds its own), handed to the test


def hand_over(port: int, to: str) -> socket.socket:
    """Open a TCP connection to the server on ``port``, hand it to the test listening on the
    Unix socket ``to`` (:func:`handed_over`), and return it: the process that calls this (a
    stand-in claude in a Neovim terminal) holds it too, as a claude holds its own."""
    tcp = socket.create_connection(("127.0.0.1", port))
    with socket.socket(socket.AF_UNIX) as unix:
        unix.connect(to)
        socket.send_fds(unix, [b"c"], [tcp.fileno()])
    return tcp


@contextlib.asynccontextmanager
async def handed_over(path: Path) -> AsyncIterator[Callable[[], Awaitable[trio.SocketStream]]]:
    """Listen on the Unix socket ``path``; yields a function that waits for the next connection
    ``hand_over`` sends there and returns it as a stream."""
    listener = trio.socket.socket(socket.AF_UNIX)
    await listener.bind(str(path))
    listener.listen()

    async def receive() -> trio.SocketStream:
        conn, _ = await listener.accept()
        with conn:
            _, ancillary, _, _ = await conn.recvmsg(1, socket.CMSG_SPACE(4))
        fd = int.from_bytes(ancillary[0][2][:4], sys.byteorder)
        return trio.SocketStream(trio.socket.from_stdlib_socket(socket.socket(fileno=fd)))

    with listener:
        yield receive


async def claude_in_a_terminal(nvim, port: int, receive, tmp_path: Path, name: str):
    """A :terminal whose job holds a connection to the server, as a claude does, and hands it
    to the test (``receive``, from :func:`handed_over` on ``tmp_path / "hand"``): (window,
    buffer, job pid, the connection)."""
    script = tmp_path / f"{name}.py"
    script.write_text(f"import sys, time\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
                      "from helpers import hand_over\n"
                      f"kept = hand_over({port}, {str(tmp_path / 'hand')!r})\ntime.sleep(600)\n")
    await nvim.request("nvim_command", f"botright split | terminal {sys.executable} {script}")
    window, buffer, pid = await nvim.exec_lua(
        "return {vim.api.nvim_get_current_win(), vim.api.nvim_get_current_buf(),"
        " vim.b.terminal_job_pid}")
    return window, buffer, pid, await receive()


# Claude Code's hooks, as claude 2.1.331 runs them (/work/notes/cli_findings.md §1): for each
# event, every hook group whose matcher fits the tool; an `mcp_tool` hook on the server "ide"
# is a tools/call (no _meta) on the IDE connection, with `input`'s strings interpolated from
# the event's JSON (`${tool_input.file_path}`: an object becomes compact JSON, a missing path "").

SESSION = "9dda414b-6c1e-4b47-9d2a-5f0e3c1b7a11"


def interpolate(value: Any, event: dict) -> Any:
    if isinstance(value, dict):
        return {k: interpolate(v, event) for k, v in value.items()}
    if not isinstance(value, str):
        return value

    def lookup(match: re.Match) -> str:
        found: Any = event
        for key in match[1].split("."):
            found = found.get(key) if isinstance(found, dict) else None
        if found is None:
            return ""
        if isinstance(found, (dict, list)):
            return json.dumps(found, separators=(",", ":"))
        return found if isinstance(found, str) else json.dumps(found)

    return re.sub(r"\$\{([^}]*)\}", lookup, value)


def published_settings(args: list[str]) -> dict:
    """The --settings a server published for a claude (its ``claude_args``)."""
    return json.loads(args[args.index("--settings") + 1])


class HookedClaude:
    """A stand-in claude that runs the hooks of ``settings`` as the real one does, over
    ``client`` (its IDE connection), and makes the file changes its tools would."""

    def __init__(self, client: McpClient, settings: dict, cwd: Path | str = "/tmp") -> None:
        self.client, self.settings, self.cwd = client, settings, str(cwd)
        self.prompt_id = "0"
        self.transcript = f"/root/.claude/projects/-w/{SESSION}.jsonl"
        self.calls: list[dict] = []
        """Every hook's tools/call: {"name", "arguments", "result"}."""
        self._uses = 0

    def _event(self, name: str, **fields: Any) -> dict:
        event = {"session_id": SESSION, "cwd": self.cwd, "transcript_path": self.transcript}
        if name != "SessionStart":
            event.update(prompt_id=self.prompt_id, permission_mode="default")
        return {**event, "hook_event_name": name, **fields}

    async def fire(self, event: dict) -> list[dict]:
        """Run the hooks for ``event``; their tool results."""
        results = []
        for group in self.settings.get("hooks", {}).get(event["hook_event_name"], []):
            matcher = group.get("matcher")
            if matcher and not re.fullmatch(matcher, event.get("tool_name", "")):
                continue
            for hook in group["hooks"]:
                assert hook["type"] == "mcp_tool" and hook["server"] == "ide", hook
                arguments = interpolate(hook.get("input", {}), event)
                result = await self.client.result(
                    "tools/call", {"name": hook["tool"], "arguments": arguments})
                self.calls.append({"name": hook["tool"], "arguments": arguments,
                                   "result": result})
                results.append(result)
        return results

    async def prompt(self, text: str) -> None:
        self.prompt_id = f"p{len(self.calls)}"
        await self.fire(self._event("UserPromptSubmit", prompt=text))

    def _tool(self, name: str, tool_input: dict) -> dict:
        self._uses += 1
        return {"tool_name": name, "tool_input": tool_input, "tool_use_id": f"toolu_{self._uses}",
                "effort": {"level": "medium"}}

    async def edit(self, path: Path, old: str, new: str) -> None:
        """The Edit tool: PreToolUse, the write, PostToolUse (claude's own shapes)."""
        tool = self._tool("Edit", {"file_path": str(path), "old_string": old,
                                   "new_string": new, "replace_all": False})
        await self.fire(self._event("PreToolUse", **tool))
        original = path.read_text()
        assert old in original, f"{old!r} is not in {path}"
        path.write_text(original.replace(old, new, 1))
        response = {"filePath": str(path), "oldString": old, "newString": new,
                    "originalFile": original, "structuredPatch": [], "userModified": False,
                    "replaceAll": False}
        await self.fire(self._event("PostToolUse", **tool, tool_response=response,
                                    duration_ms=5))

    async def write(self, path: Path, content: str) -> None:
        """The Write tool, on a new file or over one."""
        tool = self._tool("Write", {"file_path": str(path), "content": content})
        await self.fire(self._event("PreToolUse", **tool))
        original = path.read_text() if path.exists() else None
        path.write_text(content)
        response = {"type": "update" if original is not None else "create",
                    "filePath": str(path), "content": content, "structuredPatch": [],
                    "originalFile": original, "userModified": False}
        await self.fire(self._event("PostToolUse", **tool, tool_response=response,
                                    duration_ms=5))

    async def bash(self, command: str) -> None:
        """The Bash tool (no PreToolUse hook: it writes no file claude names)."""
        tool = self._tool("Bash", {"command": command, "description": "run it"})
        await self.fire(self._event("PreToolUse", **tool))
        proc = await trio.run_process(["bash", "-c", command], cwd=self.cwd,
                                      capture_stdout=True, check=False)
        response = {"stdout": proc.stdout.decode(), "stderr": "", "interrupted": False,
                    "isImage": False, "noOutputExpected": False}
        await self.fire(self._event("PostToolUse", **tool, tool_response=response,
                                    duration_ms=5))

    async def read(self, path: Path) -> None:
        tool = self._tool("Read", {"file_path": str(path)})
        await self.fire(self._event("PreToolUse", **tool))
        text = path.read_text()
        response = {"type": "text", "file": {"filePath": str(path), "content": text,
                                             "numLines": text.count("\n"), "startLine": 1,
                                             "totalLines": text.count("\n")}}
        await self.fire(self._event("PostToolUse", **tool, tool_response=response,
                                    duration_ms=1))

    async def ask_permission(self, tool: str, tool_input: dict) -> None:
        await self.fire(self._event("PermissionRequest", tool_name=tool, tool_input=tool_input,
                                    permission_suggestions=[{"type": "setMode",
                                                             "mode": "acceptEdits",
                                                             "destination": "session"}]))

    async def notify(self, kind: str) -> None:
        message = {"permission_prompt": "Claude needs your permission",
                   "idle_prompt": "Claude is waiting for your input"}[kind]
        await self.fire(self._event("Notification", message=message, notification_type=kind))

    async def stop(self) -> None:
        await self.fire(self._event("Stop", effort={"level": "medium"}, stop_hook_active=False,
                                    last_assistant_message="Done.", background_tasks=[],
                                    session_crons=[]))


async def hooked_claude(app, client, tmp_path: Path) -> HookedClaude:
    """A stand-in claude speaking through ``client`` with the hooks ``app`` gives its Claudes,
    once the app has seen that Claude (its hooks' entries)."""
    with trio.fail_after(WAIT):
        while not app.hooks.entries():
            await trio.sleep(0.02)
    return HookedClaude(client, published_settings(app.claude_args), tmp_path)
