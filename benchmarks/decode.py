"""How long the server takes to read one incoming message (``mcp.read_message``), in µs.

    .venv/bin/python -m benchmarks.decode

Compare with plain ``jsontext.loads`` (orjson): ordinary messages must cost the same; only a
message with a float id (an integer past 64 bits, as orjson reads it) is read again, exactly.
"""

from __future__ import annotations

import json
import timeit
from collections.abc import Callable
from typing import Any

from claude_nvim._mcp import read_message
from claude_nvim._wire import jsontext


def call(request_id: Any, name: str, arguments: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments}})


SOURCE = "".join(f"    x_{i} = compute({i}, 'text')  # {i * 7}\n" for i in range(20_000))
MESSAGES = {
    "small (getDiagnostics)": call(17, "getDiagnostics", {"uri": "file:///home/u/src/main.py"}),
    "1.2 MB (openDiff)": call(18, "openDiff", {"old_file_path": "/a/b.py", "tab_name": "t",
                                              "new_file_path": "/a/b.py",
                                              "new_file_contents": SOURCE}),
    "small, id 2**70": call(2**70, "getDiagnostics", {}),
}


def microseconds(read: Callable[[str], Any], text: str) -> float:
    number = max(10, 2_000_000 // len(text))
    return min(timeit.repeat(lambda: read(text), number=number, repeat=7)) / number * 1e6


if __name__ == "__main__":
    print(f"{'message':24} {'jsontext.loads':>15} {'read_message':>13}")
    for label, text in MESSAGES.items():
        print(f"{label:24} {microseconds(jsontext.loads, text):12.2f} µs"
              f" {microseconds(read_message, text):10.2f} µs")
