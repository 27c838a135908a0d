"""The other side for the tests of ``claude-nvim remote``: a real sshd of a second user on
loopback, with keys made here; a "container" (a mount namespace in which the workspace is
bind-mounted at another path, and hidden at its own); a copy of claude-nvim that the second user
can run; and a stand-in claude there (tests/stand_in_claude.py), driven as :class:`StandIn`.

Where the machine cannot (not Linux, not root, no sshd to be had, no namespaces) the tests say
why and skip; on CI (``CI=true``) they fail instead, as CI can.
"""

from __future__ import annotations

import contextlib
import grp
import importlib.metadata
import itertools
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

import claude_nvim
import leftovers
from helpers import WAIT

ROOT = Path(__file__).resolve().parent.parent
STAND_IN = Path(__file__).resolve().parent / "stand_in_claude.py"


def cannot(why: str) -> None:
    """Skip the test, saying why; on CI fail it: CI can run it."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"on CI this must run, but: {why}")
    pytest.skip(why)


def need_root_on_linux() -> None:
    if not sys.platform.startswith("linux"):
        cannot("the remote tests need Linux (namespaces, useradd)")
    if os.geteuid() != 0:
        cannot("the remote tests need root (a second user, its sshd, a mount namespace)")


# The second user, its sshd, and a claude-nvim it can run.


@contextlib.contextmanager
def second_user() -> Iterator[pwd.struct_passwd]:
    """A second user of the test's own (a home, /bin/sh), removed with its processes after."""
    need_root_on_linux()
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        cannot("no useradd/userdel here to make a second user")
    name = leftovers.user_name()
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", name], check=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        leftovers.remove_user(name)


def find_sshd() -> str:
    """An sshd: $CLAUDE_NVIM_SSHD, the system's, or one unpacked from Debian's packages."""
    if given := os.environ.get("CLAUDE_NVIM_SSHD"):
        return given
    if os.access("/usr/sbin/sshd", os.X_OK):
        return "/usr/sbin/sshd"
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import sshd_bundle
    finally:
        sys.path.pop(0)
    try:  # kept between runs, as a cache: outside the run's own $TMPDIR
        return str(sshd_bundle.build(Path(os.environ.get(leftovers.OUTSIDE)
                                          or tempfile.gettempdir()) / "claude-nvim-sshd"))
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        cannot(f"no sshd: {exc}")
        raise  # not reached


def shared_directory(user: pwd.struct_passwd, prefix: str) -> Path:
    """A new directory of ``user``'s that only they (and root) can enter."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    os.chown(path, user.pw_uid, user.pw_gid)
    return path


def installation(directory: Path, user: pwd.struct_passwd | None = None) -> Path:
    """Copy this claude-nvim and what it needs into ``directory`` for another user: its
    ``site`` (for ``PYTHONPATH``) and ``bin/claude-nvim``, ``bin/claude`` (the stand-in), run
    with this Python. Returns ``bin``. What pip would install, without the network."""
    site, bin_dir = directory / "site", directory / "bin"
    package = Path(claude_nvim.__file__).parent
    shutil.copytree(package, site / "claude_nvim",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for dist in _closure("claude-nvim"):
        for file in dist.files or ():
            source = Path(str(file.locate()))
            if "__editable__" in file.name or not source.is_file() \
                    or str(file).startswith(("..", "/", "claude_nvim/")):
                continue
            target = site / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    bin_dir.mkdir(parents=True)
    shutil.copy2(STAND_IN, directory / STAND_IN.name)
    python = python_for_others()
    for name, run in (("claude-nvim", "-m claude_nvim"),
                      ("claude", str(directory / STAND_IN.name))):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {python} {run} "$@"\n')
        script.chmod(0o755)
    if user is not None:
        for path in (directory, *directory.rglob("*")):
            os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)
    return bin_dir


def python_for_others() -> str:
    """This Python (its version: the copied packages are built for it), where anyone may run it:
    its own binary, else the system's of the same version (a pyenv under /root is private)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (os.path.realpath(sys.executable), f"/usr/bin/{version}",
                      f"/usr/local/bin/{version}"):
        path = Path(candidate)
        if path.is_file() and all(os.stat(p).st_mode & 0o001 for p in (path, *path.parents)):
            return str(path)
    cannot(f"no {version} that a second user may run")
    raise AssertionError  # not reached


