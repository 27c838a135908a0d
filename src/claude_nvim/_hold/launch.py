"""The start of ``claude-nvim hold``: claude first, everything else while it starts.

This is the command of a held Claude's terminal where the plugin cannot start claude itself
(below), and claude needs about a second before it connects: each millisecond before its fork
is a millisecond later connected. So this module
loads nothing but built-in modules; the client forks the holder, the holder forks claude in its
pseudo-terminal at once, and only then does either load the rest (the holder's socket and
record, the client's relay: about 0.1 s of imports). :func:`quick` takes the plugin's own
command lines before argparse and logging load; anything else goes through ``claude-nvim``'s
parser, for its help and its errors. Where the plugin knows the install's Python, it runs
:func:`main` with no site at all (``python -I -S``), from its checkout: this needs only the
standard library.

On Linux the plugin does better still (``lua/claude_nvim/held.lua``): it starts claude itself,
on a pty it opened, and this runs as its holder with ``--adopt``: claude's pid, the pty's
master end as stdin; with ``--wait FD``, it loads nothing more while Neovim is claude's
terminal (until FD reads as closed: what claude wrote comes there meanwhile); then it says
``ok SOCKET`` or why on stdout.
"""

from __future__ import annotations

import os
import sys

from .terminal import set_window, window

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

EARLY_BYTES = 1 << 20
"""At most this much of what claude wrote before its holder ran is kept: holder.RING_BYTES
(not loaded before then)."""

RECORD_VAR = "CLAUDE_NVIM_HOLDER"
"""claude's environment names its holder's JSON file in this: its editor (claude_editor.lua)
reads there the address of the Neovim attached now (``nvim``), not the one ``$NVIM`` names
(the Neovim claude started in, which may have quit since)."""


def quick(args: list[str]) -> int | None:
    """Run ``claude-nvim hold ARGS`` if they are of the forms the plugin writes (``--attach
    SOCK``; ``[--adopt PID] [--wait FD] [--number N] [--name NAME] [--project DIR] -- COMMAND
    ...``); None otherwise."""
    if len(args) == 2 and args[0] == "--attach":
        from .client import attach
        return attach(args[1])
    options: dict[str, str] = {}
    at = 0
    adopted = None
    if args[:1] == ["--adopt"] and len(args) > 1 and args[1].isdigit():
        adopted, at = int(args[1]), 2
    while at + 1 < len(args) and args[at] in ("--wait", "--number", "--name", "--project"):
        options[args[at]] = args[at + 1]
        at += 2
    number, wait = options.get("--number", "1"), options.get("--wait", "")
    if args[at:at + 1] != ["--"] or len(args) == at + 1 or not number.isdigit() \
            or not (wait.isdigit() or not wait):
        return None
    if wait and adopted is None:
        return None
    if adopted is not None:
        return adopt(adopted, int(number), options.get("--name"), options.get("--project"),
                     args[at + 1:], int(wait) if wait else None)
    return start(int(number), options.get("--name"), options.get("--project"), args[at + 1:])


def main(args: list[str]) -> int:
    """Run ``claude-nvim hold ARGS`` as the plugin does where it knows the install's Python:
    this package by its path, with no site (``lua/claude_nvim/held.lua``)."""
    status = quick(args)
    if status is None:
        print(f"claude-nvim: hold: not a command line of the plugin's: {args!r}",
              file=sys.stderr)
        return 2
    return status


def start(number: int, name: str | None, project: str | None, argv: list[str]) -> int:
    """Start claude (``argv``) under a new holder, as Claude ``number`` of ``project`` (default:
    this directory), and attach this terminal to it; claude's exit status, or 1 and why."""
    project = os.path.realpath(project or os.getcwd())
    size = window(sys.stdin.fileno())
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the holder: claude's terminal from now on
        os.close(ready_r)
        _hold(ready_w, number, name, project, argv, size)
    # The client: its holder, a child that lives on, reaped by the system when it ends.
    import signal  # (enum, and 10 ms, before claude's fork: after it)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    os.close(ready_w)
    from . import client  # while the holder starts
    said = b""
    while chunk := os.read(ready_r, 4096):
        said += chunk
    os.close(ready_r)
    if not said.startswith(b"ok "):
        message = said.decode(errors="replace") or "hold: the holder did not start"
        print(f"claude-nvim: {message}", file=sys.stderr)
        return 1
    return client.attach(os.fsdecode(said[3:]))


