"""What ``claude-nvim remote`` is made of, without I/O: the target and its transport, the shell
script that runs on the other side (a probe, then the agent: ``far_agent.py``), what it reports,
the frames the agent speaks (:class:`Frames`: what the other side says is untrusted, read with
strict bounds) and the command that runs a ``claude`` there (:mod:`.remote` runs them)."""

from __future__ import annotations

import importlib.resources
import json
import re
import shlex
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

MIN_PYTHON = (3, 6)
INSTALL_PYTHON = "apt-get install python3, apk add python3, dnf install python3"
INSTALL_CLAUDE = "npm install -g @anthropic-ai/claude-code"
NO_PROXY = "localhost,127.0.0.1,::1"
CD_AND_RUN = ('cd -- "$1" && shift && export no_proxy="${no_proxy:+$no_proxy,}' + NO_PROXY
              + '" NO_PROXY="${NO_PROXY:+$NO_PROXY,}' + NO_PROXY + '" && exec "$@"')
"""``sh -c`` it with the directory and a command: the command runs there (the CLI's own
connections to 127.0.0.1 bypass a proxy), no quoting needed."""


class TargetError(ValueError):
    """A target that names no host, container or transport."""


@dataclass(frozen=True)
class Target:
    """Where Claude runs: over SSH, or through a command that runs its arguments there."""

    name: str
    """How messages call it: the host (``me@box``) or the container."""
    path: str | None
    """The directory Claude works in there; ``None``: wherever the transport starts."""
    ssh_host: str | None = None
    ssh_options: tuple[str, ...] = ()
    """``-p PORT`` and the like, from the target itself."""
    pipe: tuple[str, ...] = ()
    """For the others: the command that runs its arguments there, stdin and stdout piped
    (``docker exec -i box``)."""
    tty: tuple[str, ...] = ()
    """... and the one that runs them with a terminal (``docker exec -i -t box``)."""

    @property
    def is_ssh(self) -> bool:
        return self.ssh_host is not None


def parse_target(text: str, via: str | None = None, via_tty: str | None = None) -> Target:
    """``[user@]host[:path]``, ``ssh://[user@]host[:port][/path]``, ``docker://box[/path]``,
    ``podman://box[/path]``; with ``via`` (a command), ``text`` is only the path there."""
    if via is not None:
        pipe = tuple(shlex.split(via))
        if not pipe:
            raise TargetError("--via needs a command, e.g. --via 'docker exec -i box'")
        tty = tuple(shlex.split(via_tty)) if via_tty else pipe
        return Target(name=f"`{shlex.join(pipe)}`", path=text or None, pipe=pipe, tty=tty)
    scheme = re.match(r"^([a-z][a-z0-9+.-]*)://", text)
    if scheme is None:  # scp's form
        host, _, path = text.partition(":")
        if not host or "/" in host or host.startswith("-"):
            raise TargetError(f"{text!r} is not HOST[:PATH], ssh://HOST[/PATH], "
                              "docker://CONTAINER[/PATH] or podman://CONTAINER[/PATH]")
        return Target(name=host, path=path or None, ssh_host=host)
    url = urlsplit(text)
    url_path = _url_path(unquote(url.path))
    if scheme[1] == "ssh":
        if not url.hostname:
            raise TargetError(f"{text!r} names no host")
        host = f"{url.username}@{url.hostname}" if url.username else url.hostname
        if host.startswith("-"):
            raise TargetError(f"{text!r}: a host may not start with '-' (ssh would take it "
                              "for an option)")
        port = ("-p", str(url.port)) if url.port else ()
        return Target(name=host, path=url_path, ssh_host=host, ssh_options=port)
    if scheme[1] in ("docker", "podman"):
        container = url.netloc
        if not container:
            raise TargetError(f"{text!r} names no container")
        if container.startswith("-"):
            raise TargetError(f"{text!r}: a container may not start with '-'")
        runtime = scheme[1]
        return Target(name=container, path=url_path, pipe=(runtime, "exec", "-i", container),
                      tty=(runtime, "exec", "-i", "-t", container))
    raise TargetError(f"{text!r}: {scheme[1]}:// is not ssh://, docker:// or podman:// "
                      "(any other transport: --via COMMAND)")


def _url_path(path: str) -> str | None:
    if path in ("", "/"):
        return None if path == "" else "/"
    return path[1:] if path.startswith("/~") else path  # ssh://box/~/src: home's


# The script that runs there.


