"""The extras as MCP tools: ``EXTRAS_TOOLS`` lists each function with its result model, its readable
rendering and its tool hints. ``mcp_tools.server.tools_extras`` registers them (in a worker thread, with
the server's error handling and redaction)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.types import ToolAnnotations
from pydantic import BaseModel

from mcp_tools.extras import copy_instructions as ci
from mcp_tools.extras import deploy_config as dc
from mcp_tools.extras.help import HelpOverview, get_help
from mcp_tools.extras.quotas import GpuQuotaReport, check_gpu_quotas
from mcp_tools.extras.secrets import SavedSecret, save_hf_token
from mcp_tools.extras.storage import BucketModels, list_bucket_models
from mcp_tools.extras.vertex import VertexModels, list_vertex_models
from mcp_tools.server.core import READ_ONLY

LOCAL_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, openWorldHint=False)
WRITES_SECRET = ToolAnnotations(
    readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=True
)


# ---------------------------------------------------------------- readable text for each result


def _text_help(r: HelpOverview) -> str:
    return r.text


def _text_cloud_run(r: dc.CloudRunDeployCommand) -> str:
    return r.command + f"\n\nfit: {r.fit.verdict}\n" + "\n".join(f"- {n}" for n in r.notes)


def _text_gke(r: dc.GkeDeploymentConfig) -> str:
    return (
        "# node pool\n"
        + r.node_pool_command
        + "\n\n# manifests (kubectl apply -f)\n"
        + r.manifests_yaml
        + f"\nfit: {r.fit.verdict}\n"
        + "\n".join(f"- {n}" for n in r.notes)
    )


def _text_quotas(r: GpuQuotaReport) -> str:
    head = f"Cloud Run GPU quota ({r.service}) for project {r.project}" + (
        f", region {r.region}" if r.region else ""
    )
    return "\n".join([head, *r.summary, *(f"- {n}" for n in r.notes)])


def _text_bucket(r: BucketModels) -> str:
    lines = [
        f"gs://{r.bucket}/{r.prefix}: {len(r.models)} model folder(s), {r.objects_scanned} objects scanned"
    ]
    for m in r.models:
        extra = ", ".join(
            x for x in (m.architecture, m.torch_dtype, m.quantization and f"quant {m.quantization}") if x
        )
        lines.append(
            f"{m.uri}: {m.size_gib} GiB, {m.shard_count} safetensors shard(s)"
            + (f", {extra}" if extra else "")
        )
        if m.config_error:
            lines.append(f"  {m.config_error}")
    if r.note:
        lines.append(r.note)
    return "\n".join(lines)


def _text_vertex(r: VertexModels) -> str:
    lines = [f"Vertex AI Model Registry, {r.project} / {r.region}: {len(r.models)} model(s)"]
    lines += [
        f"{m.model_id} {m.display_name!r} v{m.version_id or '?'} {m.artifact_uri or ''}".rstrip()
        for m in r.models
    ]
    if r.note:
        lines.append(r.note)
    return "\n".join(lines)


def _text_copy(r: ci.CopyInstructions) -> str:
    return r.text


def _text_hub(r: ci.HubDownloadPath) -> str:
    return "\n".join(
        [
            f"repo: {r.repo_url}",
            f"file URL: {r.file_url or r.file_url_pattern}",
            f"cache: {r.snapshot_path_pattern} (HF_HOME defaults to ~/.cache/huggingface)",
            f"download: {r.download_command}",
        ]
    )


def _text_saved(r: SavedSecret) -> str:
    made = "created the secret and " if r.created_secret else ""
    return f"{made}stored version {r.version_id} of {r.secret} (token read from {r.source})"


EXTRAS_TOOLS: list[
    tuple[Callable[..., BaseModel], type[BaseModel], Callable[[Any], str], ToolAnnotations]
] = [
    (get_help, HelpOverview, _text_help, LOCAL_ONLY),
    (dc.get_vllm_deployment_config, dc.CloudRunDeployCommand, _text_cloud_run, LOCAL_ONLY),
    (dc.get_vllm_gpu_deployment_config, dc.GkeDeploymentConfig, _text_gke, LOCAL_ONLY),
    (check_gpu_quotas, GpuQuotaReport, _text_quotas, READ_ONLY),
    (list_bucket_models, BucketModels, _text_bucket, READ_ONLY),
    (list_vertex_models, VertexModels, _text_vertex, READ_ONLY),
    (ci.get_vertex_ai_model_copy_instructions, ci.CopyInstructions, _text_copy, LOCAL_ONLY),
    (ci.get_huggingface_model_copy_instructions, ci.CopyInstructions, _text_copy, LOCAL_ONLY),
    (ci.get_huggingfacehub_download_path, ci.HubDownloadPath, _text_hub, LOCAL_ONLY),
    (save_hf_token, SavedSecret, _text_saved, WRITES_SECRET),
]
