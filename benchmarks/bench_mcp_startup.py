"""Spawn-to-``tools/list`` time of ``gemma-sre mcp`` over stdio, side by side with a bare FastMCP server.

Each run spawns a fresh server process, initializes a session with the official MCP client and lists
the tools; the time is from just before the spawn to the ``tools/list`` answer. The reference is a
bare FastMCP server with as many tools as ours (each with two parameters): the floor any FastMCP
server of that size pays on this machine (Python start-up, importing ``mcp``, registering the tools).
The two are run alternately, so machine noise falls on both; the script prints every run, the
medians and their ratio. With ``PYTHONDONTWRITEBYTECODE`` set, our modules are compiled from source
at every start (the installed libraries keep their bytecode): the result says which it measured.

    .venv/bin/python benchmarks/bench_mcp_startup.py [--runs 9] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

OURS = ["-m", "agent.cli", "mcp"]


def reference_source(n_tools: int) -> str:
    """A bare FastMCP server with ``n_tools`` tools."""
    lines = ["from mcp.server.fastmcp import FastMCP", "m = FastMCP('reference')"]
    for i in range(n_tools):
        lines += [
            "@m.tool()",
            f"def tool_{i}(name: str, limit: int = 10) -> str:",
            f"    '''Reference tool {i}.'''",
            "    return name * limit",
        ]
    lines.append("m.run()")
    return "\n".join(lines) + "\n"


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
    p.add_argument("--runs", type=int, default=9, help="runs of each server (default 9)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    a = p.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEMMA_SRE_")}
    _, n_tools = anyio.run(one_run, env, OURS)  # warm-up (file caches), and our tool count
    ref = ["-c", reference_source(n_tools)]
    _, ref_tools = anyio.run(one_run, env, ref)
    ours_s: list[float] = []
    ref_s: list[float] = []
    for i in range(a.runs):
        t, _ = anyio.run(one_run, env, OURS)
        r, _ = anyio.run(one_run, env, ref)
        ours_s.append(t)
        ref_s.append(r)
        if not a.json:
            print(f"run {i + 1}: gemma-sre mcp {t * 1000:.0f} ms, bare FastMCP {r * 1000:.0f} ms", flush=True)
    ours_med, ref_med = statistics.median(ours_s), statistics.median(ref_s)
    result = {
        "runs": a.runs,
        "tools": n_tools,
        "reference_tools": ref_tools,
        "gemma_sre_mcp_median_ms": round(ours_med * 1000),
        "bare_fastmcp_median_ms": round(ref_med * 1000),
        "ratio": round(ours_med / ref_med, 2),
        "bytecode_cache": not os.environ.get("PYTHONDONTWRITEBYTECODE"),
    }
    if a.json:
        print(json.dumps(result))
        return
    print(
        f"gemma-sre mcp ({n_tools} tools): median {result['gemma_sre_mcp_median_ms']} ms; "
        f"bare FastMCP ({ref_tools} tools): median {result['bare_fastmcp_median_ms']} ms; "
        f"ratio {result['ratio']:.2f} over {a.runs} runs each"
        + ("" if result["bytecode_cache"] else " (PYTHONDONTWRITEBYTECODE: ours compiled at each start)")
    )


if __name__ == "__main__":
    main()
