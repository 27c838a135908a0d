"""The far side of ``claude-nvim remote``: sent as source to the other host's ``python3 -c``
(standard library only, Python 3.6 on), never imported here.

It carries WebSocket bytes only. It listens on the far side's 127.0.0.1, writes the lock file
there (its own pid: it lives exactly as long as the connection) and the model endpoint's
``--mcp-config``, both private, and passes each connection's bytes to this side over its stdin
and stdout, one frame each: kind (1 byte), connection (4), length (4), then that many bytes.
Kinds: ``L`` (from here, once: the lock's JSON and the keepalive), ``R`` (to here, once: the
port and the files), ``O`` (a connection opened), ``D`` (its bytes), ``C`` (it closed), ``P``
(from here: still there). When stdin ends (the launcher stopped, the connection dropped) or
nothing came for three keepalives (a laptop asleep sends no FIN) it removes its files and exits.
"""
# Python 3.6 on: its typing, its formatting.
# ruff: noqa: UP006, UP031, UP035, UP045, SIM105

import json
import os
import signal
import socket
import stat
import struct
import sys
import threading
import time
from typing import Any, Dict, List, NoReturn, Optional, Tuple

HEADER = struct.Struct(">cII")
MAX_DATA = 1 << 16
MAX_LOCK = 1 << 16
MAX_CONNECTIONS = 32

out = sys.stdout.buffer
inp = sys.stdin.buffer
sending = threading.Lock()
connections: Dict[int, socket.socket] = {}
files: List[str] = []
heard = [time.monotonic()]


def send(kind: bytes, number: int, data: bytes = b"") -> None:
    with sending:
        out.write(HEADER.pack(kind, number, len(data)) + data)
        out.flush()


def exactly(size: int) -> Optional[bytes]:
    data = b""
    while len(data) < size:
        chunk = inp.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def frame() -> Optional[Tuple[bytes, int, bytes]]:
    header = exactly(HEADER.size)
    if header is None:
        return None
    heard[0] = time.monotonic()
    kind, number, size = HEADER.unpack(header)
    if size > MAX_DATA:
        raise ValueError("a frame too big")
    data = exactly(size)
    if data is None:
        return None
    return kind, number, data


def clean_up(*_: Any) -> NoReturn:
    for path in files:
        try:
            os.unlink(path)
        except OSError:
            pass
    os._exit(0)


def private_directory() -> str:
    base = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"),
                                                               ".claude")
    directory = os.path.join(base, "ide")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise OSError("the lock directory %s is not a directory of yours" % directory)
    os.chmod(directory, 0o700)
    return directory


def write_private(path: str, text: str) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o600)
    files.append(path)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def pump(number: int, sock: socket.socket) -> None:
    try:
        while True:
            data = sock.recv(MAX_DATA)
            if not data:
                break
            send(b"D", number, data)
    except OSError:
        pass
    if connections.pop(number, None) is not None:
        send(b"C", number)
    sock.close()


def accept(listener: socket.socket) -> None:
    number = 0
    while True:
        sock, _ = listener.accept()
        if len(connections) >= MAX_CONNECTIONS:
            sock.close()
            continue
        number += 1
        connections[number] = sock
        send(b"O", number)
        threading.Thread(target=pump, args=(number, sock), daemon=True).start()


def watch(keepalive: float) -> None:
    while True:
        time.sleep(keepalive)
        if time.monotonic() - heard[0] > 3 * keepalive:
            sys.stderr.write("claude-nvim: nothing from Neovim's side in %g s\n"
                             % (3 * keepalive))
            clean_up()


def main() -> None:
    signal.signal(signal.SIGTERM, clean_up)
    signal.signal(signal.SIGHUP, clean_up)
    out.write(b"claude-nvim-remote agent=%d\n" % os.getpid())
    out.flush()
    first = frame()
    if first is None or first[0] != b"L" or len(first[2]) > MAX_LOCK:
        clean_up()
    said = json.loads(first[2].decode())
    lock = said["lock"]
    assert isinstance(lock, dict)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    directory = private_directory()
    lock["pid"] = os.getpid()
    lock_path = os.path.join(directory, "%d.lock" % port)
    write_private(lock_path, json.dumps(lock))
    config = os.path.join(directory, "mcp-config-%d-%s.json" % (port, os.urandom(8).hex()))
    write_private(config, json.dumps({"mcpServers": {"nvim": {
        "type": "ws", "url": "ws://127.0.0.1:%d/mcp" % port,
        "headers": {"X-Claude-Code-Ide-Authorization": lock["authToken"]}}}}))
    send(b"R", 0, json.dumps({"port": port, "lock": lock_path, "mcp_config": config}).encode())
    threading.Thread(target=accept, args=(listener,), daemon=True).start()
    threading.Thread(target=watch, args=(float(said["keepalive"]),), daemon=True).start()
    while True:
        got = frame()
        if got is None:
            break
        kind, number, data = got
        sock = connections.get(number)
        if sock is None:
            continue  # closed on this side meanwhile
        if kind == b"D":
            try:
                sock.sendall(data)
            except OSError:
                pass
        elif kind == b"C":
            connections.pop(number, None)
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    clean_up()


if __name__ == "__main__":  # python3 -c: never on an import
    try:
        main()
    except Exception as exc:  # it says why on stderr, and cleans up
        sys.stderr.write("claude-nvim: the agent there stopped: %s\n" % exc)
        clean_up()
