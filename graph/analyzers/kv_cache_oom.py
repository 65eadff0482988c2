"""kv_cache_oom: the weights loaded but too little GPU memory is left for the KV cache.

Wordings (vLLM 0.2 .. 0.11): "No available memory for the cache blocks. Try increasing
`gpu_memory_utilization` when initializing the engine." (vllm-project/vllm#2248, #27508);
"The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in
KV cache (23648)." (vllm-project/vllm#10517, #2418); V1: "To serve at least one request with the
models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV
cache memory (0.71 GiB). Based on the available memory, the estimated maximum model length is 5632."
(vllm-project/tpu-inference#223); and a CUDA OOM while allocating the cache.
"""

from __future__ import annotations

import re

from graph.analyzers._oom import OOM, oom_events
from graph.analyzers.base import Finding, cut_at_family_check, finding, view
from graph.observation import Observation
from mcp_tools.vocabulary import GPU_MEMORY_IN_USE, KV_CAP, KV_MAXLEN, KV_SHORT


def analyze(obs: Observation) -> list[Finding]:
    return (
        _held_by_others(obs)
        or _kv_short(obs)
        or cut_at_family_check(obs, "kv_cache_oom", "the KV cache's size")
    )


def _held_by_others(obs: Observation) -> list[Finding]:
    """Other processes (a desktop, another server, a leaked worker) hold GPU memory, so vLLM cannot
    have the share it asks for: "Free memory on device (5.2/23.6 GiB) on startup is less than
    desired GPU memory utilization (0.9, 21.2 GiB)" (the planner's start-up parser reads the figures)."""
    from mcp_tools.capacity.startup import parse_gpu_memory_in_use

    v = view(obs)
    lines = list(v.grep(GPU_MEMORY_IN_USE))
    held = parse_gpu_memory_in_use(ln.text for ln in lines)
    if held is None:
        return []
    at = next((ln for ln in lines if held.line in ln.text or ln.text in held.line), lines[-1])
    facts: dict[str, object] = {"gpu_memory_used_by_others_gib": held.used_by_others_gib}
    if held.free_gib is not None:
        facts["gpu_free_gib"] = held.free_gib
    if held.total_gib:
        facts["gpu_total_gib"] = held.total_gib
    if held.gpu_memory_utilization is not None:
        facts["gpu_memory_utilization"] = held.gpu_memory_utilization
    return [
        finding(
            "kv_cache_oom",
            0.9,
            f"Other processes hold about {held.used_by_others_gib:g} GiB of this GPU (line {at.n}): vLLM "
            "cannot reserve the share --gpu-memory-utilization asks for.",
            [at],
            pattern=GPU_MEMORY_IN_USE,
            analyzer="kv_cache_oom",
            facts=facts,
        )
    ]


def _kv_short(obs: Observation) -> list[Finding]:
    v = view(obs)
    hits = v.records_first(list(v.grep(KV_SHORT)))
    ooms = [e for e in oom_events(obs) if e.phase == "kv_cache"]
    if not hits and not ooms:
        return []
    facts: dict[str, object] = {}
    for ln in hits:
        m = KV_MAXLEN.search(ln.text)
        if m:
            facts["max_model_len"] = int(m.group(1))
        c = KV_CAP.search(ln.text)
        if c:
            facts["max_model_len_that_fits"] = int(c.group(1) or c.group(2))
    lines = hits[:1] + [e.line for e in ooms[:1]]
    last = max([ln.n for ln in hits] + [e.line.n for e in ooms])
    summary = "The weights loaded but too little GPU memory is left for the KV cache"
    if "max_model_len" in facts:
        summary += f" to hold one {facts['max_model_len']}-token request"
    if "max_model_len_that_fits" in facts:
        summary += f" (what fits: about {facts['max_model_len_that_fits']} tokens)"
    return [
        finding(
            "kv_cache_oom",
            0.92 if hits else 0.85,
            summary + ".",
            lines,
            pattern=re.compile(KV_SHORT.pattern + "|" + OOM.pattern, re.IGNORECASE),
            analyzer="kv_cache_oom",
            last_line=last,
            facts=facts,
        )
    ]
