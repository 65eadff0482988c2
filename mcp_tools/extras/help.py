"""``get_help``: a structured overview of every tool the MCP server offers, one line each."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ToolHelp(BaseModel):
    name: str
    category: str
    summary: str
    mutating: bool = Field(default=False, description="changes a service: plan first, apply with a token")
    new: bool = Field(default=False, description="not in the earlier server")


class ResourceHelp(BaseModel):
    uri: str
    summary: str


class HelpOverview(BaseModel):
    tools: list[ToolHelp]
    resources: list[ResourceHelp]
    notes: list[str]

    @property
    def text(self) -> str:
        lines = []
        for cat in dict.fromkeys(t.category for t in self.tools):
            lines.append(f"{cat}:")
            for t in self.tools:
                if t.category == cat:
                    flags = " [mutating]" if t.mutating else ""
                    lines.append(f"  {t.name}{flags}: {t.summary}")
        lines.append("resources:")
        lines += [f"  {r.uri}: {r.summary}" for r in self.resources]
        return "\n".join(lines)


_T = ToolHelp
TOOLS: list[ToolHelp] = [
    _T(name="get_help", category="help", summary="This overview of the tools and resources."),
    # service state
    _T(name="get_vllm_endpoint", category="service", summary="The vLLM service URL, from the Cloud Run API."),
    _T(name="get_endpoint", category="service", summary="The endpoint URL and the served model name."),
    _T(
        name="status_vllm", category="service", summary="Service status: ready revision, traffic, conditions."
    ),
    _T(
        name="get_system_status",
        category="service",
        summary="Service, endpoint health and key metrics at once.",
    ),
    _T(
        name="get_model_details",
        category="service",
        summary="The served model, its context length and flags.",
    ),
    _T(name="verify_model_health", category="service", summary="/health plus a short smoke completion."),
    _T(
        name="list_revisions", category="service", summary="Revisions of the service, newest first.", new=True
    ),
    _T(
        name="get_vllm_metrics",
        category="service",
        summary="Parsed vLLM metrics: KV-cache use, running/waiting, preemptions, TTFT/ITL percentiles.",
        new=True,
    ),
    # changes (two-step: plan, then apply with the confirmation token)
    _T(name="deploy_vllm", category="changes", summary="Deploy or update the vLLM service.", mutating=True),
    _T(name="destroy_vllm", category="changes", summary="Delete the vLLM service.", mutating=True),
    _T(name="update_vllm_scaling", category="changes", summary="Change min/max instances.", mutating=True),
    _T(
        name="rollback_service",
        category="changes",
        summary="Route all traffic back to an earlier ready revision.",
        mutating=True,
        new=True,
    ),
    # configs and capacity
    _T(
        name="get_vllm_deployment_config",
        category="configs",
        summary="The gcloud run deploy command for vLLM on a Cloud Run GPU, as text.",
    ),
    _T(
        name="get_vllm_gpu_deployment_config",
        category="configs",
        summary="A GKE GPU node pool command plus vLLM Deployment and Service manifests.",
    ),
    _T(
        name="check_gpu_quotas",
        category="configs",
        summary="Cloud Run GPU quota per region, with and without zonal redundancy.",
    ),
    _T(
        name="plan_capacity",
        category="configs",
        summary="Does the model fit the GPU: weights, KV-cache tokens, concurrency, fixes.",
        new=True,
    ),
    # models and weights
    _T(
        name="list_bucket_models",
        category="models",
        summary="Model folders in a bucket: size, shards, quantization.",
    ),
    _T(name="list_vertex_models", category="models", summary="Models in the Vertex AI Model Registry."),
    _T(
        name="get_vertex_ai_model_copy_instructions",
        category="models",
        summary="Steps to copy Vertex AI / Model Garden weights into a bucket.",
    ),
    _T(
        name="get_huggingface_model_copy_instructions",
        category="models",
        summary="Steps to copy Hugging Face weights into a bucket.",
    ),
    _T(
        name="get_huggingfacehub_download_path",
        category="models",
        summary="Hub URLs and cache path for an org/name model.",
    ),
    _T(
        name="save_hf_token",
        category="models",
        summary="Store the HF token in Secret Manager, read from an env var or file (never an argument).",
    ),
    # querying
    _T(name="query_vllm", category="query", summary="Send a chat prompt to the vLLM endpoint."),
    _T(name="query_gemma4", category="query", summary="Send a chat prompt to the Gemma 4 endpoint."),
    _T(
        name="query_gemma4_with_stats",
        category="query",
        summary="Chat prompt with real token usage, TTFT and inter-token latency.",
    ),
    _T(
        name="run_benchmark",
        category="query",
        summary="A bounded load test: throughput and latency percentiles.",
    ),
    # diagnosis
    _T(
        name="get_service_logs",
        category="diagnosis",
        summary="Filtered, bounded, compressed Cloud Logging entries for the service.",
        new=True,
    ),
    _T(
        name="analyze_cloud_logging",
        category="diagnosis",
        summary="Diagnose the service from its logs (errors, context, templates; secrets redacted).",
    ),
    _T(
        name="analyze_gpu_logs",
        category="diagnosis",
        summary="GPU memory / CUDA failures in the logs, with evidence.",
    ),
    _T(
        name="suggest_sre_remediation",
        category="diagnosis",
        summary="A typed remediation plan for the diagnosis, with its predicted effect.",
    ),
]

RESOURCES = [
    ResourceHelp(
        uri="config://vllm-deployment-template",
        summary="Cloud Run service YAML for vLLM on an L4, with documented ${PARAMETERS}.",
    )
]


def get_help() -> HelpOverview:
    """A structured overview of every tool (one line each) and resource."""
    return HelpOverview(
        tools=[t.model_copy() for t in TOOLS],
        resources=[r.model_copy() for r in RESOURCES],
        notes=[
            "Mutating tools return a plan, a spec diff and a confirmation token; "
            "call again with the token to apply.",
            "GEMMA_SRE_POLICY=read-only hides mutating tools; 'suggest' keeps them planning-only.",
            "Project and region come from arguments or GOOGLE_CLOUD_PROJECT / GOOGLE_CLOUD_LOCATION.",
        ],
    )
