"""Saturation over a window, decided with the capacity planner: which change relieves it.

Read from the overload finding's facts (``graph/analyzers/overload.py``, from Cloud Monitoring's
series) and the planner's view of the spec (``Capacity``: KV-cache tokens, ``--max-num-seqs``):

- **One hot instance** (one saturated, the others idle): the load is not spread. Lower the container
  concurrency to what one engine batches, so Cloud Run sends the rest to the idle instances (and
  check session affinity); more memory or instances would not help.
- **KV cache full for most of the window**: what one instance can run at once is
  ``min(max_num_seqs, KV tokens / tokens per sequence)``, with tokens per sequence read from the
  series (KV usage x the planner's KV tokens / sequences running). When the demand (running +
  waiting) would fit once an FP8 KV cache doubles the tokens and the GPU supports it,
  ``--kv-cache-dtype fp8`` first; otherwise the engine is at its KV capacity: ``set_scaling`` to the
  instances the demand needs (and the concurrency one engine batches), FP8 second. A shorter
  ``--max-model-len`` is offered last when the planner says the cache holds fewer full-length
  sequences than ``--max-num-seqs``.
- **KV with headroom but running pinned at ``--max-num-seqs``** with a queue: a larger
  ``--max-num-seqs``, sized so the KV usage stays under the full mark, with the planner's figures.
- **Container concurrency far above ``--max-num-seqs``** (and a queue): ``set_scaling``'s concurrency.

``plans`` returns None when the finding holds no series facts (the log / ``/metrics`` rules of
``graph/remedies/overload.py`` decide then).
"""

from __future__ import annotations

import math
from typing import Any

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import K, fact, plan
from graph.remedies.catalog import gpu_supports
from graph.remedies.planner import Capacity, flags_option
from mcp_tools.cloudrun_limits import MAX_INSTANCES
from mcp_tools.remediation import PlanStep, RemediationPlan

#: KV usage the new --max-num-seqs is sized to stay under.
KV_TARGET = 0.85


