"""Register the extras on a FastMCP server: ``register_extras(mcp, state=None)``.

It fits ``build_server(settings, extra_registrars=[register_extras])`` (a ``Registrar`` takes the
server and its state; the state is not needed here). Each tool runs the plain function in a worker
thread (the Google clients are synchronous), answers with structured content plus readable text
(bounded), and turns ``UserError`` / ``ExternalError`` into one-line MCP error results.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel

from mcp_tools.errors import ExternalError, UserError
from mcp_tools.extras import copy_instructions as ci
from mcp_tools.extras import deploy_config as dc
from mcp_tools.extras.help import HelpOverview, get_help
from mcp_tools.extras.quotas import GpuQuotaReport, check_gpu_quotas
from mcp_tools.extras.secrets import SavedSecret, save_hf_token
from mcp_tools.extras.storage import BucketModels, list_bucket_models
from mcp_tools.extras.vertex import VertexModels, list_vertex_models
from mcp_tools.settings import Policy, get_settings

log = logging.getLogger(__name__)

MAX_TEXT_CHARS = 12_000
READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, openWorldHint=True)
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


# ---------------------------------------------------------------- wrapping


def _bounded(text: str) -> str:
    if len(text) <= MAX_TEXT_CHARS:
        return text
    return (
        text[:MAX_TEXT_CHARS]
        + f"\n... [{len(text) - MAX_TEXT_CHARS} more characters: see the structured content]"
    )


def _as_tool(
    fn: Callable[..., BaseModel], model: type[BaseModel], render: Callable[[Any], str]
) -> Callable[..., Any]:
    """An async tool with ``fn``'s parameters that returns structured content plus readable text."""
    sig = inspect.signature(fn, eval_str=True)

    @functools.wraps(fn)
    async def tool(**kwargs: Any) -> CallToolResult:
        try:
            out = await asyncio.to_thread(fn, **kwargs)
        except (UserError, ExternalError) as e:
            raise ToolError(" ".join(str(e).split())[:600]) from None
        except Exception as e:  # a bug of ours: logged to stderr, one line to the caller
            log.exception("tool %s failed", fn.__name__)
            raise ToolError(f"internal error ({e.__class__.__name__})") from None
        return CallToolResult(
            content=[TextContent(type="text", text=_bounded(render(out)))],
            structuredContent=out.model_dump(mode="json"),
        )

    tool.__signature__ = sig.replace(  # type: ignore[attr-defined]
        return_annotation=Annotated[CallToolResult, model]
    )
    tool.__annotations__ = {
        **{n: p.annotation for n, p in sig.parameters.items()},
        "return": Annotated[CallToolResult, model],
    }
    return tool


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


def register_extras(mcp: FastMCP, state: Any = None) -> None:
    """Add the extras tools and the ``config://vllm-deployment-template`` resource to ``mcp``.

    Under ``GEMMA_SRE_POLICY=read-only`` the one tool that writes (``save_hf_token``) is left out.
    """
    policy = getattr(state, "policy", None) or get_settings().policy
    for fn, model, render, hints in EXTRAS_TOOLS:
        if hints is WRITES_SECRET and policy is Policy.READ_ONLY:
            continue
        mcp.add_tool(_as_tool(fn, model, render), name=fn.__name__, annotations=hints)

    @mcp.resource(
        dc.TEMPLATE_URI,
        name="vllm-deployment-template",
        description="Cloud Run service YAML for vLLM on an L4 GPU, with documented ${PARAMETERS}.",
        mime_type="application/yaml",
    )
    def vllm_deployment_template() -> str:
        return dc.vllm_deployment_template().text
