"""runtime_oom: CUDA OOM after the weights loaded (profiling run, CUDA-graph capture, sampler, a prefill)."""

from __future__ import annotations

from graph.analyzers._oom import device_of, oom_finding, oom_in_phase
from graph.analyzers.base import Finding, Line
from graph.observation import Observation
from mcp_tools.vocabulary import FACT_OOM_IN_CUDA_GRAPHS, FACT_OOM_IN_SAMPLER


def _during(lines: list[Line]) -> str:
    """What ran out of memory: CUDA-graph capture, the sampler warm-up, or the forward pass / profile run."""
    text = "\n".join(ln.text for ln in lines)
    if FACT_OOM_IN_CUDA_GRAPHS.search(text):
        return "cuda_graphs"
    if FACT_OOM_IN_SAMPLER.search(text):
        return "sampler"
    return "forward"


def analyze(obs: Observation) -> list[Finding]:
    events, lines = oom_in_phase(obs, "runtime")
    if not events:
        return []
    first = events[0]
    where = f" in {first.frame.text.strip().split()[-1]}" if first.frame else ""
    summary = (
        f"{device_of(first.line)} ran out of memory after the weights loaded{where} (line {first.line.n}): "
        "activations, CUDA graphs or the sampler need more than the memory left."
    )
    return [oom_finding("runtime_oom", events, lines, summary, during=_during(lines))]
