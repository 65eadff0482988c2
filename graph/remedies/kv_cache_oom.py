"""kv_cache_oom: more of the GPU for vLLM, the planner's options, a shorter context, an FP8 KV cache."""

from __future__ import annotations

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import fact
from graph.remedies.catalog import gpu_supports
from graph.remedies.planner import Capacity, flags_option, planner_options
from mcp_tools.remediation import RemediationPlan
from mcp_tools.spec_ops import round_max_model_len


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
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