def adopt(claude: int, number: int, name: str | None, project: str | None,
          argv: list[str], wait: int | None = None) -> NoReturn:
    """Hold claude (``argv``), this process's child ``claude``, started before this process by
    the plugin (``lua/claude_nvim/held.lua``) on the pseudo-terminal whose master end is
    stdin; say ``ok SOCKET`` or why on stdout. Given ``wait``, not before that descriptor
    reads as closed: until then Neovim is claude's terminal, sends there what claude wrote
    (it begins the ring a later Neovim is shown: claude's terminal modes), and this loads
    nothing more."""
    early, starter = bytearray(), 0
    if wait is not None:
        os.set_blocking(wait, True)
        while chunk := os.read(wait, 65536):
            early += chunk
            if len(early) > 2 * EARLY_BYTES:
                del early[:-EARLY_BYTES]
        os.close(wait)
        starter = os.getppid()  # that Neovim, unless it is gone (then not a Neovim)
    master, ready = os.dup(0), os.dup(1)
    _hold(ready, number, name, os.path.realpath(project or os.getcwd()), argv, window(master),
          (claude, master), (bytes(early[-EARLY_BYTES:]), starter))


def _hold(ready: int, number: int, name: str | None, project: str, argv: list[str],
          size: tuple[int, int], started: tuple[int, int] | None = None,
          early: tuple[bytes, int] = (b"", 0)) -> NoReturn:
    """The holder: in a session of its own (Neovim's quitting leaves it), claude started (unless
    ``started``: its pid and its terminal's master end; ``early``, what it wrote so far and
    the pid of the Neovim that showed it), then its socket and record; says ``ok SOCKET`` or
    why not on ``ready``, then serves."""
    code = 1
    claude = master = -1
    claim = ""
    try:
        if started is None:
            os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        claude, master = started or spawn(
            argv, size, {RECORD_VAR: record_path(project, number)})
        import time

        from .._project import project_dir
        from .holder import Holder, bind
        for tries_left in (1, 0):  # a last holder or server may take the empty directory
            directory = project_dir(project)
            claim = str(directory / f"claude-{number}.claim")
            try:
                listener = bind(directory / f"claude-{number}.sock")
                break
            except FileNotFoundError:
                if not tries_left:
                    raise
        record = {"holder": os.getpid(), "number": number, "name": name, "argv": argv,
                  "project": project, "socket": listener.getsockname(), "started": time.time(),
                  "attached": None, "claude": claude}
        held = Holder(listener, directory / f"claude-{number}.json", record, claude, master,
                      size)
        held.shown(*early)
        import contextlib  # (loaded by .holder already)
        with contextlib.suppress(OSError):  # the plugin's claim of the number: the record has it
            os.unlink(claim)
        # Whoever waited may be gone (a Neovim quit as this started): claude is held all the same.
        with contextlib.suppress(OSError):
            os.write(ready, b"ok " + os.fsencode(listener.getsockname()))
        os.close(ready)
        code = held.run()
    except BaseException as exc:
        import contextlib
        import signal
        if claude > 0:  # started for nothing, not a second ago: nothing of its to keep
            try:
                os.killpg(claude, signal.SIGKILL)
                os.waitpid(claude, 0)
            except OSError:
                pass
        with contextlib.suppress(OSError), open(claim) as file:  # the number, if claimed for this
            if file.read(32).strip() == str(os.getpid()):
                os.unlink(claim)
        with contextlib.suppress(OSError):  # said ok already: served, then failed
            os.write(ready, f"hold: {exc}".encode()[:4000])
    os._exit(code)


def spawn(argv: list[str], size: tuple[int, int], env: dict[str, str]) -> tuple[int, int]:
    """``argv`` started in a new pseudo-terminal of ``size`` (its session's), with ``env`` added
    to its environment: its pid and the terminal's master end. If it cannot run, it says so
    there and exits 127."""
    master, slave = os.openpty()
    set_window(slave, *size)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(master)
            os.login_tty(slave)
            os.environ.update(env)
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"claude-nvim: cannot run {argv[0]}: {exc.strerror}\r\n".encode())
        os._exit(127)
    os.close(slave)
    return pid, master


def record_path(project: str, number: int) -> str:
    """The JSON file of the holder of Claude ``number`` of ``project`` (a real path), where
    ``_project.project_dir`` has it, computed with built-in modules only: claude's environment
    names it, and claude starts before the holder loads ``_project``."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        top = os.path.join(runtime, "claude-nvim")
    else:
        top = os.path.join(os.environ.get("TMPDIR") or "/tmp", f"claude-nvim-{os.getuid()}")
    return os.path.join(top, _sha256_hex(project.encode())[:16], f"claude-{number}.json")


def _sha256_hex(data: bytes) -> str:
    for name in ("_sha2", "_sha256"):  # hashlib would load OpenSSL first: 5 ms
        try:
            module = __import__(name)
        except ImportError:
            continue
        return str(module.sha256(data).hexdigest())
    import hashlib
    return hashlib.sha256(data).hexdigest()