def _closure(name: str) -> list[importlib.metadata.Distribution]:
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = [name]
    while todo:
        wanted = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if wanted in found:
            continue
        try:
            dist = importlib.metadata.distribution(wanted)
        except importlib.metadata.PackageNotFoundError:
            continue
        found[wanted] = dist
        for requirement in dist.requires or ():
            if "extra ==" not in requirement:
                todo.append(re.match(r"[A-Za-z0-9._-]+", requirement).group(0))
    return list(found.values())


@dataclass
class Sshd:
    """An sshd of ``user`` on 127.0.0.1, and an ssh client config that reaches it as
    ``HOST``, with a key made for the test."""

    HOST = "claude-nvim-test-remote"
    user: pwd.struct_passwd
    port: int
    config: Path
    """The client's: ``ssh -F config HOST``."""
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def ssh(self) -> list[str]:
        return ["ssh", "-F", str(self.config)]


@contextlib.contextmanager
def sshd(client_dir: Path, server_dir: Path, user: pwd.struct_passwd, *,
         environment: dict[str, str], bind_mask: str = "0177") -> Iterator[Sshd]:
    """Run ``user``'s sshd (config, host key and authorized key in ``server_dir``, which is
    theirs) on a free loopback port; the client's key and config in ``client_dir``. Its
    sessions get ``environment`` (sshd's SetEnv)."""
    binary = find_sshd()
    if shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        cannot("no ssh client (openssh-client) here")
    keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", ""]
    subprocess.run([*keygen, "-f", str(server_dir / "host_key")], check=True)
    subprocess.run([*keygen, "-f", str(client_dir / "key")], check=True)
    shutil.copy(client_dir / "key.pub", server_dir / "authorized_keys")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Its sessions are the run's too (leftovers.py), with its $TMPDIR.
    environment = {**environment, leftovers.MARK: os.environ[leftovers.MARK],
                   "TMPDIR": tempfile.gettempdir()}
    set_env = " ".join(f"{k}={v}" for k, v in environment.items())
    (server_dir / "sshd_config").write_text(f"""ListenAddress 127.0.0.1
Port {port}
HostKey {server_dir}/host_key
PidFile none
AuthorizedKeysFile {server_dir}/authorized_keys
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
AllowStreamLocalForwarding yes
StreamLocalBindMask {bind_mask}
{f"SetEnv {set_env}" if set_env else ""}
LogLevel VERBOSE
""")
    host_key = (server_dir / "host_key.pub").read_text().split()
    (client_dir / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    config = client_dir / "ssh_config"
    config.write_text(f"""Host {Sshd.HOST}
  HostName 127.0.0.1
  Port {port}
  User {user.pw_name}
  IdentityFile {client_dir}/key
  IdentitiesOnly yes
  UserKnownHostsFile {client_dir}/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
  LogLevel ERROR
""")
    for path in server_dir.iterdir():
        os.chown(path, user.pw_uid, user.pw_gid)
    log = client_dir / "sshd.log"
    with open(log, "wb") as out:
        # Not root, sshd gives a session's terminal to the user and group tty by chown():
        # it needs that group (the second user's sshd only).
        process = subprocess.Popen(
            [binary, "-D", "-e", "-f", str(server_dir / "sshd_config")], stdout=out,
            stderr=subprocess.STDOUT, user=user.pw_uid, group=user.pw_gid,
            extra_groups=[grp.getgrnam("tty").gr_gid],
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                 leftovers.MARK: os.environ[leftovers.MARK]}, cwd=server_dir)
    try:
        deadline = time.monotonic() + 10
        while b"Server listening" not in log.read_bytes():
            if process.poll() is not None or time.monotonic() > deadline:
                cannot(f"sshd did not start: {log.read_text()[-500:]}")
            time.sleep(0.02)
        yield Sshd(user, port, config, process, log)
    finally:
        process.terminate()
        process.wait(5)


def run_as(user: pwd.struct_passwd, command: list[str], **options: Any
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, user=user.pw_uid, group=user.pw_gid, extra_groups=[],
                          capture_output=True, text=True, check=False, **options)


