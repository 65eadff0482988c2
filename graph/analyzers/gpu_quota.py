"""gpu_quota: GPU quota exceeded, or no GPU capacity in the region / zone.

Wordings: Cloud Run "Revision '...' is not ready and cannot serve traffic. Quota exceeded for total
allowable count of GPUs per project per region." (GoogleCloudPlatform/magic-modules#17149); "You do
not have quota for using GPUs without zonal redundancy"; Compute Engine / GKE
"ZONE_RESOURCE_POOL_EXHAUSTED", "STOCKOUT", "Insufficient regional quota to satisfy request:
resource \"NVIDIA_L4_GPUS\"", "Quota 'NVIDIA_L4_GPUS' exceeded", "GCE quota exceeded".
"""

from __future__ import annotations

from graph.analyzers.base import Finding, simple
from graph.observation import Observation
from mcp_tools.vocabulary import QUOTA


def analyze(obs: Observation) -> list[Finding]:
    return simple(
        obs,
        category="gpu_quota",
        pattern=QUOTA,
        summary="No GPU could be had (line {line}): {text}",
        confidence=0.9,
    )
