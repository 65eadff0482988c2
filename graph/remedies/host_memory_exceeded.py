"""host_memory_exceeded: drop host-RAM reservations (swap, CPU offload), then a larger memory limit."""

from __future__ import annotations

from typing import Any

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import K, escalate, fact, plan
from graph.remedies.planner import Capacity, flags_option
from mcp_tools.cloudrun_limits import MAX_MEMORY_GIB, cpu_value, memory_gib, min_cpu_for_memory
from mcp_tools.remediation import PlanStep, RemediationPlan
from mcp_tools.spec_ops import get_flag

#: The memory sizes offered, smallest first (Cloud Run's maximum last).
MEMORY_STEPS_GIB = (16, 24, MAX_MEMORY_GIB)


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    flags_opt: list[RemediationPlan] = []
    args = obs.service.args if obs.service else []
    change: dict[str, Any] = {}
    swap = get_flag(args, "--swap-space")
    if isinstance(swap, str) and swap.replace(".", "", 1).isdigit() and float(swap) > 4:
        change["--swap-space"] = None  # back to vLLM's default (4 GiB of host RAM per GPU)
    off = get_flag(args, "--cpu-offload-gb")
    if isinstance(off, str) and off.replace(".", "", 1).isdigit() and float(off) > 0:
        change["--cpu-offload-gb"] = None
    if change:
        flags_opt.append(
            flags_option(
                cap,
                change,
                "--swap-space / --cpu-offload-gb reserve host RAM for vLLM: drop them back to defaults",
            )
        )
    return flags_opt + _more_memory(obs, fact(diag, "memory_gib"))


def _more_memory(obs: Observation, had_gib: float | None) -> list[RemediationPlan]:
    """The next memory size above what the container had (its spec, or what the log says it had)."""
    svc = obs.service
    cur = max((g for g in (memory_gib(svc.memory if svc else None), had_gib) if g is not None), default=None)
    target = next((g for g in MEMORY_STEPS_GIB if cur is None or g > cur), None)
    if target is None:
        had = f"{cur:g} GiB" if had_gib is not None and cur == had_gib else (svc.memory if svc else "?")
        return [
            escalate(
                f"The container already had {had} of RAM, at or above Cloud Run's maximum: lower "
                "--max-num-seqs / --swap-space, load a smaller checkpoint, or move to GKE.",
                "host memory is exhausted at the largest size",
            )
        ]
    change: dict[str, Any] = {"memory": f"{target}Gi"}
    cpu = cpu_value(svc.cpu if svc else None)
    need = min_cpu_for_memory(target)
    if cpu is None or cpu < need:
        change["cpu"] = need
    cur_mem = svc.memory if svc and svc.memory else "?"
    return [
        plan(
            PlanStep(
                kind=K.SET_RESOURCES,
                change=change,
                why=f"the container ran out of RAM at {cur_mem}; give it {target} GiB",
            )
        )
    ]
