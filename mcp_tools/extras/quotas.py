"""Cloud Run's own GPU quota (not Compute Engine's), with and without zonal redundancy, per region.

Read through the Cloud Quotas API (``google-cloud-quotas``, ``cloudquotas_v1``) for the service
``run.googleapis.com``. The quota ids look like ``NvidiaL4GpuAllocPerProjectRegion`` (with zonal
redundancy) and ``NvidiaL4GpuAllocNoZonalRedundancyPerProjectRegion`` (without).
"""

from __future__ import annotations

import logging
import re

from pydantic import BaseModel, Field

from mcp_tools.extras._common import EXTRAS, resolve_project
from mcp_tools.google_api import build_client, call
from mcp_tools.names import validate_region
from mcp_tools.settings import get_settings

log = logging.getLogger(__name__)

RUN_SERVICE = "run.googleapis.com"
_GPU_QUOTA_RE = re.compile(
    r"^(?P<gpu>Nvidia[A-Za-z0-9]+?)GpuAlloc(?P<nozr>NoZonalRedundancy)?PerProjectRegion$"
)
_MAX_PAGES = 20
_PAGE_SIZE = 100


class GpuQuota(BaseModel):
    region: str
    gpu_type: str = Field(description="Cloud Run GPU type, e.g. nvidia-l4")
    zonal_redundancy: bool = Field(description="True: the quota for services with GPU zonal redundancy")
    quota_id: str
    limit: int | None = Field(description="GPUs allowed in the region; -1 means unlimited")
    display_name: str = ""


class GpuQuotaReport(BaseModel):
    project: str
    service: str = RUN_SERVICE
    region: str | None = Field(description="the region asked about, or None for every region")
    quotas: list[GpuQuota]
    summary: list[str] = Field(description="one line per region and GPU type")
    notes: list[str]


def _gpu_type(camel: str) -> str:
    """NvidiaL4 -> nvidia-l4; NvidiaRtxPro6000 -> nvidia-rtx-pro-6000."""
    return "-".join(re.findall(r"[A-Z][a-z]+|[A-Z]+[0-9]*|[0-9]+", camel)).lower()


def check_gpu_quotas(region: str | None = None, project: str | None = None) -> GpuQuotaReport:
    """Cloud Run's GPU quota per region, with and without zonal redundancy (Cloud Quotas API)."""
    settings = get_settings()
    project_id = resolve_project(project, settings)
    region_name = validate_region(region) if region else None

    from google.cloud import cloudquotas_v1

    client = build_client(cloudquotas_v1.CloudQuotasClient, settings, endpoint=settings.quotas_api_endpoint)
    parent = f"projects/{project_id}/locations/global/services/{RUN_SERVICE}"

    def _list() -> list[cloudquotas_v1.QuotaInfo]:
        out: list[cloudquotas_v1.QuotaInfo] = []
        pager = client.list_quota_infos(
            request=cloudquotas_v1.ListQuotaInfosRequest(parent=parent, page_size=_PAGE_SIZE),
            **EXTRAS.rpc,
        )
        for n, page in enumerate(pager.pages):
            out.extend(info for info in page.quota_infos if _GPU_QUOTA_RE.match(info.quota_id))
            if n + 1 >= _MAX_PAGES:
                log.warning("quota listing stopped after %d pages", _MAX_PAGES)
                break
        return out

    infos = call(
        "Cloud Quotas API (list Cloud Run quotas)",
        _list,
        policy=EXTRAS,
        not_found=f"project {project_id!r} not found, or the Cloud Quotas API is not enabled in it",
    )

    quotas: list[GpuQuota] = []
    for info in infos:
        m = _GPU_QUOTA_RE.match(info.quota_id)
        assert m is not None
        gpu = _gpu_type(m.group("gpu"))
        zonal = m.group("nozr") is None
        specific = {d.dimensions.get("region") for d in info.dimensions_infos if d.dimensions.get("region")}
        for dim in info.dimensions_infos:
            dim_region = dim.dimensions.get("region")
            if dim_region:
                regions = [dim_region]
            elif dim.applicable_locations:
                regions = [r for r in dim.applicable_locations if r not in specific]
            else:  # a default that applies everywhere no region-specific value is set
                regions = [region_name] if region_name and region_name not in specific else []
            for reg in regions:
                if reg == "global" or (region_name and reg != region_name):
                    continue
                quotas.append(
                    GpuQuota(
                        region=reg,
                        gpu_type=gpu,
                        zonal_redundancy=zonal,
                        quota_id=info.quota_id,
                        limit=int(dim.details.value) if "details" in dim else None,
                        display_name=info.quota_display_name,
                    )
                )
    quotas.sort(key=lambda q: (q.region, q.gpu_type, not q.zonal_redundancy))

    summary: list[str] = []
    by_key: dict[tuple[str, str], dict[bool, int | None]] = {}
    for q in quotas:
        by_key.setdefault((q.region, q.gpu_type), {})[q.zonal_redundancy] = q.limit
    for (reg, gpu), vals in sorted(by_key.items()):
        summary.append(
            f"{reg} {gpu}: with zonal redundancy {_fmt(vals.get(True))}, "
            f"without zonal redundancy {_fmt(vals.get(False))}"
        )
    notes = [
        "Limits only: the Cloud Quotas API does not report usage (Cloud Monitoring does).",
        "A revision rollout can briefly need more GPUs than max-instances; leave headroom.",
    ]
    if not quotas:
        where = f"region {region_name}" if region_name else "any region"
        notes.insert(0, f"No Cloud Run GPU quota found for {where}: request it at g.co/cloudrun/gpu-quota.")
    return GpuQuotaReport(project=project_id, region=region_name, quotas=quotas, summary=summary, notes=notes)


def _fmt(value: int | None) -> str:
    if value is None:
        return "not set"
    if value < 0:
        return "unlimited"
    return str(value)
