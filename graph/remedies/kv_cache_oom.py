"""kv_cache_oom: more of the GPU for vLLM, the planner's options, a shorter context, an FP8 KV cache; when
other processes hold the GPU, a share that fits what they leave free."""

from __future__ import annotations

import math

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import escalate, fact
from graph.remedies.catalog import gpu_supports
from graph.remedies.planner import Capacity, flags_option, planner_options
from mcp_tools.remediation import RemediationPlan
from mcp_tools.spec_ops import round_max_model_len


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    held = fact(diag, "gpu_memory_used_by_others_gib")
    if isinstance(held, (int, float)) and held > 0:
        return _held_by_others(diag, cap, float(held))
    first: list[RemediationPlan] = []
    if cap.flags is not None and cap.flags.gpu_memory_utilization < 0.85:
        first.append(
            flags_option(
                cap,
                {"--gpu-memory-utilization": 0.9},
                f"--gpu-memory-utilization {cap.flags.gpu_memory_utilization:g} leaves too little for the KV "
                "cache after the weights",
            )
        )
    opts = planner_options(cap)
    if opts:
        return first + opts
    fit = fact(diag, "max_model_len_that_fits")
    cur = fact(diag, "max_model_len")
    if cur is None and cap.flags is not None:
        cur = cap.flags.max_model_len
    out = []
    if isinstance(fit, int) and fit > 0:
        n = round_max_model_len(fit)
        out.append(
            flags_option(cap, {"--max-model-len": n}, f"vLLM says about {fit} tokens fit in the KV cache")
        )
    elif isinstance(cur, int) and cur > 2048:
        n = round_max_model_len(cur // 2)
        out.append(
            flags_option(cap, {"--max-model-len": n}, f"halve the context ({cur} -> {n}) so one request fits")
        )
    if gpu_supports(cap.gpu, "fp8_kv_cache") is not False:
        out.append(flags_option(cap, {"--kv-cache-dtype": "fp8"}, "an FP8 KV cache holds twice the tokens"))
    if not first:
        out.append(
            flags_option(
                cap, {"--gpu-memory-utilization": 0.95}, "give vLLM more of the GPU for the KV cache"
            )
        )
    return first + out


def _held_by_others(diag: Diagnosis, cap: Capacity, held: float) -> list[RemediationPlan]:
    """vLLM asks for a share of the whole GPU; other processes hold ``held`` GiB of it. Ask for what is
    free (less a small margin), and say who must free the rest."""
    free, total = fact(diag, "gpu_free_gib"), fact(diag, "gpu_total_gib")
    out: list[RemediationPlan] = []
    if isinstance(free, (int, float)) and isinstance(total, (int, float)) and total > 0:
        share = math.floor((free / total - 0.02) * 100) / 100
        if share >= 0.3:
            out.append(
                flags_option(
                    cap,
                    {"--gpu-memory-utilization": share},
                    f"other processes hold {held:g} GiB of the GPU: ask vLLM for the {share:g} that is free",
                )
            )
    out.append(
        escalate(
            f"Free the GPU: another process holds about {held:g} GiB (a second server, a notebook, a leaked "
            "worker, the desktop). Give vLLM the GPU to itself, or lower --gpu-memory-utilization.",
            "the GPU is shared with other processes",
        )
    )
    return out
