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


def _tools(category: str, *rows: tuple[str, ...]) -> list[ToolHelp]:
    """One category's tools, each ``(name, summary, *flags)`` with flags from "mutating" and "new"."""
    return [
        ToolHelp(
            name=name, category=category, summary=summary, mutating="mutating" in flags, new="new" in flags
        )
        for name, summary, *flags in rows
    ]


TOOLS: list[ToolHelp] = [
    *_tools(
        "help",
        ("get_help", "This overview of the tools and resources."),
    ),
    # service state
    *_tools(
        "service",
        ("get_vllm_endpoint", "The vLLM service URL, from the Cloud Run API."),
        ("get_endpoint", "The endpoint URL and the served model name."),
        ("status_vllm", "Service status: ready revision, traffic, conditions."),
        ("get_system_status", "Service, endpoint health and key metrics at once."),
        ("get_model_details", "The served model, its context length and flags."),
        ("verify_model_health", "/health plus a short smoke completion."),
        ("list_revisions", "Revisions of the service, newest first.", "new"),
        (
            "get_vllm_metrics",
            "Parsed vLLM metrics: KV-cache use, running/waiting, preemptions, TTFT/ITL percentiles.",
            "new",
        ),
    ),
    # changes (two-step: plan, then apply with the confirmation token)
    *_tools(
        "changes",
        ("deploy_vllm", "Deploy or update the vLLM service.", "mutating"),
        ("destroy_vllm", "Delete the vLLM service.", "mutating"),
        ("update_vllm_scaling", "Change min/max instances.", "mutating"),
        ("rollback_service", "Route all traffic back to an earlier ready revision.", "mutating", "new"),
    ),
    # configs and capacity
    *_tools(
        "configs",
        ("get_vllm_deployment_config", "The gcloud run deploy command for vLLM on a Cloud Run GPU, as text."),
        (
            "get_vllm_gpu_deployment_config",
            "A GKE GPU node pool command plus vLLM Deployment and Service manifests.",
        ),
        ("check_gpu_quotas", "Cloud Run GPU quota per region, with and without zonal redundancy."),
        ("plan_capacity", "Does the model fit the GPU: weights, KV-cache tokens, concurrency, fixes.", "new"),
    ),
    # models and weights
    *_tools(
        "models",
        ("list_bucket_models", "Model folders in a bucket: size, shards, quantization."),
        ("list_vertex_models", "Models in the Vertex AI Model Registry."),
        (
            "get_vertex_ai_model_copy_instructions",
            "Steps to copy Vertex AI / Model Garden weights into a bucket.",
        ),
        ("get_huggingface_model_copy_instructions", "Steps to copy Hugging Face weights into a bucket."),
        ("get_huggingfacehub_download_path", "Hub URLs and cache path for an org/name model."),
        (
            "save_hf_token",
            "Store the HF token in Secret Manager, read from an env var or file (never an argument).",
        ),
    ),
    # querying
    *_tools(
        "query",
        ("query_vllm", "Send a chat prompt to the vLLM endpoint."),
        ("query_gemma4", "Send a chat prompt to the Gemma 4 endpoint."),
        ("query_gemma4_with_stats", "Chat prompt with real token usage, TTFT and inter-token latency."),
        ("run_benchmark", "A bounded load test: throughput and latency percentiles."),
    ),
    # diagnosis
    *_tools(
        "diagnosis",
        ("get_service_logs", "Filtered, bounded, compressed Cloud Logging entries for the service.", "new"),
        (
            "analyze_cloud_logging",
            "Diagnose the service from its logs (errors, context, templates; secrets redacted).",
        ),
        ("analyze_gpu_logs", "GPU memory / CUDA failures in the logs, with evidence."),
        ("suggest_sre_remediation", "A typed remediation plan for the diagnosis, with its predicted effect."),
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
