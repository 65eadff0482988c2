"""Import cost of the MCP extras: what they add to the MCP server's start-up, and what each tool pays
on its first call (its Google client). Prints medians over fresh interpreters.

    .venv/bin/python benchmarks/bench_extras_import.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from _support import count

CASES = {
    "mcp_tools.extras (all extras functions)": "import mcp_tools.extras",
    "mcp.server.fastmcp alone (the server pays this anyway)": "import mcp.server.fastmcp",
    "mcp_tools.extras.mcp_register (+ FastMCP)": "import mcp_tools.extras.mcp_register",
    "first call: google.cloud.storage": "from google.cloud import storage",
    "first call: google.cloud.secretmanager": "from google.cloud import secretmanager",
    "first call: google.cloud.cloudquotas_v1": "from google.cloud import cloudquotas_v1",
    "first call: aiplatform_v1.ModelServiceClient": (
        "from google.cloud.aiplatform_v1 import ModelServiceClient"
    ),
}


def _once(stmt: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", stmt], check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=count, default=5)
    args = parser.parse_args()
    baseline = statistics.median(_once("pass") for _ in range(args.runs))
    print(f"python start-up (baseline): {baseline * 1000:.0f} ms")
    for label, stmt in CASES.items():
        _once(stmt)  # warm the bytecode cache
        median = statistics.median(_once(stmt) for _ in range(args.runs))
        print(f"{label}: {(median - baseline) * 1000:.0f} ms over baseline (median of {args.runs})")


if __name__ == "__main__":
    main()
