"""Spawn-to-``tools/list`` time of ``gemma-sre mcp`` over stdio, measured with the official MCP client.

Each run spawns a fresh server process, initializes a session and lists the tools; the time is from
just before the spawn to the ``tools/list`` answer. Prints every run and the median.

    .venv/bin/python benchmarks/bench_mcp_startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def one_run(env: dict[str, str]) -> tuple[float, int]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "agent.cli", "mcp"], env=env)
    t0 = time.perf_counter()
    with open(os.devnull, "w") as devnull:
        async with (
            stdio_client(params, errlog=devnull) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = await session.list_tools()
            elapsed = time.perf_counter() - t0
    return elapsed, len(tools.tools)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=7)
    a = p.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEMMA_SRE_")}
    times: list[float] = []
    n_tools = 0
    for i in range(a.runs):
        t, n_tools = anyio.run(one_run, env)
        times.append(t)
        print(f"run {i + 1}: {t * 1000:.0f} ms ({n_tools} tools)")
    print(f"median spawn-to-tools/list: {statistics.median(times) * 1000:.0f} ms over {a.runs} runs")


if __name__ == "__main__":
    main()
