"""Run luacheck over every .lua file of the checkout (tox's ``lint`` environment runs this).

    python scripts/luacheck.py [CACHE]

The settings are the checkout's ``.luacheckrc``. The luacheck is ``luacheck`` on PATH if there
is one, else Debian's (``lua-check``, with the Lua 5.1 and the two libraries it runs on)
unpacked into CACHE (default ``.tox/luacheck``): fetched once with ``apt-get download`` and
``dpkg-deb -x``, as ``shared/tools/nvim_bundle.sh`` fetches Neovim. Nothing is installed and no
system file changes, but for ``apt-get update`` as root on a machine whose package lists are
empty (a fresh CI container). Exits with luacheck's status; 2 when there is no luacheck.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["lua-check", "lua-argparse", "lua-filesystem", "lua5.1", "liblua5.1-0"]
"""luacheck, the Lua it runs on, and what it requires (argparse, lfs)."""


def _download(into: Path) -> None:
    """``apt-get download`` of :data:`PACKAGES` into ``into``; as root, once more after an
    ``apt-get update`` if that fails (empty package lists)."""
    # As root, apt downloads as the _apt user, who cannot write to a private directory.
    sandbox = ["-o", "APT::Sandbox::User=root"] if os.geteuid() == 0 else []
    fetch = ["apt-get", "download", "-q", *sandbox, *PACKAGES]
    if subprocess.run(fetch, cwd=into, check=False).returncode == 0:
        return
    if os.geteuid() != 0:
        raise RuntimeError("apt-get download failed (as root, the lists would be updated)")
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(fetch, cwd=into, check=True)


def _bundle(cache: Path) -> list[str]:
    """The command that runs the luacheck unpacked in ``cache``, unpacking it first if need
    be; raises ``RuntimeError`` (or ``OSError``) when it cannot."""
    root = cache / "root"
    script = root / "usr" / "bin" / "luacheck"
    if not script.exists():
        if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
            raise RuntimeError("no apt-get and dpkg-deb here to fetch Debian's lua-check")
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True)
        with tempfile.TemporaryDirectory(dir=cache) as debs:
            _download(Path(debs))
            for deb in sorted(Path(debs).glob("*.deb")):
                subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    lua = root / "usr" / "bin" / "lua5.1"
    lfs = glob.glob(str(root / "usr" / "lib" / "*" / "lua" / "5.1" / "lfs.so"))
    if not (lua.exists() and script.exists() and lfs):
        raise RuntimeError(f"{cache} holds no complete luacheck: remove it and run again")
    share = root / "usr" / "share" / "lua" / "5.1"
    os.environ["LUA_PATH"] = f"{share}/?.lua;{share}/?/init.lua"
    os.environ["LUA_CPATH"] = str(Path(lfs[0]).parent / "?.so")
    # liblua5.1.so.0 sits beside the multiarch directory lfs.so is under.
    libraries = str(Path(lfs[0]).parents[2])
    os.environ["LD_LIBRARY_PATH"] = os.pathsep.join(
        filter(None, [libraries, os.environ.get("LD_LIBRARY_PATH")]))
    return [str(lua), str(script)]


def main() -> int:
    cache = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / ".tox" / "luacheck"
    on_path = shutil.which("luacheck")
    try:
        command = [on_path] if on_path else _bundle(cache.resolve())
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        print(f"luacheck.py: no luacheck ({exc}); install one (apt install lua-check, or "
              "luarocks install luacheck) or run this on Debian", file=sys.stderr)
        return 2
    # --no-cache: luacheck's own cache is a file in the checkout.
    return subprocess.run([*command, "--no-cache", "-q", "--no-color", "--codes", "."],
                          cwd=ROOT, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
