"""runtime_oom: eager mode, fewer sequences, a smaller prefill batch, more headroom outside vLLM."""

from __future__ import annotations

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import fact
from graph.remedies.planner import Capacity, flags_option
from mcp_tools.remediation import RemediationPlan


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    during = fact(diag, "during")
    out = []
    if during == "cuda_graphs":
        out.append(
            flags_option(cap, {"--enforce-eager": True}, "the OOM hit CUDA-graph capture: run eagerly")
        )
    if during == "sampler":
        seqs = cap.flags.max_num_seqs if cap.flags and cap.flags.max_num_seqs else 256
        out.append(
            flags_option(
                cap, {"--max-num-seqs": max(8, seqs // 2)}, "the sampler warm-up OOMed: fewer sequences"
            )
        )
    mnbt = cap.plan.max_num_batched_tokens if cap.plan else None
    out.append(
        flags_option(
            cap,
            {"--max-num-batched-tokens": max(512, (mnbt or 4096) // 2)},
            "a smaller prefill batch lowers the activation peak of the profiling run",
        )
    )
    if during != "cuda_graphs":
        out.append(flags_option(cap, {"--enforce-eager": True}, "skip CUDA graphs to free their memory"))
    util = cap.flags.gpu_memory_utilization if cap.flags else 0.9
    if util > 0.8:
        out.append(
            flags_option(
                cap,
                {"--gpu-memory-utilization": round(util - 0.05, 2)},
                "leave more headroom outside vLLM's budget for activations",
            )
        )
    return out
