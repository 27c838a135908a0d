"""What ``claude-nvim remote`` is made of, without I/O: the target and its transport, the shell
script that runs on the other side, what it reports, and the commands that start a server and a
``claude`` there (:mod:`.remote` runs them)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from .. import __version__

MIN_PYTHON = (3, 11)
INSTALL = ("pipx install claude-nvim (or uv tool install claude-nvim; from a checkout: pipx "
           "install .)")
INSTALL_CLAUDE = "npm install -g @anthropic-ai/claude-code"
CD_AND_RUN = 'cd -- "$1" && shift && exec "$@"'
"""``sh -c`` it with the directory and a command: the command runs there, no quoting needed."""


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
        if not host or "/" in host:
            raise TargetError(f"{text!r} is not HOST[:PATH], ssh://HOST[/PATH], "
                              "docker://CONTAINER[/PATH] or podman://CONTAINER[/PATH]")
        return Target(name=host, path=path or None, ssh_host=host)
    url = urlsplit(text)
    url_path = _url_path(unquote(url.path))
    if scheme[1] == "ssh":
        if not url.hostname:
            raise TargetError(f"{text!r} names no host")
        host = f"{url.username}@{url.hostname}" if url.username else url.hostname
        port = ("-p", str(url.port)) if url.port else ()
        return Target(name=host, path=url_path, ssh_host=host, ssh_options=port)
    if scheme[1] in ("docker", "podman"):
        container = url.netloc
        if not container:
            raise TargetError(f"{text!r} names no container")
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


def probe_script(path: str | None, claude_nvim: Sequence[str], claude: str) -> str:
    """POSIX sh that says, one ``claude-nvim-remote KEY=VALUE`` line each, what Claude needs
    there: the directory (absolute), claude-nvim (its version, or why it does not run), the
    Python, ``claude``. Other lines (a noisy profile) are not ours."""
    if path in ("~", "~/"):  # where the transport starts, for SSH: home
        path = None
    elif path and path.startswith("~/"):
        path = path[2:]
    where = shlex.quote(path) if path else ""
    cd = f"cd -- {where} 2>/dev/null || {{ say missing={where}; exit 0; }}" if path else ""
    return f"""say() {{ printf 'claude-nvim-remote %s\\n' "$*"; }}
{cd}
say cwd="$(pwd)"
if v=$({shlex.join(claude_nvim)} --version 2>&1); then say claude-nvim="$v"
else say no-claude-nvim="$(printf %s "$v" | tail -n 1)"; fi
for p in python3 python; do
  if v=$("$p" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); then
    say python="$p $v"; break
  fi
done
if c=$(command -v {shlex.quote(claude)} 2>/dev/null); then say claude="$c"; else say no-claude=; fi
"""


def ssh_script(probe: str) -> str:
    """The probe, then a private directory for Neovim's forwarded socket (``dir=``); then the
    server's command line, read from stdin, run with ``--nvim <dir>/nvim.sock`` (its end:
    ``exit=N``), until stdin closes: the launcher is done, or gone. Then the server is stopped
    (SIGTERM: it removes its lock) and the directory removed."""
    return f"""{probe}
dir=$(umask 077 && mktemp -d "${{TMPDIR:-/tmp}}/claude-nvim.XXXXXXXX") || {{ say no-dir=; exit 1; }}
trap 'rm -rf -- "$dir"' EXIT
trap 'exit 1' HUP INT PIPE TERM
say dir="$dir"
if ! IFS= read -r serve; then exit 0; fi
( eval "$serve"' --nvim "$dir/nvim.sock"' </dev/null; say exit=$? ) &
cat >/dev/null
trap '' TERM
kill -TERM 0 2>/dev/null
rm -rf -- "$dir"
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
        self.said[key] = value
        return True

    @property
    def done(self) -> bool:
        return "claude" in self.said or "no-claude" in self.said or "missing" in self.said

    def problems(self, target: Target, claude_nvim: Sequence[str], claude: str) -> list[str]:
        """What is missing there, each with how to get it; none when all is there."""
        said, where = self.said, target.name
        if "missing" in said:
            return [f"there is no directory {said['missing']} on {where}"]
        found: list[str] = []
        if "no-claude-nvim" in said:
            python = said.get("python", "")
            version = tuple(int(n) for n in re.findall(r"\d+", python.split(" ")[-1]))[:2]
            command = shlex.join(claude_nvim)
            if python and version < MIN_PYTHON:
                found.append(f"{where} has Python {version[0]}.{version[1]} ({python.split()[0]}); "
                             "claude-nvim needs 3.11 or newer: install a newer Python there "
                             f"(uv tool install --python 3.12 claude-nvim brings its own), then "
                             f"claude-nvim ({INSTALL})")
            elif not python:
                found.append(f"{where} has no Python: install Python 3.11 or newer there, then "
                             f"claude-nvim ({INSTALL})")
            else:
                found.append(f"claude-nvim is not installed on {where} (`{command} --version`: "
                             f"{said['no-claude-nvim'] or 'failed'}): install it there with "
                             f"{INSTALL}, or name it with --remote-command")
        if "no-claude" in said:
            found.append(f"`{claude}` is not on {where}'s PATH: install Claude Code there "
                         f"({INSTALL_CLAUDE}), or name it with --remote-claude")
        return found

    def version_note(self) -> str | None:
        """A note when claude-nvim there is not this version, or None."""
        there = self.said.get("claude-nvim", "").split()
        if len(there) >= 2 and there[-1] != __version__:
            return (f"claude-nvim there is {there[-1]}, here {__version__}: if something does "
                    "not work, install the same version on both sides")
        return None


# The commands.


def quoted(argv: Sequence[str]) -> str:
    """``argv`` as one command line for a POSIX shell (what ssh hands the remote shell)."""
    return shlex.join(argv)


def serve_command(claude_nvim: Sequence[str], pairs: Sequence[tuple[str, str]],
                  via: Mapping[str, Any], *, stdio: bool) -> list[str]:
    """``claude-nvim serve`` there: Neovim through a forwarded socket (``--nvim`` follows) or
    through stdin and stdout, with the path map and how Neovim runs a claude there."""
    command = [*claude_nvim, "serve", "--remote", "--log-level", "warning"]
    for claude_side, neovim_side in pairs:
        command += ["--path-map", f"{claude_side}={neovim_side}"]
    command += ["--claude-via", _json(via)]
    return [*command, "--nvim", "-"] if stdio else command


def claude_command(via: Mapping[str, Any], env: Mapping[str, str], args: Sequence[str],
                   user_args: Sequence[str]) -> list[str]:
    """How Neovim's side runs ``claude`` there: ``via`` (what the server published as
    ``claude.via``), the server's ``env`` and ``args``, then the user's. The Neovim plugin's
    remote.lua builds the same."""
    inner = [*via["shell"], CD_AND_RUN, "claude-nvim", via["cwd"], "env",
             *(f"{k}={v}" for k, v in env.items()), via["claude"], *args, *user_args]
    return [*via["command"], quoted(inner)] if via["quote"] else [*via["command"], *inner]


def _json(value: Any) -> str:
    import json
    return json.dumps(value, separators=(",", ":"))
