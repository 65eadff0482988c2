"""gpu_quota: a person requests quota, drops zonal redundancy or picks another region."""

from __future__ import annotations

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import escalate
from graph.remedies.planner import Capacity
from mcp_tools.remediation import RemediationPlan


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    region = obs.service.region if obs.service and obs.service.region else "the service's region"
    gpu = cap.gpu or "the GPU"
    return [
        escalate(
            f"Request more Cloud Run GPU quota for {gpu} in {region} (IAM & Admin > Quotas: the "
            "'Total Nvidia ... GPU allocation' quota, with or without zonal redundancy as the service "
            "uses), or deploy without GPU zonal redundancy, or pick a region with capacity.",
            "no GPU could be allocated: quota or capacity",
            region=region,
            gpu=gpu,
        )
    ]
