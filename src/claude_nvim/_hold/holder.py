"""The holder: claude in a pseudo-terminal of its own, served on a Unix socket.

It runs in a session of its own (so that Neovim's terminal closing does not hang it up) and
serves one attached client at a time: what claude writes goes to the ring and to that client;
what the client types goes to claude, and its window size is claude's. Memory is bounded: the
ring, at most ``BEHIND`` bytes waiting for a slow client (then claude's output is not read,
and claude waits, as it would for a slow terminal), frames of at most a MiB.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import signal
import socket
import time
from pathlib import Path
from typing import Any

from .._project import remove_if_empty, write_record
from . import protocol as p
from .terminal import set_window

RING_BYTES = 1 << 20
BEHIND = 256 * 1024
MAX_CONNECTIONS = 8
FIRST_CLIENT_SECONDS = 5.0
"""A claude that exits before any client attached (it could not start, say) is held this long
for the first one, which the plugin starts at once: it shows what claude said, and its status."""
NUDGE_SECONDS = 0.2
"""After a replay at claude's own size, the window is one column narrower this long: a real
change of size, so that claude draws its screen again (node reports only changes)."""


def bind(path: Path) -> socket.socket:
    """The holder's listening socket at ``path`` (0600); FileExistsError if a holder listens
    there already. A socket no one listens on (its holder was killed) is replaced."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        try:
            listener.bind(str(path))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.setblocking(False)  # a full backlog says EAGAIN: someone listens
                try:
                    probe.connect(str(path))
                except (ConnectionRefusedError, FileNotFoundError):
                    path.unlink(missing_ok=True)
                    listener.bind(str(path))
                    return _listening(listener)
                except BlockingIOError:
                    pass
                raise FileExistsError(f"{path} is served by a live holder") from None
    except BaseException:
        listener.close()
        raise
    finally:
        os.umask(old_umask)
    return _listening(listener)


def _listening(listener: socket.socket) -> socket.socket:
    listener.listen(MAX_CONNECTIONS)
    return listener


class Connection:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = p.Reader()
        self.out = bytearray()
        self.pid = p.peer_pid(sock)

    def alive(self) -> bool:
        """Whether its other end is still there (a dead client's end reads as closed)."""
        try:
            return self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
        except BlockingIOError:
            return True
        except OSError:
            return False


