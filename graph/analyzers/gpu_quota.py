"""gpu_quota: GPU quota exceeded, or no GPU capacity in the region / zone.

Wordings: Cloud Run "Revision '...' is not ready and cannot serve traffic. Quota exceeded for total
allowable count of GPUs per project per region." (GoogleCloudPlatform/magic-modules#17149); "You do
not have quota for using GPUs without zonal redundancy"; Compute Engine / GKE
"ZONE_RESOURCE_POOL_EXHAUSTED", "STOCKOUT", "Insufficient regional quota to satisfy request:
resource \"NVIDIA_L4_GPUS\"", "Quota 'NVIDIA_L4_GPUS' exceeded", "GCE quota exceeded".
"""

from __future__ import annotations

from graph.analyzers.base import Finding, Line, LogView, finding, phase_of, simple, started_between, view
from graph.observation import Observation
from mcp_tools.vocabulary import (
    FAILED_SCHEDULING,
    GPU_CAPACITY_WAIT,
    GPU_NOT_OFFERED,
    POD_NAMED,
    POD_SCHEDULED,
    QUOTA,
    UP_PHASES,
    Phase,
)


def analyze(obs: Observation) -> list[Finding]:
    found = simple(
        obs,
        category="gpu_quota",
        pattern=QUOTA,
        resolved=_scheduled_later,
        summary="No GPU could be had (line {line}): {text}",
        confidence=0.9,
    )
    for f in found:  # a GPU type the zone does not offer: no quota request gives it one
        for e in f.evidence:
            m = GPU_NOT_OFFERED.search(e.text)
            if m:
                f.facts["gpu_not_offered"] = {
                    "gpu": m.group("gpu") or m.group("gpu_in_path"),
                    "zone": m.group("zone") or m.group("zone_in_path"),
                }
                break
    return found or _waiting_for_gpus(obs)


def _scheduled_later(v: LogView, ln: Line) -> bool:
    """A pod's FailedScheduling the scheduler got past: a later Scheduled event for the same pod (a
    ``kubectl get events`` line names it, ``pod/NAME``; in ``kubectl describe pod`` every event is that
    pod's). Other quota and capacity words are never resolved this way."""
    if not FAILED_SCHEDULING.search(ln.text):
        return False
    named = POD_NAMED.search(ln.text)
    return any(
        named is None or m.group("pod").rsplit("/", 1)[-1] == named.group("pod")
        for later in v.grep(POD_SCHEDULED, after=ln.n)
        if (m := POD_SCHEDULED.search(later.text)) is not None
    )


def _waiting_for_gpus(obs: Observation) -> list[Finding]:
    """A start that waits for GPUs its Ray cluster does not have and never completes: the request
    for GPUs cannot be met here (the same family as a scheduler's "Insufficient nvidia.com/gpu")."""
    v = view(obs)
    waits = list(v.grep(GPU_CAPACITY_WAIT))
    # The wait is a step of the start itself (the executor asks Ray for its GPUs before the weights
    # load): with no milestone before it, it says where the start was.
    if not waits or phase_of(v, waits[0].n) >= Phase.API_UP:
        return []
    if started_between(v, after=waits[0].n, phases=UP_PHASES) is not None:
        return []
    return [
        finding(
            "gpu_quota",
            0.8,
            f"The start waits for GPUs the cluster does not have (line {waits[0].n}) and never completes.",
            [waits[0], waits[-1]],
            pattern=GPU_CAPACITY_WAIT,
            analyzer="gpu_quota",
            last_line=waits[-1].n,
            facts={"cluster_short_of_gpus": True},
        )
    ]
