"""The Vertex AI Model Registry, through ``aiplatform_v1.ModelServiceClient`` over REST.

``google-cloud-aiplatform`` is heavy (seconds to import): it is imported only inside the function.
The low-level GAPIC client is used rather than the ``aiplatform`` SDK because it needs no global
``aiplatform.init`` state, speaks REST (so the sandbox can stand in for it) and lists one page at a
time, which keeps the listing bounded.
"""

from __future__ import annotations

import logging

from pydantic import BaseModel, Field

from mcp_tools.errors import UserError
from mcp_tools.extras._common import EXTRAS, resolve_project, resolve_region
from mcp_tools.google_api import build_client, call
from mcp_tools.settings import get_settings

log = logging.getLogger(__name__)


class VertexModel(BaseModel):
    name: str = Field(description="full resource name")
    model_id: str
    display_name: str
    version_id: str = ""
    artifact_uri: str = Field(default="", description="where the weights are (gs://...), if recorded")
    container_image: str = ""
    create_time: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)


class VertexModels(BaseModel):
    project: str
    region: str
    models: list[VertexModel]
    truncated: bool
    note: str | None = None


def list_vertex_models(
    region: str | None = None, *, project: str | None = None, limit: int = 100
) -> VertexModels:
    """Models in the Vertex AI Model Registry of ``project`` in ``region`` (at most ``limit``)."""
    settings = get_settings()
    project_id = resolve_project(project, settings)
    region_name = resolve_region(region, settings)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
        raise UserError(f"limit must be from 1 to 1000, got {limit!r}")

    from google.cloud.aiplatform_v1 import ListModelsRequest, ModelServiceClient

    endpoint = settings.aiplatform_api_endpoint or f"{region_name}-aiplatform.googleapis.com"
    client = build_client(ModelServiceClient, settings, endpoint=endpoint)
    parent = f"projects/{project_id}/locations/{region_name}"
    models: list[VertexModel] = []
    truncated = False

    def _list() -> None:
        nonlocal truncated
        pager = client.list_models(
            request=ListModelsRequest(parent=parent, page_size=min(limit, 100)),
            **EXTRAS.rpc,
        )
        for m in pager:
            if len(models) >= limit:
                truncated = True
                break
            models.append(
                VertexModel(
                    name=m.name,
                    model_id=m.name.rsplit("/", 1)[-1],
                    display_name=m.display_name,
                    version_id=m.version_id,
                    artifact_uri=m.artifact_uri,
                    container_image=m.container_spec.image_uri if "container_spec" in m else "",
                    create_time=m.create_time.isoformat() if "create_time" in m else None,
                    labels=dict(m.labels),
                )
            )

    call(
        f"Vertex AI Model Registry (list models in {parent})",
        _list,
        policy=EXTRAS,
        not_found=f"project {project_id!r} / region {region_name!r} not found for Vertex AI",
    )
    note = None
    if truncated:
        note = f"showing the first {limit} models: raise limit to see more"
    elif not models:
        note = "no models in the registry for this project and region"
    return VertexModels(project=project_id, region=region_name, models=models, truncated=truncated, note=note)
