"""Spawn-to-``tools/list`` time of ``gemma-sre mcp`` over stdio, measured with the official MCP client.

Each run spawns a fresh server process, initializes a session and lists the tools; the time is from
just before the spawn to the ``tools/list`` answer. Prints every run and the median, and (with
``--reference``) the same for a bare FastMCP server with one tool: the floor any FastMCP server pays
on this machine (Python start-up plus importing the ``mcp`` package).

    .venv/bin/python benchmarks/bench_mcp_startup.py [--runs 7] [--reference]
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

REFERENCE = (
    "from mcp.server.fastmcp import FastMCP\n"
    "m = FastMCP('reference')\n"
    "@m.tool()\n"
    "def ping() -> str:\n"
    "    return 'pong'\n"
    "m.run()\n"
)


async def one_run(env: dict[str, str], args: list[str]) -> tuple[float, int]:
    params = StdioServerParameters(command=sys.executable, args=args, env=env)
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
    p.add_argument("--reference", action="store_true", help="also time a bare FastMCP server")
    a = p.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEMMA_SRE_")}
    cases = [("gemma-sre mcp", ["-m", "agent.cli", "mcp"])]
    if a.reference:
        cases.append(("bare FastMCP, one tool (reference)", ["-c", REFERENCE]))
    for label, args in cases:
        times: list[float] = []
        n_tools = 0
        for i in range(a.runs):
            t, n_tools = anyio.run(one_run, env, args)
            times.append(t)
            print(f"{label} run {i + 1}: {t * 1000:.0f} ms ({n_tools} tools)")
        med = statistics.median(times) * 1000
        print(f"{label}: median spawn-to-tools/list {med:.0f} ms over {a.runs} runs")


if __name__ == "__main__":
    main()
