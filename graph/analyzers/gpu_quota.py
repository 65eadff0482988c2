"""gpu_quota: GPU quota exceeded, or no GPU capacity in the region / zone.

Wordings: Cloud Run "Revision '...' is not ready and cannot serve traffic. Quota exceeded for total
allowable count of GPUs per project per region." (GoogleCloudPlatform/magic-modules#17149); "You do
not have quota for using GPUs without zonal redundancy"; Compute Engine / GKE
"ZONE_RESOURCE_POOL_EXHAUSTED", "STOCKOUT", "Insufficient regional quota to satisfy request:
resource \"NVIDIA_L4_GPUS\"", "Quota 'NVIDIA_L4_GPUS' exceeded", "GCE quota exceeded".
"""

from __future__ import annotations

from graph.analyzers.base import Finding, failed_in_startup, finding, simple, view
from graph.observation import Observation
from mcp_tools.vocabulary import GPU_CAPACITY_WAIT, QUOTA


def analyze(obs: Observation) -> list[Finding]:
    return simple(
        obs,
        category="gpu_quota",
        pattern=QUOTA,
        summary="No GPU could be had (line {line}): {text}",
        confidence=0.9,
    ) or _waiting_for_gpus(obs)


def _waiting_for_gpus(obs: Observation) -> list[Finding]:
    """A start that waits for GPUs its Ray cluster does not have and never completes: the request
    for GPUs cannot be met here (the same family as a scheduler's "Insufficient nvidia.com/gpu")."""
    v = view(obs)
    waits = list(v.grep(GPU_CAPACITY_WAIT))
    if not waits or not failed_in_startup(v, waits[0].n):
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
        )
    ]