class Holder:
    def __init__(self, listener: socket.socket, record_path: Path, record: dict[str, Any],
                 claude: int, master: int, size: tuple[int, int]) -> None:
        self.listener = listener
        self.record_path = record_path
        self.record = record
        self.ring = p.Ring(RING_BYTES)
        self.size = size
        self.attached: Connection | None = None
        self.connections: list[Connection] = []
        self.selector = selectors.DefaultSelector()
        self.typing = bytearray()  # typed, not yet read by claude's terminal
        self.claude_open = True  # claude's terminal: until it reads as closed
        self.nudge_at: float | None = None
        self.status: int | None = None
        self.stops = 0
        self.attaches = 0  # the first client is the one that started it: no replay to redraw
        # What claude wrote before this ran, which the Neovim that started it (its pid) showed
        # as its terminal (launch.adopt): the ring begins with it, that Neovim is not shown it
        # again. `fresh`: the bytes the ring has had since.
        self.shown_by, self.fresh = 0, 0
        self.pid, self.master = claude, master  # claude, started (launch.py), and its pty
        os.set_blocking(self.master, False)
        write_record(record_path, record)

    def run(self) -> int:
        """Serve until claude exits; its status."""
        wake_r, wake_w = os.pipe()
        for fd in (wake_r, wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: self.stop())
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self.selector.register(wake_r, selectors.EVENT_READ, "wake")
        self.selector.register(self.listener, selectors.EVENT_READ, "listener")
        ended = 0.0  # when claude was found ended with no client yet
        try:
            while True:
                if self.status is None:
                    self.reap()
                if self.status is not None:
                    if self.attaches:
                        break
                    ended = ended or time.monotonic()
                    if time.monotonic() - ended >= FIRST_CLIENT_SECONDS:
                        break
                self.interest()
                now = time.monotonic()
                timeout = None if self.nudge_at is None else max(0.0, self.nudge_at - now)
                if ended:
                    timeout = max(0.0, ended + FIRST_CLIENT_SECONDS - now)
                for key, events in self.selector.select(timeout):
                    if key.data == "wake":
                        with contextlib.suppress(BlockingIOError):
                            os.read(wake_r, 4096)
                    elif key.data == "listener":
                        self.accept()
                    elif key.data == "master":
                        self.claude_events(events)
                    elif key.data in self.connections:
                        self.serve(key.data, events)
                if self.nudge_at is not None and time.monotonic() >= self.nudge_at:
                    self.nudge_at = None
                    set_window(self.master, *self.size)
            self.finish()
        finally:
            self.record_path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                os.unlink(self.listener.getsockname())
            remove_if_empty(self.record_path.parent)
        return self.status

    def interest(self) -> None:
        """What to wait for: claude's output unless the client is too far behind, the
        client's input unless claude's terminal has not read what it typed before."""
        behind = self.attached is not None and len(self.attached.out) >= BEHIND
        self._want(self.master, (selectors.EVENT_READ if self.claude_open and not behind else 0)
                   | (selectors.EVENT_WRITE if self.typing else 0), "master")
        for connection in self.connections:
            reading = not (connection is self.attached and len(self.typing) >= BEHIND)
            self._want(connection.sock, (selectors.EVENT_READ if reading else 0)
                       | (selectors.EVENT_WRITE if connection.out else 0), connection)

    def _want(self, fileobj: Any, events: int, data: Any) -> None:
        registered = fileobj in self.selector.get_map()
        if not events:
            if registered:
                self.selector.unregister(fileobj)
        elif registered:
            self.selector.modify(fileobj, events, data)
        else:
            self.selector.register(fileobj, events, data)

    def stop(self) -> None:
        """End claude: hung up as a closed terminal would; killed the third time."""
        self.stops += 1
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGKILL if self.stops >= 3 else signal.SIGHUP)

    def reap(self) -> None:
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:  # reaped by the system (SIGCHLD ignored when it ended)
            self.status = 1
            return
        if pid == self.pid:
            self.status = p.exit_status(status)

    def finish(self) -> None:
        """claude exited: what it wrote last, then its status, to the client."""
        with contextlib.suppress(OSError):
            while self.claude_open and (data := os.read(self.master, 65536)):
                self._output(data)
        # Its number is free once the client hears of the end (a new Claude may take it).
        self.record_path.unlink(missing_ok=True)
        client = self.attached
        if client is not None:
            client.out += p.frame(p.EXIT, str(self.status).encode())
            client.sock.settimeout(5)
            with contextlib.suppress(OSError):
                client.sock.sendall(client.out)
        os.close(self.master)

    def accept(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return
        if len(self.connections) >= MAX_CONNECTIONS:
            sock.close()
            return
        sock.setblocking(False)
        self.connections.append(Connection(sock))

    def drop(self, connection: Connection) -> None:
        if connection not in self.connections:
            return
        self.connections.remove(connection)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(connection.sock)
        connection.sock.close()
        if connection is self.attached:
            self.attached = None
            self.typing.clear()
            self.record.update(attached=None, nvim=None)
            write_record(self.record_path, self.record)

    def claude_events(self, events: int) -> None:
        if events & selectors.EVENT_WRITE and self.typing:
            try:
                del self.typing[:os.write(self.master, self.typing)]
            except BlockingIOError:
                pass
            except OSError:
                self.typing.clear()
        if not events & selectors.EVENT_READ:
            return
        try:
            data = os.read(self.master, 65536)
        except BlockingIOError:
            return
        except OSError:  # EIO: no one has claude's terminal open any more
            data = b""
        if not data:
            self.claude_open = False
            return
        self._output(data)

    def shown(self, data: bytes, by: int) -> None:
        """``data``, what claude wrote before this ran, begins the ring; Neovim ``by`` (a
        pid) showed it."""
        self.ring.write(data)
        self.shown_by = by

    def _output(self, data: bytes) -> None:
        self.ring.write(data)
        self.fresh += len(data)
        client = self.attached
        if client is not None:
            client.out += p.frame(p.OUTPUT, data)

    def serve(self, connection: Connection, events: int) -> None:
        if events & selectors.EVENT_WRITE:
            try:
                del connection.out[:connection.sock.send(connection.out)]
            except BlockingIOError:
                pass
            except OSError:
                return self.drop(connection)
        if not events & selectors.EVENT_READ:
            return
        try:
            data = connection.sock.recv(65536)
            messages = connection.reader.feed(data) if data else None
        except BlockingIOError:
            return
        except (OSError, p.ProtocolError):
            messages = None
        if messages is None:
            return self.drop(connection)
        for kind, payload in messages:
            try:
                self.handle(connection, kind, payload)
            except (p.ProtocolError, UnicodeDecodeError):
                return self.drop(connection)

    def handle(self, connection: Connection, kind: bytes, payload: bytes) -> None:
        if kind == p.ATTACH:
            other = self.attached
            if other is not None and other is not connection and other.alive():
                connection.out += p.frame(p.REFUSED, (
                    f"Claude {self.record.get('number')} is open in another Neovim (its "
                    f"terminal's pid: {other.pid})").encode())
                connection.sock.settimeout(1)
                with contextlib.suppress(OSError):
                    connection.sock.sendall(connection.out)
                return self.drop(connection)
            size, nvim = p.read_attach(payload)
            if other is not None and other is not connection:
                self.drop(other)
            self.attached = connection
            self.attaches += 1
            self.record.update(attached=connection.pid, nvim=nvim)
            write_record(self.record_path, self.record)
            nudge = size == self.size and self.attaches > 1
            replay = self.ring.contents()
            if self.attaches == 1 and connection.pid == self.shown_by:  # it showed the rest
                replay = replay[max(0, len(replay) - self.fresh):]
            self.shown_by = 0  # (any later attach, that one's too, is shown all)
            connection.out += p.frames(p.OUTPUT, replay)
            if nudge:  # a real change of size, then back: claude draws its screen again
                set_window(self.master, size[0], max(1, size[1] - 1))
                self.nudge_at = time.monotonic() + NUDGE_SECONDS
            self._resize(size)
        elif kind == p.INPUT and connection is self.attached:
            self.typing += payload
        elif kind == p.SIZE and connection is self.attached:
            self._resize(p.read_window(payload))
        elif kind == p.NAME:
            name = payload.decode().strip()
            self.record.update(name=name[:1024] or None)
            write_record(self.record_path, self.record)
        elif kind == p.STOP:
            self.stop()

    def _resize(self, size: tuple[int, int]) -> None:
        self.size = size
        if self.nudge_at is None:
            set_window(self.master, *size)

