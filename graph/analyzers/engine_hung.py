"""engine_hung: the server is up but its engine makes no progress.

From the logs (the time series come from metrics): vLLM's periodic stats line with requests running
and no token generated, over several periods ("Avg prompt throughput: 0.0 tokens/s, Avg generation
throughput: 0.0 tokens/s, Running: 30 reqs"); the V0 engine's own watchdog ("Engine iteration timed
out. This should never happen!", vllm/engine/async_llm_engine.py); the frontend waiting on a silent
engine ("Waiting for output from MQLLMEngine.", vllm/engine/multiprocessing/client.py, repeated);
workers that stopped answering the broadcast queue ("No available shared memory broadcast block
found in 60 seconds", vllm/distributed/device_communicators/shm_broadcast.py, repeated, or its
``acquire_read`` timing out); an RPC to the workers timing out. The engine may die of it afterwards
(``AsyncEngineDeadError``, ``TimeoutError``): the hang came first, so it is the cause.
"""

from __future__ import annotations

import re

from graph.analyzers.base import Finding, Line, finding, view
from graph.observation import Observation
from mcp_tools.vocabulary import HUNG_STALL, HUNG_STATS, HUNG_TIMEOUT, HUNG_WAITING

#: Consecutive stats periods with requests running and nothing generated that make a hang.
FLAT_PERIODS = 2
REPEATS = 3


def analyze(obs: Observation) -> list[Finding]:
    v = view(obs)
    stall = list(v.grep(HUNG_STALL))
    waiting = list(v.grep(HUNG_WAITING))
    # A read of the workers' broadcast queue that timed out: the workers stopped answering.
    stall += [ln for ln in waiting[:1] if v.first(HUNG_TIMEOUT, after=ln.n, before=ln.n + 40)]
    flat = _flat_stats(list(v.grep(HUNG_STATS)))
    lines: list[Line] = []
    why = ""
    if flat:
        lines, why = flat, f"{len(flat)} stats periods in a row with requests running and no token generated"
    if len(waiting) >= REPEATS:
        lines = lines or waiting
        why = why or f"the engine's workers stopped answering ({len(waiting)} waits in a row)"
    if stall:
        lines = sorted({ln.n: ln for ln in [*stall[:1], *lines]}.values(), key=lambda x: x.n)
        why = why or "the engine's own watchdog says an iteration timed out"
    if not lines:
        return []
    return [
        finding(
            "engine_hung",
            0.9 if (stall and (flat or waiting)) else 0.85,
            f"The engine stopped making progress (from line {lines[0].n}): {why}.",
            lines[:3],
            pattern=re.compile(
                f"{HUNG_STALL.pattern}|{HUNG_WAITING.pattern}|{HUNG_STATS.pattern}", re.IGNORECASE
            ),
            analyzer="engine_hung",
            facts={"flat_stats_periods": len(flat), "waits": len(waiting)},
        )
    ]


def _flat_stats(stats: list[Line]) -> list[Line]:
    """The longest run of stats lines with requests running, prompt and generation both at zero."""
    best: list[Line] = []
    run: list[Line] = []
    for ln in stats:
        m = HUNG_STATS.search(ln.text)
        if m and float(m.group(1)) == 0.0 and float(m.group(2)) == 0.0 and int(m.group(3)) > 0:
            run.append(ln)
            if len(run) > len(best):
                best = list(run)
        else:
            run = []
    return best if len(best) >= FLAT_PERIODS else []
