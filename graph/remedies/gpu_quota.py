"""gpu_quota: a person requests quota, drops zonal redundancy or picks another region; for a job its own
cluster cannot place (fewer GPUs than it asks for), adds GPU nodes or asks for fewer; for a GPU type the
zone does not offer, deploys where it is offered or picks another type."""

from __future__ import annotations

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import escalate, fact
from graph.remedies.planner import Capacity
from mcp_tools.remediation import RemediationPlan


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    if fact(diag, "cluster_short_of_gpus"):  # the job's own cluster, not the cloud's quota
        return [
            escalate(
                "The job asks its cluster (Ray's placement groups, a node pool) for more GPUs than its nodes "
                "have: add nodes with GPUs, or ask for fewer (a smaller --tensor-parallel-size, fewer "
                "bundles per replica).",
                "the cluster has fewer GPUs than the job asks for",
            )
        ]
    region = obs.service.region if obs.service and obs.service.region else "the service's region"
    gpu = cap.gpu or "the GPU"
    absent = fact(diag, "gpu_not_offered")
    if absent:  # not a quota: the place has no such GPU at all
        gpu = absent.get("gpu") or gpu
        zone = f"zone {absent['zone']}" if absent.get("zone") else "the zone"
        return [
            escalate(
                f"{zone.capitalize()} does not offer {gpu}: deploy where it is offered (another zone or "
                "region; Cloud Run lists its GPU regions, Compute Engine its accelerator types per zone), or "
                "pick a GPU type this zone offers. A quota request does not help.",
                "the GPU type is not offered where it was asked for",
                gpu=gpu,
            )
        ]
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