# A container: a mount namespace.


@contextlib.contextmanager
def container(workspace: Path, inside: Path) -> Iterator[int]:
    """A stand-in for a container: a process in a mount namespace of its own in which
    ``workspace`` is bind-mounted at ``inside`` and hidden where it is (an empty tmpfs over
    it). Yields its pid: ``nsenter --target PID --mount`` is its ``docker exec``."""
    need_root_on_linux()
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        cannot("no unshare/nsenter here (util-linux)")
    inside.mkdir(parents=True, exist_ok=True)
    script = (f"mount --bind {workspace} {inside} && mount -t tmpfs none {workspace} "
              "&& echo ready && exec sleep 1000000")
    process = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None
        if process.stdout.readline().strip() != b"ready":
            cannot(f"no mount namespace here: {process.stderr.read().decode()[-300:]}")
        yield process.pid
    finally:
        process.kill()
        process.wait()


def nsenter(pid: int, directory: str | None = None) -> list[str]:
    """The ``docker exec -i`` of :func:`container`'s: run a command in its mount namespace."""
    return ["nsenter", f"--target={pid}", "--mount", *([f"--wd={directory}"] if directory else [])]


# The stand-in claude.


class StandIn:
    """tests/stand_in_claude.py running elsewhere, as a trio process: call tools, read
    notifications, write files there."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.messages: list[dict[str, Any]] = []
        self._arrived = trio.Event()
        self._ids = itertools.count(1)

    @classmethod
    @contextlib.asynccontextmanager
    async def run(cls, command: list[str], **options: Any):
        async with trio.open_nursery() as nursery:
            process = await nursery.start(partial_run(command, **options))
            stand_in = cls(process)
            nursery.start_soon(stand_in._read)
            try:
                yield stand_in
            finally:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await process.stdin.aclose()
                with trio.move_on_after(5):
                    await process.wait()
                nursery.cancel_scope.cancel()

    async def _read(self) -> None:
        buffer = b""
        while chunk := await self.process.stdout.receive_some(65536):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip().startswith(b"{"):
                    self.messages.append(json.loads(line))
                    self._arrived.set()
                    self._arrived = trio.Event()
        self.messages.append({"ended": self.process.returncode})
        self._arrived.set()

    async def first(self, match: Callable[[dict[str, Any]], bool], *, after: int = 0,
                    timeout: float = WAIT) -> dict[str, Any]:
        """The first message from index ``after`` on that ``match`` takes."""
        with trio.move_on_after(timeout):
            while True:
                for message in self.messages[after:]:
                    if match(message):
                        return message
                    if "ended" in message or "error" in message:
                        raise AssertionError(f"the stand-in claude stopped: {self.messages}")
                await self._arrived.wait()
        raise AssertionError(f"not in {timeout:g} s; the last messages: {self.messages[-6:]}")

    async def connected(self) -> dict[str, Any]:
        return await self.first(lambda m: "connected" in m)

    async def send(self, **command: Any) -> int:
        command["id"] = number = next(self._ids)
        await self.process.stdin.send_all(json.dumps(command).encode() + b"\n")
        return number

    async def answer(self, number: int, timeout: float = WAIT) -> dict[str, Any]:
        return await self.first(lambda m: m.get("id") == number, timeout=timeout)

    async def call(self, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """A tool's ``tools/call`` result (``isError`` and all)."""
        answer = await self.answer(await self.send(call=name, args=args or {}))
        assert "result" in answer, answer
        return answer["result"]

    async def call_json(self, name: str, args: dict[str, Any] | None = None) -> Any:
        result = await self.call(name, args)
        assert not result.get("isError"), result
        return json.loads(result["content"][0]["text"])

    async def notification(self, method: str, match: Callable[[dict[str, Any]], bool]
                           = lambda params: True, after: int = 0) -> dict[str, Any]:
        found = await self.first(lambda m: m.get("notification", {}).get("method") == method
                                 and match(m["notification"].get("params")), after=after)
        return found["notification"]["params"]


def partial_run(command: list[str], **options: Any):
    async def start(task_status=trio.TASK_STATUS_IGNORED):
        await trio.run_process(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               check=False, task_status=task_status, **options)
    return start
