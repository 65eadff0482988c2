"""runtime_oom: CUDA OOM after the weights loaded (profiling run, CUDA-graph capture, sampler, a prefill)."""

from __future__ import annotations

from graph.analyzers._oom import OOM, oom_events
from graph.analyzers.base import Finding, finding
from graph.observation import Observation


def analyze(obs: Observation) -> list[Finding]:
    events = [e for e in oom_events(obs) if e.phase == "runtime"]
    if not events:
        return []
    first = events[0]
    lines = [first.line] + ([first.frame] if first.frame and first.frame.n != first.line.n else [])
    where = f" in {first.frame.text.strip().split()[-1]}" if first.frame else ""
    return [
        finding(
            "runtime_oom",
            first.confidence,
            f"CUDA ran out of memory after the weights loaded{where} (line {first.line.n}): activations, "
            "CUDA graphs or the sampler need more than the memory left.",
            lines,
            pattern=OOM,
            analyzer="runtime_oom",
            last_line=events[-1].line.n,
            facts={"oom_count": len(events)},
        )
    ]
