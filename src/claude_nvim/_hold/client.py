"""The attach client: this terminal relayed to a holder's socket, and back (where the plugin
cannot attach a held Claude's terminal itself, claude_nvim/attach.lua, and for a shell's
``claude-nvim hold --attach``).

Its terminal is put in raw mode: every key goes to claude as typed. Its window size
goes along at attach and at each change (SIGWINCH); its Neovim's address ($NVIM) at attach, for
claude's editor. It ends with claude's status when claude exits, at once when its terminal
closes (the holder goes on), or with 1 and why.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
import termios
import tty

from . import protocol as p
from .terminal import window


def attach(path: str) -> int:
    """Relay this terminal to the holder at ``path``."""
    sock = _connect(path)
    if isinstance(sock, str):
        print(f"claude-nvim: no Claude holds {path} any more ({sock})", file=sys.stderr)
        return 1
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    saved = None
    with contextlib.suppress(termios.error):
        saved = termios.tcgetattr(stdin)
        # TCSANOW, not setraw's TCSAFLUSH: what was typed before the client ran is the user's,
        # not to be thrown away (a line typed at once was lost).
        tty.setraw(stdin, termios.TCSANOW)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGWINCH, lambda *_: None)
    try:
        # $NVIM: the Neovim whose terminal this is (Neovim sets it in its jobs' environment).
        sock.sendall(p.frame(p.ATTACH, p.attach(*window(stdin), os.environ.get("NVIM"))))
        return _relay(sock, stdin, stdout, wake_r)
    finally:
        if saved is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(stdin, termios.TCSANOW, saved)
        sock.close()


def _relay(sock: socket.socket, stdin: int, stdout: int, wake: int) -> int:
    reader = p.Reader()
    while True:
        ready, _, _ = select.select([sock.fileno(), wake, stdin], [], [])
        if wake in ready:
            os.read(wake, 4096)
            sock.sendall(p.frame(p.SIZE, p.window(*window(stdin))))
        if stdin in ready:
            data = os.read(stdin, 65536)
            if not data:  # the terminal closed: only this client ends
                return 0
            sock.sendall(p.frame(p.INPUT, data))
        if sock.fileno() in ready:
            try:
                data = sock.recv(1 << 16)
                messages = reader.feed(data)
            except (OSError, p.ProtocolError):
                data = b""
            if not data:
                os.write(2, b"\r\nclaude-nvim: the holder of this Claude is gone\r\n")
                return 1
            for kind, payload in messages:
                if kind == p.OUTPUT:
                    _write_all(stdout, payload)
                elif kind == p.EXIT:
                    return int(payload or b"1")
                elif kind == p.REFUSED:
                    os.write(2, b"claude-nvim: " + payload + b"\r\n")
                    return 75  # EX_TEMPFAIL: it runs, elsewhere


def _connect(path: str) -> socket.socket | str:
    """A connection to the holder at ``path``, or why not."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)  # a listener that accepts nothing (a full backlog): EAGAIN
    try:
        sock.connect(path)
    except OSError as exc:
        sock.close()
        return exc.strerror or str(exc)
    sock.setblocking(True)
    return sock


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
