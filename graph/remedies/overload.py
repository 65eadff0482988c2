"""overload: more instances (within Cloud Run's maximum), and an FP8 KV cache when the cache is full (first
when preemption, not a queue, shows the saturation)."""

from __future__ import annotations

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import K, fact, plan
from graph.remedies.catalog import gpu_supports
from graph.remedies.planner import Capacity, flags_option
from mcp_tools.cloudrun_limits import MAX_INSTANCES
from mcp_tools.remediation import PlanStep, RemediationPlan


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    from graph.remedies.saturation import plans

    over_time = plans(diag, obs, cap)  # saturation seen over a window: the planner decides
    if over_time:
        return over_time
    svc = obs.service
    out = []
    cur = svc.max_instances if svc else None
    target = min(MAX_INSTANCES, (cur * 2 if cur else 2) if cur is None or cur < 50 else cur + 10)
    if cur is None or target > cur:
        out.append(
            plan(
                PlanStep(
                    kind=K.SET_SCALING,
                    change={"max_instances": target},
                    why=f"requests queue on {cur or 'the current'} instance(s); allow up to {target} "
                    "(each needs a GPU: check the GPU quota)",
                )
            )
        )
    kv = fact(diag, "kv_cache_usage")
    kv_full = isinstance(kv, float) and kv >= 0.9
    # Preemption with no queue seen: each instance's KV cache is what is short (vLLM evicts a running
    # request to make room), not the instances: more room in the cache comes first.
    waiting = fact(diag, "num_requests_waiting")
    cache_first = bool(fact(diag, "preemptions") or fact(diag, "num_preemptions")) and not (
        isinstance(waiting, int | float) and waiting >= 5
    )
    if (kv_full or cache_first) and gpu_supports(cap.gpu, "fp8_kv_cache") is not False:
        fp8 = flags_option(cap, {"--kv-cache-dtype": "fp8"}, "an FP8 KV cache doubles the tokens in flight")
        out = [fp8, *out] if cache_first else [*out, fp8]
    return out
