"""weights_oom: GPU memory runs out while the weights are created or loaded (the model does not fit)."""

from __future__ import annotations

from graph.analyzers._oom import device_of, gpu_total_gib, oom_finding, oom_in_phase
from graph.analyzers.base import Finding, view
from graph.observation import Observation
from mcp_tools.vocabulary import Phase


def analyze(obs: Observation) -> list[Finding]:
    events, lines = oom_in_phase(obs, "weights")
    if not events:
        return []
    first = events[0]
    where = "while loading the weights" if first.frame else "during model loading"
    if view(obs).phase_at(first.line.n) >= Phase.LOADED:
        where = "right after the weights loaded (they alone took the share of the GPU vLLM may use)"
    summary = (
        f"{device_of(first.line)} ran out of memory {where} (line {first.line.n}): the model's weights "
        "do not fit the GPU memory vLLM may use."
    )
    total = gpu_total_gib(first.line.text)
    return [oom_finding("weights_oom", events, lines, summary, **({"gpu_total_gib": total} if total else {}))]