def agent_source() -> str:
    """``far_agent.py``, the source the other side's Python runs (``python3 -c``)."""
    return (importlib.resources.files(__package__) / "far_agent.py").read_text()


def probe_script(path: str | None, python: str, claude: str) -> str:
    """POSIX sh that says, one ``claude-nvim-remote KEY=VALUE`` line each, what Claude needs
    there: the directory (absolute), a Python 3, ``claude``; then, when all is there, runs the
    agent (its source: ``$1``) with that Python, which says ``agent=PID`` and speaks frames from
    then on. Other lines (a noisy profile) are not ours."""
    if path in ("~", "~/"):  # where the transport starts, for SSH: home
        path = None
    elif path and path.startswith("~/"):
        path = path[2:]
    where = shlex.quote(path) if path else ""
    cd = f"cd -- {where} 2>/dev/null || {{ say missing={where}; exit 0; }}" if path else ""
    return f"""say() {{ printf 'claude-nvim-remote %s\\n' "$*"; }}
{cd}
say cwd="$(pwd)"
py=
for p in {shlex.quote(python)} python3 python; do
  if v=$("$p" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); then
    case $v in 3.*) say python="$p $v"; py=$p; break;; esac
  fi
done
[ -n "$py" ] || say no-python=
if c=$(command -v {shlex.quote(claude)} 2>/dev/null); then say claude="$c"; else say no-claude=; fi
if [ -z "$py" ] || [ -z "$c" ]; then say end=; exit 0; fi
exec "$py" -c "$1"
"""


@dataclass
class Probe:
    """What the probe said."""

    said: dict[str, str] = field(default_factory=dict)

    def take(self, line: str) -> bool:
        """Take one line of output; whether it was the probe's."""
        if not line.startswith("claude-nvim-remote "):
            return False
        key, _, value = line[len("claude-nvim-remote "):].partition("=")
        self.said[key] = printable(value[:MAX_LINE])
        return True

    @property
    def done(self) -> bool:
        """The probe ended: the agent runs (``agent``), or it could not."""
        return "agent" in self.said or "end" in self.said or "missing" in self.said

    def problems(self, target: Target, python: str, claude: str) -> list[str]:
        """What is missing there, each with how to get it; none when all is there."""
        said, where = self.said, target.name
        if "missing" in said:
            return [f"there is no directory {said['missing']} on {where}"]
        found: list[str] = []
        if "no-python" in said:
            found.append(f"{where} has no Python 3 (`{python}`, python3, python): install one "
                         f"there ({INSTALL_PYTHON}), or name it with --remote-python")
        if "no-claude" in said:
            found.append(f"`{claude}` is not on {where}'s PATH: install Claude Code there "
                         f"({INSTALL_CLAUDE}), or name it with --remote-claude")
        return found


def printable(text: str) -> str:
    """What the other side said, fit for a terminal and for Neovim: control characters (a
    terminal's escapes) become ``?``."""
    return "".join(c if c.isprintable() else "?" for c in text)


# The agent's frames.

MAX_LINE = 4096
"""The longest line the other side may say before the agent runs (a profile's, the probe's)."""
MAX_PREAMBLE = 1 << 20
"""What it may say, in all, before the agent runs."""
HEADER = struct.Struct(">cII")
MAX_DATA = 1 << 16
"""The largest frame: the agent reads 64 KiB at a time."""
MAX_CONNECTIONS = 32
"""Connections at once from the CLIs there (each claude has one or two)."""
FROM_THERE = (b"R", b"O", b"D", b"C")
TO_THERE = (b"L", b"D", b"C", b"P")


class ProtocolError(ValueError):
    """The other side said something the agent never says: the connection ends."""


@dataclass(frozen=True)
class Frame:
    kind: bytes
    number: int
    data: bytes


def frame(kind: bytes, number: int, data: bytes = b"") -> bytes:
    """One frame to the agent."""
    assert kind in TO_THERE and len(data) <= MAX_DATA
    return HEADER.pack(kind, number, len(data)) + data


