"""The early answers: a server handed its listening socket (socket activation, where claude
starts at once) answers claude's IDE connection before it loads the rest of itself.

On a 2-core machine the server's start (imports and set-up, 0.4 s of CPU) slowed claude's own
start, which uses both cores, by 0.1-0.2 s. So the server first waits, with the standard
library, :mod:`.handshake`, :mod:`.frames` and :mod:`.hello` only, for the IDE connection: it
answers the upgrade and ``initialize`` as the server would, and hands the connections over
(:class:`Early`); what claude sends next waits in the socket until the server reads it. It
answers only what goes as claude's connection always goes; at anything else (a refusal, another
first message, a fragment, :data:`MAX_CONNECTIONS`), and after ``seconds``, it stops, and the
server takes every connection where it stands.
"""

from __future__ import annotations

import logging
import selectors
import socket
import time
from dataclasses import dataclass
from typing import Any

from . import hello, jsontext
from .frames import TEXT, FrameReader, Message, frame
from .handshake import Handshake, Upgrade, accept_response
from .jsonrpc import read_message

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 8
"""Connections the early answers take: claude makes two (its IDE and model endpoints)."""
MAX_INITIALIZE_BYTES = 64 * 1024


@dataclass
class Early:
    """A connection the early answers accepted, and how far it got."""

    socket: socket.socket
    received: bytes = b""
    """What the client sent that nobody read: its request so far (no ``upgrade`` yet), or
    what came after the last message answered."""
    upgrade: Upgrade | None = None
    """The upgrade request, once answered with 101."""
    initialize: dict[str, Any] | None = None
    """``initialize``'s params, once answered."""


def answer_first(listening: socket.socket, token: str, *, seconds: float) -> list[Early]:
    """Answer the first connections on ``listening`` until claude's IDE connection is
    initialized, anything else happens, or ``seconds`` have passed; the connections taken."""
    taken: list[Early] = []
    deadline = time.monotonic() + seconds
    with selectors.DefaultSelector() as selector:
        selector.register(listening, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            for key, _ in selector.select(left):
                if key.fileobj is listening:
                    if len(taken) == MAX_CONNECTIONS:
                        return taken
                    try:
                        accepted, _ = listening.accept()
                    except (BlockingIOError, ConnectionError):
                        continue  # taken back by the client: normal life
                    except OSError:  # out of files, say: the server says so, and retries
                        return taken
                    taken.append(Early(accepted))
                    selector.register(accepted, selectors.EVENT_READ, taken[-1])
                    continue
                early: Early = key.data
                try:
                    chunk = early.socket.recv(65536)
                except OSError:
                    chunk = b""
                if not chunk:  # gone: normal life
                    selector.unregister(early.socket)
                    early.socket.close()
                    taken.remove(early)
                    continue
                early.received += chunk
                try:
                    step = _step(early, token)
                except OSError:  # gone while answered: the server finds it closed
                    step = "stop"
                except Exception:  # never the reason the server does not load
                    log.exception("the early answers failed; the server takes over")
                    step = "stop"
                if step == "stop":
                    return taken
                if step == "connected":  # claude is connected: the server may load now
                    return taken
                if step == "wait-for-server":
                    selector.unregister(early.socket)
    return taken


def _step(early: Early, token: str) -> str:
    """Take what ``early`` received: ``more`` (wait for bytes), ``connected`` (initialize
    answered), ``wait-for-server`` (the model endpoint: left to the server), or ``stop``."""
    if early.upgrade is None:
        handshake = Handshake()  # its request so far, parsed whole each time: it is small
        upgrade = handshake.receive(early.received)
        if upgrade is None:
            return "more"
        if not isinstance(upgrade, Upgrade) or hello.refusal(upgrade.headers, token):
            return "stop"
        if hello.endpoint(upgrade.path) != "ide":
            # claude does not wait for it to start; the server answers it in 0.5 s.
            return "wait-for-server"
        early.socket.sendall(accept_response(upgrade.key, hello.subprotocol(upgrade.subprotocols)))
        early.upgrade, early.received = upgrade, upgrade.leftover
        if not early.received:
            return "more"
    reader = FrameReader(MAX_INITIALIZE_BYTES)
    events = reader.feed(early.received, limit=1)
    if not events:
        return "stop" if reader.failed or reader.in_message else "more"
    message = events[0].data if isinstance(events[0], Message) else None
    request = _initialize(message)
    if early.initialize is not None or request is None:
        return "stop"
    answer = {"jsonrpc": "2.0", "id": request["id"],
              "result": hello.initialize_result(request["params"])}
    early.socket.sendall(frame(TEXT, jsontext.dumps(answer)))
    early.initialize, early.received = request["params"], reader.unparsed
    return "connected"


def _initialize(message: str | bytes | None) -> dict[str, Any] | None:
    """``message`` as an ``initialize`` request the server would answer, or None."""
    if not isinstance(message, str):
        return None
    try:
        request = read_message(message)  # as the server reads it: NaN is no JSON
    except (ValueError, RecursionError):
        return None
    if not isinstance(request, dict) or request.get("jsonrpc") != "2.0" \
            or request.get("method") != "initialize" \
            or not isinstance(request.get("id"), (int, str)) or isinstance(request["id"], bool) \
            or not isinstance(request.get("params"), dict):
        return None
    return request
