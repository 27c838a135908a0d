"""Run a command (the test suite) beside processes that burn CPU: a busy machine, on purpose.

    python scripts/under_load.py [--burners N] pytest -n auto

tox's ``load`` environment runs this: no test may fail because the machine is slow (tests wait
for conditions, never for wall-clock time; see docs/architecture.md, "Tests"). The burners
(default 2, one per core of CI's machines) are started first and killed by pid at the end, pass
or fail; the exit status is the command's.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

BURN = "while True: pass"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--burners", type=int, default=2, help="CPU-burning processes")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if not args.command:
        parser.error("no command to run")
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(args.burners)]
    start = time.monotonic()
    try:
        print(f"under_load: {len(burners)} burners (pids "
              f"{', '.join(str(b.pid) for b in burners)}) beside: {' '.join(args.command)}",
              flush=True)
        status = subprocess.run(args.command, check=False).returncode
    finally:
        burnt = 0.0
        for burner in burners:
            burner.kill()
            _, _, usage = os.wait4(burner.pid, 0)  # reaped here, with what it used
            burner.returncode = -signal.SIGKILL
            burnt += usage.ru_utime + usage.ru_stime
    print(f"under_load: exit status {status} in {time.monotonic() - start:.0f} s; "
          f"the burners had {burnt:.1f} s of CPU", flush=True)
    return status


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # tox stopping us: burners die
    sys.exit(main(sys.argv[1:]))