class Frames:
    """The agent's frames from what the other side sends, checked: a known kind, a size within
    bounds, connections opened before used and at most :data:`MAX_CONNECTIONS` at once, one
    ready. Anything else raises :class:`ProtocolError`: nothing it says is ever run here."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.open: set[int] = set()
        self._ready = False

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames: list[Frame] = []
        while len(self._buffer) >= HEADER.size:
            kind, number, size = HEADER.unpack_from(self._buffer)
            if kind not in FROM_THERE:
                raise ProtocolError(f"a frame of an unknown kind ({kind!r})")
            if size > MAX_DATA:
                raise ProtocolError(f"a frame of {size} bytes (at most {MAX_DATA})")
            if len(self._buffer) < HEADER.size + size:
                break
            payload = bytes(self._buffer[HEADER.size:HEADER.size + size])
            del self._buffer[:HEADER.size + size]
            frames.append(self._check(Frame(kind, number, payload)))
        return frames

    def _check(self, got: Frame) -> Frame:
        if got.kind == b"R":
            if self._ready:
                raise ProtocolError("ready twice")
            self._ready = True
        elif not self._ready:
            raise ProtocolError("a connection before the agent was ready")
        elif got.kind == b"O":
            if got.number in self.open or got.data:
                raise ProtocolError(f"connection {got.number} opened twice")
            if len(self.open) >= MAX_CONNECTIONS:
                raise ProtocolError(f"more than {MAX_CONNECTIONS} connections")
            self.open.add(got.number)
        elif got.number not in self.open:
            # Closed here while the agent still sent: that is fine, and dropped.
            return Frame(b"", got.number, b"")
        elif got.kind == b"C":
            self.open.discard(got.number)
        return got


@dataclass(frozen=True)
class Ready:
    """What the agent says once listening: its port there, its lock and --mcp-config files."""

    port: int
    lock: str
    mcp_config: str


def parse_ready(data: bytes) -> Ready:
    """The agent's ``R`` frame, strictly: a port, two absolute paths of sane length."""
    try:
        said = json.loads(data)
    except ValueError as exc:
        raise ProtocolError("its ready frame is not JSON") from exc
    if not isinstance(said, dict) or set(said) != {"port", "lock", "mcp_config"}:
        raise ProtocolError("its ready frame is not the agent's")
    port, lock, config = said["port"], said["lock"], said["mcp_config"]
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise ProtocolError("its port is not one")
    for path in (lock, config):
        if not isinstance(path, str) or not path.startswith("/") or len(path) > 1024 \
                or any(c < " " for c in path):
            raise ProtocolError("its files are not paths")
    return Ready(port, lock, config)


# The commands.


def quoted(argv: Sequence[str]) -> str:
    """``argv`` as one command line for a POSIX shell (what ssh hands the remote shell)."""
    return shlex.join(argv)


def reach_command(target: Target, ssh: Sequence[str], argv: Sequence[str], *,
                  tty: bool) -> list[str]:
    """``argv`` run there: over SSH (``--`` before the host; the remote shell gets one quoted
    line), else through the target's command."""
    if target.is_ssh:
        assert target.ssh_host is not None
        # The agent's connection: ssh finds out when the other host is gone.
        alive = ["-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=4"]
        return [*ssh, *target.ssh_options, *(["-t"] if tty else ["-T", *alive]), "--",
                target.ssh_host, quoted(argv)]
    return [*(target.tty if tty else target.pipe), *argv]


def agent_command(target: Target, ssh: Sequence[str], python: str, claude: str) -> list[str]:
    """The probe, then the agent, there."""
    script = probe_script(target.path, python, claude)
    shell = ["sh", "-lc"] if target.is_ssh else ["sh", "-c"]  # a login's PATH: npm's claude
    return reach_command(target, ssh, [*shell, script, "claude-nvim", agent_source()],
                         tty=False)


CLAUDE_ENV = ("CLAUDE_CODE_SSE_PORT", "ENABLE_IDE_INTEGRATION", "FORCE_CODE_TERMINAL")
"""What a claude there gets from here: the port there and the switches; nothing else of this
host's environment."""


def claude_command(target: Target, ssh: Sequence[str], claude: str, env: Mapping[str, str],
                   args: Sequence[str]) -> list[str]:
    """``claude`` there, in the target's directory, with the IDE's ``env`` (only
    :data:`CLAUDE_ENV`) and ``args``, in a terminal."""
    path = target.path or "."
    if path in ("~", "~/"):
        path = "."
    elif path.startswith("~/"):
        path = path[2:]
    pairs = [f"{k}={env[k]}" for k in CLAUDE_ENV if k in env]
    shell = ["sh", "-lc"] if target.is_ssh else ["sh", "-c"]
    return reach_command(target, ssh, [*shell, CD_AND_RUN, "claude-nvim", path, "env", *pairs,
                                       claude, *args], tty=True)
