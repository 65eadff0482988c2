"""host_memory_exceeded: the container's RAM (not the GPU's) ran out.

Wordings: Cloud Run "Memory limit of 32768 MiB exceeded with 33012 MiB used. Consider increasing the
memory limit, see https://cloud.google.com/run/docs/configuring/memory-limits" (as quoted in
dart-lang/pub-dev#9554, googleapis/repo-automation-bots#3105); the kernel's "Out of memory: Killed
process"; Kubernetes "OOMKilled" / exit code 137; a bare "Killed" from the shell. A kill signal alone
is weak evidence (a probe also ends in a kill) and yields to any specific cause.
"""

from __future__ import annotations

from graph.analyzers.base import Finding, Line, finding, match_conditions, view
from graph.observation import Observation
from mcp_tools.vocabulary import (
    FACT_HOST_MEMORY,
    HOST_MEMORY_STRONG,
    HOST_MEMORY_TABLE,
    HOST_MEMORY_WEAK,
    HOST_MEMORY_WEAK_PREFILTER,
)


def analyze(obs: Observation) -> list[Finding]:
    v = view(obs)
    strong = list(v.grep(HOST_MEMORY_STRONG)) + list(v.grep(HOST_MEMORY_TABLE))
    conds = match_conditions(obs, HOST_MEMORY_STRONG)
    if strong or conds:
        f = finding(
            "host_memory_exceeded",
            0.92 if strong else 0.85,
            "The container ran out of host memory (RAM), not GPU memory"
            + (f" (line {strong[0].n})" if strong else "")
            + ": the instance was killed.",
            strong[:3],
            pattern=HOST_MEMORY_STRONG,
            analyzer="host_memory_exceeded",
            extra=conds[:1],
            facts=_memory_had(strong),
        )
        if not strong:
            f.first_line = f.last_line = v.total + 1
        return [f]
    weak = list(v.grep(HOST_MEMORY_WEAK, prefilter=HOST_MEMORY_WEAK_PREFILTER))
    if not weak:
        return []
    return [
        finding(
            "host_memory_exceeded",
            0.55,
            f"The process was killed with SIGKILL (line {weak[0].n}), "
            "as the kernel does when memory runs out.",
            weak[:2],
            pattern=HOST_MEMORY_WEAK,
            analyzer="host_memory_exceeded",
            specific=False,
        )
    ]


def _memory_had(lines: list[Line]) -> dict[str, object]:
    """``{"memory_gib": G}``: the RAM the first line that gives one says the container or host had."""
    for ln in lines:
        m = FACT_HOST_MEMORY.search(ln.text)
        if m:
            gib = int(m.group("mib")) / 1024 if m.group("mib") else float(m.group("gb")) * 1e9 / 2**30
            return {"memory_gib": round(gib, 1)}
    return {}
