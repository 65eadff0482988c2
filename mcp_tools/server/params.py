"""What every tool parameter means, for the model that picks a tool and fills its arguments: one
description per parameter name, with units and an example, and per-tool wording where a name means
something else in that tool.

``described(fn)`` gives a tool function's signature with each parameter annotated
``Annotated[type, Field(description=...)]``, the form FastMCP turns into the input schema's
``description``; a parameter that already carries a description in its own annotation keeps it.
``core.tool_errors`` applies it to every tool, so a tool registered any way gets its descriptions.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any, get_args, get_origin

from pydantic import Field
from pydantic.fields import FieldInfo

_SINCE = "start of the time window: a duration back from now ('15m', '2h', '1d') or an ISO 8601 time"

#: By parameter name, for every tool that uses it.
PARAMS: dict[str, str] = {
    # which service, which project
    "service_name": (
        "Cloud Run service name, e.g. 'gemma-4-12b' (lowercase letters, digits, hyphens); "
        "default: GEMMA_SRE_SERVICE (read tools use VLLM_BASE_URL instead when it is set)"
    ),
    "project": "Google Cloud project id, e.g. 'my-project'; default: GOOGLE_CLOUD_PROJECT",
    "region": "Cloud region, e.g. 'us-central1'; default: GOOGLE_CLOUD_LOCATION",
    "confirmation_token": (
        "leave empty on the first call (you get the plan and a token); on the second call, the "
        "confirmation_token the first call returned, with the same other arguments, to apply the change "
        "(single use, valid a few minutes)"
    ),
    # the model and its prompts
    "prompt": "the user message sent to the model, e.g. 'Summarise what vLLM is in one line.'",
    "max_tokens": "most tokens the model may generate in its answer, 1 to 8192",
    "temperature": "sampling temperature, 0 (deterministic) to 2; e.g. 0.2",
    # logs
    "since": _SINCE + "; e.g. '1h'",
    "until": "end of the time window, same forms as since ('5m' = five minutes ago); default: now",
    "severity": (
        "lowest log severity to include: DEFAULT, DEBUG, INFO, NOTICE, WARNING, ERROR, CRITICAL, ALERT "
        "or EMERGENCY; e.g. 'ERROR'; default: all"
    ),
    "text_filter": "only entries whose text contains this, e.g. 'CUDA out of memory' (up to 200 characters)",
    "budget_tokens": "size of the compressed log selection returned, in tokens, 200 to 16000",
    # vLLM serving flags
    "max_model_len": "vLLM --max-model-len: the longest context (prompt + output), in tokens, e.g. 8192",
    "gpu_memory_utilization": (
        "vLLM --gpu-memory-utilization: the fraction of each GPU's memory vLLM may use, 0.1 to 0.99, e.g. 0.9"
    ),
    "max_num_seqs": "vLLM --max-num-seqs: most requests batched at once, 1 to 4096; default: vLLM's",
    "quantization": "vLLM --quantization, e.g. 'fp8' (online), 'awq', 'gptq'; default: as the checkpoint is",
    "kv_cache_dtype": "vLLM --kv-cache-dtype, e.g. 'fp8' (halves the KV cache), 'auto'; default: auto",
    "dtype": "vLLM --dtype for the weights, e.g. 'bfloat16', 'float16'; default: auto",
    "served_model_name": "vLLM --served-model-name: the model name clients send, e.g. 'gemma-4'",
    "extra_args": "more vLLM arguments, one per item, e.g. ['--enable-prefix-caching']",
    "image": "container image, e.g. 'vllm/vllm-openai:v0.11.0'",
    "model_load_time_s": "how long the model takes to load, seconds (sizes the start-up probe)",
    # Cloud Run resources and scaling
    "gpu_type": "Cloud Run GPU type: 'nvidia-l4' or 'nvidia-rtx-pro-6000'",
    "cpu": "vCPUs per instance, e.g. 8 (an L4 needs at least 4)",
    "min_instances": "fewest instances kept running, 0 (scale to zero) to 1000",
    "max_instances": "most instances, 1 to 1000 (each needs one GPU of quota)",
    "concurrency": "most requests one instance serves at once, 1 to 1000, e.g. 4",
    "gpu_count": "GPUs per instance or node, 1 to 8",
    # weights and buckets
    "bucket": "Cloud Storage bucket name without gs://, e.g. 'my-models'",
    "model_id": "Hugging Face model id 'org/name', e.g. 'google/gemma-3-12b-it'",
    "revision": "Hugging Face branch, tag or commit of the model, e.g. 'main'",
    "destination_prefix": "folder in the bucket the weights go under, e.g. 'models'",
    "hf_token_secret": "Secret Manager secret id holding the Hugging Face token, e.g. 'hf-token'",
    "limit": "most items returned",
    # the agent's threads
    "thread_id": "the thread id investigate returned, e.g. 'gemma-4-12b-1a2b3c4d5e'",
    "approver": "an optional note of who you act for (the decision is recorded as this server's principal)",
}

#: By tool, then parameter, where the shared wording does not fit.
TOOL_PARAMS: dict[str, dict[str, str]] = {
    # Cloud Run and the endpoint
    "status_vllm": {
        "max_revisions": "most revisions listed, newest first, 1 to 100",
    },
    "list_revisions": {
        "limit": "most revisions listed, newest first, 1 to 100",
    },
    "verify_model_health": {
        "smoke_test": "also send a one-line completion and time it (true / false)",
    },
    # benchmark
    "run_benchmark": {
        "concurrencies": "concurrent requests per load point, e.g. [1, 4, 8]; default [1, 4]",
        "context_lengths": "prompt lengths in tokens, e.g. [256, 2048]; default [256]",
        "output_tokens": "tokens generated per request, 1 to 4096",
        "requests_per_point": "requests per load point, 1 to 500 (at most 2000 in all)",
        "seconds_per_point": "longest time one load point may take, seconds, 1 to 300",
        "ttft_slo_ms": "time-to-first-token goal for goodput, milliseconds, e.g. 500",
    },
    # capacity planner
    "plan_capacity": {
        "model": "Hugging Face model id or checkpoint name, e.g. 'google/gemma-3-12b-it'",
        "gpu": "GPU type, e.g. 'nvidia-l4', 'nvidia-h100-80gb'; or give gpu_memory_gib",
        "gpu_memory_gib": "memory of one GPU, GiB (instead of a known gpu), e.g. 24",
        "vllm_args": "the service's vLLM arguments, e.g. ['--max-model-len=8192']",
        "gpu_memory_used_gib": "memory other processes hold on each GPU, GiB, e.g. 1.5",
        "vllm_version": "account as this vLLM release does, e.g. '0.11.0'; default: current",
    },
    # logs
    "get_service_logs": {
        "revision": "only this revision's entries, e.g. 'gemma-4-12b-00002-abc'",
        "limit": "most log entries read (the newest in the window), 1 to 5000",
    },
    "analyze_cloud_logging": {
        "limit": "most log entries read (the newest in the window), 1 to 5000",
        "max_tokens": "most tokens of the model's summary, 1 to 8192",
        "filter_query": (
            "not accepted (raw Cloud Logging filters were pasted unchecked): leave empty and use "
            "since, severity and text_filter"
        ),
    },
    # deployment configs (text only)
    "get_vllm_deployment_config": {
        "model": "Hugging Face model id 'org/name'; default: MODEL_NAME",
        "service": "name of the Cloud Run service to deploy, e.g. 'gemma-4-12b'",
        "bucket": "bucket with the weights (mounted read-only); default: the hub",
        "weights_path": "folder in the bucket; default: the model's name",
        "mount_path": "where the bucket is mounted in the container",
        "zonal_redundancy": "GPU zonal redundancy (needs more quota)",
        "memory_gib": "memory per instance, GiB, e.g. 32",
        "request_timeout_s": "Cloud Run request timeout, seconds, e.g. 600",
        "hf_token_secret": (
            "Secret Manager secret with the Hugging Face token (when loading from the hub); "
            "null leaves it out"
        ),
        "service_account": "service account email the service runs as",
        "allow_unauthenticated": "let anyone call the URL (no IAM check)",
    },
    "get_vllm_gpu_deployment_config": {
        "model": "Hugging Face model id 'org/name'; default: MODEL_NAME",
        "cluster": "GKE cluster name",
        "location": ("the cluster's region or zone, e.g. 'us-central1'; default: GOOGLE_CLOUD_LOCATION"),
        "node_pool": "name of the GPU node pool to create",
        "accelerator": (
            "GKE accelerator: nvidia-l4, nvidia-tesla-t4, nvidia-tesla-a100, nvidia-a100-80gb or "
            "nvidia-h100-80gb"
        ),
        "machine_type": "node machine type, e.g. 'g2-standard-8'; default: "
        "the accelerator's usual one (required when gpu_count is above 1)",
        "max_nodes": "most nodes the pool autoscales to",
        "spot": "use Spot VMs (cheaper, can be preempted)",
        "name": "name of the Deployment and Service",
        "namespace": "Kubernetes namespace",
        "replicas": "Deployment replicas (one GPU node each)",
        "hf_secret_name": ("Kubernetes secret with the Hugging Face token; null leaves it out"),
        "hf_secret_key": "key of the token inside that secret",
        "shm_size_gib": "shared memory (/dev/shm) for the container, GiB",
    },
    # buckets, Vertex AI, the hub
    "list_bucket_models": {
        "prefix": "only folders under this path in the bucket, e.g. 'models/'",
        "max_objects": "most objects scanned, 1 to 100000",
    },
    "list_vertex_models": {
        "limit": "most models listed, 1 to 1000",
    },
    "get_vertex_ai_model_copy_instructions": {
        "model": (
            "Model Garden id ('publishers/google/models/gemma3' or just its name) or a registry model's "
            "resource name"
        ),
        "source_uri": (
            "gs:// URI of the model's artifacts when known (from list_vertex_models or the model card)"
        ),
    },
    "get_huggingfacehub_download_path": {
        "filename": "one file in the repo, e.g. 'config.json'",
    },
    "save_hf_token": {
        "secret_id": "Secret Manager secret id to add a version to, e.g. 'hf-token'",
        "from_env": "environment variable of the server holding the token, e.g. 'HF_TOKEN'",
        "from_file": "path of a file on the server holding the token (instead of from_env)",
    },
    # mutations
    "rollback_service": {
        "revision": (
            "Ready revision to send all traffic to, e.g. 'gemma-4-12b-00001-xyz'; default: the newest Ready "
            "revision that is not serving"
        ),
    },
    "update_vllm_scaling": {
        "concurrency": "most requests per instance at once, 1 to 1000; default: kept",
    },
    "deploy_vllm": {
        "model_path": (
            "a folder in bucket_name (e.g. 'models/gemma-3-12b-it', mounted at /mnt/models) or, without a "
            "bucket, a Hugging Face repo id 'org/name'"
        ),
        "bucket_name": "Cloud Storage bucket with the weights, without gs://; omit for the hub",
        "memory": "memory per instance, Kubernetes style, e.g. '32Gi'",
        "max_model_len": "vLLM --max-model-len, in tokens, at least 256; default: the model's",
        "extra_vllm_args": "more vLLM arguments, one per item, e.g. ['--kv-cache-dtype=fp8']",
    },
    # the agent
    "suggest_sre_remediation": {
        "error_message": (
            "log text or an error message to diagnose, e.g. 'torch.OutOfMemoryError: CUDA out of memory'; "
            "or leave empty and give service_name to read the live service"
        ),
        "since": _SINCE + " (how far back to read the service's logs)",
    },
    "analyze_gpu_logs": {
        "since": _SINCE + " (how far back to read the service's logs)",
        "log_text": "pasted log text to analyse instead of the service's logs",
    },
    "investigate": {
        "service": "Cloud Run service to look at, e.g. 'gemma-4-12b'; empty: GEMMA_SRE_SERVICE",
        "question": "a question for the model about the incident, e.g. 'why did it stop?'",
    },
    "reject_remediation": {
        "reason": "why the plan is rejected (recorded in the report)",
    },
}


def description(tool: str, param: str) -> str | None:
    return TOOL_PARAMS.get(tool, {}).get(param) or PARAMS.get(param)


def _has_description(annotation: Any) -> bool:
    if get_origin(annotation) is not Annotated:
        return False
    return any(isinstance(m, FieldInfo) and m.description for m in get_args(annotation)[1:])


def described(fn: Callable[..., Any], sig: inspect.Signature) -> inspect.Signature:
    """``sig`` (of tool ``fn``) with a description on every parameter this module knows."""
    params = []
    for p in sig.parameters.values():
        text = description(fn.__name__, p.name)
        if text and p.annotation is not inspect.Parameter.empty and not _has_description(p.annotation):
            p = p.replace(annotation=Annotated[p.annotation, Field(description=text)])
        params.append(p)
    return sig.replace(parameters=params)
