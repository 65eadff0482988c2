"""gpu_quota: GPU quota exceeded, or no GPU capacity in the region / zone.

Wordings: Cloud Run "Revision '...' is not ready and cannot serve traffic. Quota exceeded for total
allowable count of GPUs per project per region." (GoogleCloudPlatform/magic-modules#17149); "You do
not have quota for using GPUs without zonal redundancy"; Compute Engine / GKE
"ZONE_RESOURCE_POOL_EXHAUSTED", "STOCKOUT", "Insufficient regional quota to satisfy request:
resource \"NVIDIA_L4_GPUS\"", "Quota 'NVIDIA_L4_GPUS' exceeded", "GCE quota exceeded".
"""

from __future__ import annotations

import re

from graph.analyzers.base import Finding, simple
from graph.observation import Observation

PATTERN = re.compile(
    r"Quota exceeded for total allowable count of GPUs|quota for using GPUs|ZONE_RESOURCE_POOL_EXHAUSTED"
    r"|\bSTOCKOUT\b|Insufficient regional quota|Quota '[A-Z\d_]*GPU[A-Z\d_]*' exceeded|GCE quota exceeded"
    r"|nvidia_\w*gpu\w*|GPUS?_ALL_REGIONS|(?:QUOTA_EXCEEDED|RESOURCE_EXHAUSTED|Quota exceeded).*GPU"
    r"|GPU.*(?:QUOTA_EXCEEDED|quota exceeded|not enough capacity|no capacity|currently unavailable)"
    r"|does not have enough resources available to fulfill the request|Insufficient nvidia\.com/gpu"
    r"|GCE out of resources|no GPU capacity"
    # Quota and capacity for CPU, memory or disk too: Cloud Run "Quota violated:
    # CpuAllocPerProjectRegion requested: 60000 allowed: 20000", "Max instances must be set to 2 or
    # fewer to set the requested total memory", Compute "QUOTA_EXCEEDED ... Quota 'SSD_TOTAL_GB'
    # exceeded", Kubernetes "0/6 nodes are available: 6 Insufficient nvidia.com/gpu"
    r"|Quota violated|Quota exceeded|QUOTA_EXCEEDED|Quota '[\w]+' exceeded|\w+PerProjectRegion requested"
    r"|Max instances must be set to \d+ or fewer to set the requested total"
    r"|Insufficient (?:cpu|memory|nvidia\.com/gpu|google\.com/tpu)|exceeded quota|quota exceeded"
    r"|resource pool exhausted|RESOURCE_POOL_EXHAUSTED|not enough resources available"
    r"|FailedScaleUp|NotTriggerScaleUp|pod didn't trigger scale-up",
    re.IGNORECASE,
)


def analyze(obs: Observation) -> list[Finding]:
    return simple(
        obs,
        category="gpu_quota",
        pattern=PATTERN,
        summary="No GPU could be had (line {line}): {text}",
        confidence=0.9,
    )