def _num(diag: Diagnosis, key: str) -> float | None:
    v = fact(diag, key)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def plans(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan] | None:
    if fact(diag, "kv_full_share") is None and fact(diag, "hot_instance") is None:
        return None  # no series facts
    svc = obs.service
    slo = obs.slo_config
    mns = int(cap.plan.max_num_seqs) if cap.plan is not None and cap.plan.max_num_seqs else None
    mns = mns or (int(_num(diag, "max_num_seqs") or 0) or None)
    cc = svc.concurrency if svc is not None else None
    waiting = _num(diag, "num_requests_waiting") or 0.0
    running = _num(diag, "num_requests_running") or 0.0
    per_inst = _num(diag, "running_per_instance") or running
    kv = _num(diag, "kv_cache_usage") or 0.0
    kv_share = _num(diag, "kv_full_share") or 0.0
    cur_max = svc.max_instances if svc is not None else None

    if fact(diag, "hot_instance") is not None:
        target = mns or (max(1, cc // 2) if cc else None)
        if target is None or (cc is not None and cc <= target):
            return []
        return [
            plan(
                PlanStep(
                    kind=K.SET_SCALING,
                    change={"concurrency": target},
                    why=f"one instance carries the load while the others idle: at concurrency {target} "
                    f"(what one engine batches, --max-num-seqs {mns}) Cloud Run sends the rest to the "
                    "idle instances; check session affinity too. More memory or instances would not help.",
                )
            )
        ]

    out: list[RemediationPlan] = []
    kv_full = kv_share >= slo.kv_full_share
    demand = running + waiting  # requests in flight across the instances
    instances = max(1, round(running / per_inst)) if per_inst else 1
    if kv_full:
        fp8_ok = gpu_supports(cap.gpu, "fp8_kv_cache") is not False and not (
            cap.flags is not None and str(cap.flags.kv_cache_dtype).startswith("fp8")
        )
        # sequences one instance can hold: the KV cache is full at ``per_inst`` running
        per_seq_share = max(kv, slo.kv_full) / max(per_inst, 1.0)
        fit_now = min(mns or per_inst, per_inst)
        fit_fp8 = min(mns or 10**6, int(1.0 / per_seq_share * 2)) if fp8_ok else fit_now
        fp8 = (
            flags_option(
                cap,
                {"--kv-cache-dtype": "fp8"},
                f"the KV cache was full for {kv_share:.0%} of the window: an FP8 KV cache doubles the tokens "
                f"it holds (about {fit_fp8} sequences per instance instead of {fit_now:g})",
            )
            if fp8_ok
            else None
        )
        need = math.ceil(demand / max(fit_fp8 if fp8 else fit_now, 1))
        if fp8 is not None and need <= instances:
            out.append(fp8)
        need = math.ceil(demand / max(fit_now, 1))
        if need > instances:
            out.append(
                _scaling(
                    _concurrency(cc, mns),
                    cur_max,
                    f"the engine is at its KV capacity ({fit_now:g} sequences per instance, KV cache "
                    f"full for {kv_share:.0%} of the window) and {demand:.0f} requests are in flight: "
                    f"{need} instance(s) hold them",
                    need=need,
                )
            )
        if fp8 is not None and fp8 not in out:
            out.append(fp8)
        shorter = _shorter_context(cap, mns)
        if shorter is not None:
            out.append(shorter)
    elif mns and per_inst >= 0.95 * mns and waiting >= 1:
        bigger = max(mns + 1, min(4 * mns, 1024, math.floor(mns * KV_TARGET / max(kv, 0.05))))
        out.append(
            flags_option(
                cap,
                {"--max-num-seqs": bigger},
                f"running is pinned at --max-num-seqs {mns} with {waiting:.0f} waiting while the KV cache "
                f"is only {kv:.0%} used: {bigger} sequences keep it under {KV_TARGET:.0%}",
            )
        )
    conc = _concurrency(cc, mns)
    if conc and waiting >= 1 and not any(_has(p, "concurrency") for p in out):
        out.append(
            plan(
                PlanStep(
                    kind=K.SET_SCALING,
                    change=conc,
                    why=f"Cloud Run admits {cc} concurrent requests per instance while the engine batches "
                    f"{mns}: the rest queue inside it; at {conc['concurrency']} Cloud Run starts "
                    "another instance instead",
                )
            )
        )
    return out


def _has(p: RemediationPlan, key: str) -> bool:
    return any(key in s.change for s in p.steps)


def _concurrency(cc: int | None, mns: int | None) -> dict[str, Any]:
    """Container concurrency lowered to what one engine batches, when it is far above it."""
    if cc and mns and cc >= 2 * mns:
        return {"concurrency": mns}
    return {}


def _scaling(change: dict[str, Any], cur_max: int | None, why: str, need: int = 2) -> RemediationPlan:
    target = min(MAX_INSTANCES, max(need, (cur_max or 1) + 1))
    if cur_max is None or target > cur_max:
        change = {"max_instances": target, **change}
    return plan(
        PlanStep(
            kind=K.SET_SCALING,
            change=change,
            why=f"{why}; allow up to {target} instances (each needs a GPU: check the GPU quota)",
        )
    )


def _shorter_context(cap: Capacity, mns: int | None) -> RemediationPlan | None:
    """A shorter --max-model-len when the cache holds fewer full-length sequences than --max-num-seqs."""
    p = cap.plan
    if p is None or not mns or not p.max_model_len or p.max_concurrency >= mns:
        return None
    from mcp_tools.spec_ops import round_max_model_len

    shorter = round_max_model_len(max(2048, p.max_model_len // 2))
    if shorter >= p.max_model_len:
        return None
    opt = flags_option(
        cap,
        {"--max-model-len": shorter},
        f"the KV cache holds {p.max_concurrency:.1f} sequences of {p.max_model_len} tokens, fewer than "
        f"--max-num-seqs {mns}: at {shorter} tokens requests that long are refused, not preempted",
    )
    return opt
