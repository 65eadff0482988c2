"""Deployment configs for vLLM, generated as text for a person to read and run (never executed here).

- ``get_vllm_deployment_config``: the ``gcloud run deploy`` command for vLLM on a Cloud Run GPU.
- ``get_vllm_gpu_deployment_config``: a GKE GPU node pool (``gcloud container node-pools create``)
  plus Kubernetes Deployment and Service manifests, built with PyYAML from dicts.
- ``vllm_deployment_template``: the ``config://vllm-deployment-template`` resource (a Cloud Run
  service YAML with documented ``${PARAMETERS}``).

Every user value is validated, and shell-quoted (``shlex.quote``) where it lands in a command.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, Field

from mcp_tools.cloudrun_limits import (
    GPU_MINIMUMS,
    MAX_CONCURRENCY,
    MAX_INSTANCES,
    PROBE_MAX_DELAY_S,
    PROBE_MAX_WINDOW_GPU_S,
    Shape,
    violations,
)
from mcp_tools.errors import UserError
from mcp_tools.extras._common import resolve_region
from mcp_tools.names import (
    describe,
    validate_bucket,
    validate_location,
    validate_model_id,
    validate_object_prefix,
    validate_project,
    validate_rfc1035,
    validate_secret_id,
    validate_service_name,
)
from mcp_tools.settings import get_settings

DEFAULT_VLLM_IMAGE = "vllm/vllm-openai:latest"
DEFAULT_PORT = 8000
DEFAULT_MOUNT_PATH = "/mnt/models"

# GKE accelerators: default machine type (one GPU) and container requests that fit its allocatable.
GKE_ACCELERATORS: dict[str, dict[str, Any]] = {
    "nvidia-l4": {"machine_type": "g2-standard-8", "cpu": "6", "memory_gib": 24},
    "nvidia-tesla-t4": {"machine_type": "n1-standard-8", "cpu": "6", "memory_gib": 24},
    "nvidia-tesla-a100": {"machine_type": "a2-highgpu-1g", "cpu": "10", "memory_gib": 64},
    "nvidia-a100-80gb": {"machine_type": "a2-ultragpu-1g", "cpu": "10", "memory_gib": 128},
    "nvidia-h100-80gb": {"machine_type": "a3-highgpu-1g", "cpu": "20", "memory_gib": 200},
}

_FLAG_VALUE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_IMAGE_RE = re.compile(r"^[a-z0-9][a-z0-9._/-]*(?::[A-Za-z0-9._-]{1,128})?(?:@sha256:[a-f0-9]{64})?$")
_SA_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z0-9.-]+\.iam\.gserviceaccount\.com$")
_MOUNT_RE = re.compile(r"^/[A-Za-z0-9._/-]{1,200}$")
_MACHINE_RE = re.compile(r"^[a-z][a-z0-9-]{1,40}$")


def _dump(doc: dict[str, Any]) -> str:
    """Plain YAML for people and kubectl: repeated values written out, never as &anchors / *aliases."""
    import yaml  # imported where used: the MCP server starts without it

    class _NoAliasDumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    return yaml.dump(doc, Dumper=_NoAliasDumper, sort_keys=False)


class StartupProbe(BaseModel):
    """Startup probe timing sized to the model's load time."""

    path: str = "/health"
    port: int = DEFAULT_PORT
    initial_delay_s: int
    period_s: int
    timeout_s: int
    failure_threshold: int
    budget_s: int = Field(description="initial delay + failure_threshold * period: the time vLLM gets")


class FitCheck(BaseModel):
    """The capacity planner's verdict for the generated flags (advisory: the config is still given)."""

    fits: bool | None = Field(description="None when the planner does not know the model or GPU")
    verdict: str
    weights_gib: float | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    suggestions: list[str] = Field(default_factory=list)


class CloudRunDeployCommand(BaseModel):
    """A ``gcloud run deploy`` command, as text to run (we never execute it)."""

    command: str = Field(description="the command, one flag per line, every value shell-quoted")
    argv: list[str] = Field(description="the same command as an argument vector")
    service: str
    region: str
    project: str | None
    image: str
    model: str
    model_path: str = Field(description="what vLLM is told to load (a mounted path or a hub id)")
    vllm_args: list[str]
    gpu_type: str
    zonal_redundancy: bool
    startup_probe: StartupProbe
    fit: FitCheck
    notes: list[str]


class GkeDeploymentConfig(BaseModel):
    """A GKE GPU node pool command plus the Deployment and Service manifests for vLLM."""

    node_pool_command: str
    node_pool_argv: list[str]
    deployment_yaml: str
    service_yaml: str
    manifests_yaml: str = Field(description="Deployment and Service as one multi-document YAML")
    deployment: dict[str, Any]
    service: dict[str, Any]
    fit: FitCheck
    notes: list[str]


class TemplateParameter(BaseModel):
    name: str
    description: str
    default: str | None = None


class DeploymentTemplate(BaseModel):
    uri: str = "config://vllm-deployment-template"
    mime_type: str = "application/yaml"
    text: str
    parameters: list[TemplateParameter]


# ---------------------------------------------------------------- helpers


def _check_int(value: int, what: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise UserError(f"{what} must be a whole number from {lo} to {hi}, got {describe(value)}")
    return value


def _check_flag_value(value: str | None, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _FLAG_VALUE_RE.match(value):
        raise UserError(f"{what} {describe(value)} must be letters, digits, '.', '_' or '-'")
    return value


def _check_extra_args(extra: list[str] | None) -> list[str]:
    out: list[str] = []
    for item in extra or []:
        if not isinstance(item, str) or not item or len(item) > 4096:
            raise UserError(f"extra vLLM argument {describe(item)} must be a non-empty string")
        if any(ord(c) < 32 or ord(c) == 127 for c in item):
            raise UserError(f"extra vLLM argument {describe(item)} contains control characters")
        out.append(item)
    return out


def _check_image(image: str) -> str:
    if not isinstance(image, str) or len(image) > 512 or not _IMAGE_RE.match(image):
        raise UserError(f"image {describe(image)} is not a valid container image reference")
    return image


def _check_mount(path: str) -> str:
    if not isinstance(path, str) or not _MOUNT_RE.match(path) or "/../" in f"{path}/":
        raise UserError(f"mount path {describe(path)} must be an absolute path like /mnt/models")
    return path.rstrip("/")


def _gcloud_list(items: list[str]) -> str:
    """A gcloud list value; switch delimiter (``^D^`` syntax) when an item contains a comma."""
    if not any("," in item for item in items):
        return ",".join(items)
    for delim in ("@", "|", "#", "~", ";", "%", "+"):
        if not any(delim in item for item in items):
            return f"^{delim}^" + delim.join(items)
    raise UserError("extra vLLM arguments use every list delimiter gcloud accepts; simplify them")


def _format_command(argv: list[str], head: int) -> str:
    """First ``head`` tokens on one line, then one token per continuation line."""
    first = " ".join(shlex.quote(t) for t in argv[:head])
    rest = [shlex.quote(t) for t in argv[head:]]
    return " \\\n  ".join([first, *rest])


def size_startup_probe(model_load_time_s: int, *, port: int = DEFAULT_PORT) -> StartupProbe:
    """Startup probe for a server that needs about ``model_load_time_s`` to become healthy.

    The budget is 1.5x the estimate plus 60 s, within Cloud Run's limits (initial delay <= 240 s,
    failureThreshold x period <= 1800 s for GPU services). Probing every 10 s after the delay means
    a fast start is noticed quickly while a slow one is not killed.
    """
    _check_int(model_load_time_s, "model_load_time_s", 1, 3600)
    budget = min(math.ceil(model_load_time_s * 1.5) + 60, PROBE_MAX_DELAY_S + PROBE_MAX_WINDOW_GPU_S)
    initial = min(PROBE_MAX_DELAY_S, model_load_time_s // 2)
    period = 10
    failures = max(3, math.ceil((budget - initial) / period))
    failures = min(failures, PROBE_MAX_WINDOW_GPU_S // period)
    return StartupProbe(
        port=port,
        initial_delay_s=initial,
        period_s=period,
        timeout_s=5,
        failure_threshold=failures,
        budget_s=initial + failures * period,
    )


def check_fit(model_id: str, vllm_args: list[str], *, gpu: str, gpu_count: int = 1) -> FitCheck:
    """Ask the capacity planner whether ``model_id`` with these vLLM args fits ``gpu_count`` x ``gpu``."""
    from mcp_tools.capacity import parse_vllm_args, plan_capacity

    try:
        flags = parse_vllm_args(vllm_args)
        plan = plan_capacity(model_id, gpu=gpu, gpu_count=gpu_count, flags=flags)
    except (UserError, ValueError) as exc:
        return FitCheck(fits=None, verdict=f"fit not checked: {' '.join(str(exc).split())[:200]}")
    return FitCheck(
        fits=plan.fits,
        verdict=plan.verdict,
        weights_gib=plan.weights_gib,
        kv_cache_tokens=plan.kv_cache_tokens,
        max_concurrency=plan.max_concurrency,
        suggestions=[s.summary for s in plan.suggestions if s.fits][:3],
    )


def _resolve_model(model: str | None) -> str:
    value = model or get_settings().model_name
    if not value:
        raise UserError("no model: pass model (a Hugging Face id 'org/name') or set MODEL_NAME")
    return validate_model_id(value)


def _check_served_name(name: str) -> None:
    if not isinstance(name, str) or not re.match(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$", name):
        raise UserError(f"served_model_name {describe(name)} must be letters, digits, '.', '_', '-' or '/'")


@dataclass(frozen=True, kw_only=True)
class VllmServing:
    """The vLLM server options both generators take (Cloud Run and GKE), checked when they become
    ``vllm serve`` arguments. As MCP tools the generators take them as flat arguments, by these names
    (``mcp_tools.server.tools_extras`` spreads a dataclass parameter into its fields)."""

    max_model_len: int = 8192
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    dtype: str | None = None
    served_model_name: str | None = None
    extra_args: list[str] | None = None

    def args(self, model_path: str, *, port: int, tensor_parallel_size: int = 1) -> list[str]:
        """The ``vllm serve`` arguments for ``model_path``, each option checked."""
        if self.served_model_name is not None:
            _check_served_name(self.served_model_name)
        extra_args = _check_extra_args(self.extra_args)
        _check_int(self.max_model_len, "max_model_len", 16, 10_000_000)
        gpu_memory_utilization = self.gpu_memory_utilization
        if (
            isinstance(gpu_memory_utilization, bool)
            or not isinstance(gpu_memory_utilization, int | float)
            or not 0.1 <= gpu_memory_utilization <= 0.99
        ):
            raise UserError(
                f"gpu_memory_utilization must be between 0.1 and 0.99, got {describe(gpu_memory_utilization)}"
            )
        args = [
            model_path,
            f"--port={port}",
            f"--max-model-len={self.max_model_len}",
            f"--gpu-memory-utilization={gpu_memory_utilization:g}",
        ]
        if self.served_model_name:
            args.append(f"--served-model-name={self.served_model_name}")
        if self.max_num_seqs is not None:
            args.append(f"--max-num-seqs={_check_int(self.max_num_seqs, 'max_num_seqs', 1, 4096)}")
        if self.quantization:
            args.append(f"--quantization={_check_flag_value(self.quantization, 'quantization')}")
        if self.kv_cache_dtype:
            args.append(f"--kv-cache-dtype={_check_flag_value(self.kv_cache_dtype, 'kv_cache_dtype')}")
        if self.dtype:
            args.append(f"--dtype={_check_flag_value(self.dtype, 'dtype')}")
        if tensor_parallel_size != 1:
            args.append(
                f"--tensor-parallel-size={_check_int(tensor_parallel_size, 'tensor_parallel_size', 1, 8)}"
            )
        return args + extra_args


# ---------------------------------------------------------------- Cloud Run


def get_vllm_deployment_config(
    model: str | None = None,
    *,
    service: str | None = None,
    region: str | None = None,
    project: str | None = None,
    bucket: str | None = None,
    weights_path: str | None = None,
    mount_path: str = DEFAULT_MOUNT_PATH,
    image: str = DEFAULT_VLLM_IMAGE,
    gpu_type: str = "nvidia-l4",
    zonal_redundancy: bool = False,
    cpu: int = 8,
    memory_gib: int = 32,
    min_instances: int = 0,
    max_instances: int = 1,
    concurrency: int = 16,
    request_timeout_s: int = 600,
    serving: VllmServing = VllmServing(),
    hf_token_secret: str | None = "hf-token",
    service_account: str | None = None,
    model_load_time_s: int = 300,
    allow_unauthenticated: bool = False,
) -> CloudRunDeployCommand:
    """The ``gcloud run deploy`` command for vLLM on a Cloud Run GPU, as text (not executed).

    Weights come from ``gs://bucket/weights_path`` mounted read-only at ``mount_path`` when
    ``bucket`` is given (``weights_path`` defaults to the model's name), else from the Hugging Face
    hub with the token from Secret Manager (``hf_token_secret``; ``None`` leaves it out).
    """
    settings = get_settings()
    model_id = _resolve_model(model)
    service_name = validate_service_name(service or settings.service or "vllm")
    region_name = resolve_region(region, settings)
    project_value = project or settings.project
    project_id = validate_project(project_value) if project_value else None
    image = _check_image(image)
    if gpu_type not in GPU_MINIMUMS:
        raise UserError(
            f"gpu_type {describe(gpu_type)} is not a Cloud Run GPU; use one of {sorted(GPU_MINIMUMS)}"
        )
    _check_int(cpu, "cpu", 1, 192)
    _check_int(memory_gib, "memory_gib", 1, 1024)
    _check_int(min_instances, "min_instances", 0, MAX_INSTANCES)
    _check_int(max_instances, "max_instances", 1, MAX_INSTANCES)
    _check_int(concurrency, "concurrency", 1, MAX_CONCURRENCY)
    bad = violations(
        Shape(
            cpu=cpu,
            memory=f"{memory_gib}Gi",
            gpu_type=gpu_type,
            gpu_count=1,
            min_instances=min_instances,
            max_instances=max_instances,
            concurrency=concurrency,
        )
    )
    if bad:
        raise UserError("; ".join(bad))
    _check_int(request_timeout_s, "request_timeout_s", 1, 3600)
    probe = size_startup_probe(model_load_time_s, port=DEFAULT_PORT)
    notes: list[str] = []

    env: list[str] = []
    volume_flags: list[str] = []
    if bucket is not None:
        bucket_name = validate_bucket(bucket)
        mount = _check_mount(mount_path)
        sub = validate_object_prefix(weights_path if weights_path is not None else model_id.split("/")[1])
        sub = sub.strip("/")
        model_path = f"{mount}/{sub}" if sub else mount
        # Served under the model's id unless told otherwise (vLLM would name it by the mount path).
        serving = replace(serving, served_model_name=serving.served_model_name or model_id)
        env.append("HF_HUB_OFFLINE=1")
        volume_flags = [
            f"--add-volume=name=model-weights,type=cloud-storage,bucket={bucket_name},readonly=true",
            f"--add-volume-mount=volume=model-weights,mount-path={mount}",
        ]
        notes.append(
            f"The service account needs roles/storage.objectViewer on gs://{bucket_name}; "
            "weights stream through Cloud Storage FUSE, so size the startup probe to the load time."
        )
    else:
        model_path = model_id
        notes.append(
            "Weights download from the Hugging Face hub at every cold start; a bucket mount is faster."
        )
    vllm_args = serving.args(model_path, port=DEFAULT_PORT)

    argv = ["gcloud", "run", "deploy", service_name, f"--image={image}", f"--region={region_name}"]
    if project_id:
        argv.append(f"--project={project_id}")
    argv += [
        "--gpu=1",
        f"--gpu-type={gpu_type}",
        "--gpu-zonal-redundancy" if zonal_redundancy else "--no-gpu-zonal-redundancy",
        f"--cpu={cpu}",
        f"--memory={memory_gib}Gi",
        "--no-cpu-throttling",
        f"--min-instances={min_instances}",
        f"--max-instances={max_instances}",
        f"--concurrency={concurrency}",
        f"--timeout={request_timeout_s}",
        f"--port={DEFAULT_PORT}",
        "--command=vllm",
        f"--args={_gcloud_list(['serve', *vllm_args])}",
    ]
    if env:
        argv.append(f"--set-env-vars={_gcloud_list(env)}")
    if hf_token_secret is not None:
        argv.append(f"--set-secrets=HF_TOKEN={validate_secret_id(hf_token_secret)}:latest")
        notes.append(
            f"Store the token first with save_hf_token (secret '{hf_token_secret}'); the service account "
            "needs roles/secretmanager.secretAccessor on it."
        )
    argv += volume_flags
    argv.append(
        "--startup-probe="
        f"httpGet.path={probe.path},httpGet.port={probe.port},initialDelaySeconds={probe.initial_delay_s},"
        f"periodSeconds={probe.period_s},timeoutSeconds={probe.timeout_s},"
        f"failureThreshold={probe.failure_threshold}"
    )
    if service_account is not None:
        if not isinstance(service_account, str) or not _SA_RE.match(service_account):
            raise UserError(f"service_account {describe(service_account)} is not a service account email")
        argv.append(f"--service-account={service_account}")
    argv.append("--allow-unauthenticated" if allow_unauthenticated else "--no-allow-unauthenticated")

    fit = check_fit(model_id, vllm_args, gpu=gpu_type)
    if fit.fits is False:
        notes.insert(0, f"WARNING: {fit.verdict}")
    if not zonal_redundancy:
        notes.append(
            "--no-gpu-zonal-redundancy uses the 'without zonal redundancy' GPU quota "
            "(check_gpu_quotas shows both)."
        )
    if concurrency > (serving.max_num_seqs or 256):
        notes.append("concurrency is above --max-num-seqs: extra requests queue inside vLLM.")
    if probe.budget_s < model_load_time_s:
        notes.append(
            "The model load time exceeds what a Cloud Run startup probe allows; use a smaller model."
        )

    return CloudRunDeployCommand(
        command=_format_command(argv, 4),
        argv=argv,
        service=service_name,
        region=region_name,
        project=project_id,
        image=image,
        model=model_id,
        model_path=model_path,
        vllm_args=vllm_args,
        gpu_type=gpu_type,
        zonal_redundancy=zonal_redundancy,
        startup_probe=probe,
        fit=fit,
        notes=notes,
    )


# ---------------------------------------------------------------- GKE


def get_vllm_gpu_deployment_config(
    model: str | None = None,
    *,
    cluster: str = "vllm-cluster",
    location: str | None = None,
    project: str | None = None,
    node_pool: str = "vllm-gpu-pool",
    accelerator: str = "nvidia-l4",
    gpu_count: int = 1,
    machine_type: str | None = None,
    max_nodes: int = 1,
    spot: bool = False,
    name: str = "vllm",
    namespace: str = "default",
    image: str = DEFAULT_VLLM_IMAGE,
    replicas: int = 1,
    serving: VllmServing = VllmServing(),
    hf_secret_name: str | None = "hf-secret",
    hf_secret_key: str = "hf_api_token",
    shm_size_gib: int = 2,
    model_load_time_s: int = 300,
) -> GkeDeploymentConfig:
    """A GKE GPU node pool command and the vLLM Deployment + Service manifests (as YAML text)."""
    settings = get_settings()
    model_id = _resolve_model(model)
    cluster = validate_rfc1035(cluster, "cluster", 40)
    loc_value = location or settings.location
    if not loc_value:
        raise UserError(
            "no location: pass location (the cluster's region or zone) or set GOOGLE_CLOUD_LOCATION"
        )
    loc = validate_location(loc_value)
    project_value = project or settings.project
    project_id = validate_project(project_value) if project_value else None
    node_pool = validate_rfc1035(node_pool, "node_pool", 40)
    if accelerator not in GKE_ACCELERATORS:
        raise UserError(f"accelerator {describe(accelerator)} is not one of {sorted(GKE_ACCELERATORS)}")
    defaults = GKE_ACCELERATORS[accelerator]
    _check_int(gpu_count, "gpu_count", 1, 8)
    if machine_type is None:
        if gpu_count != 1:
            raise UserError(f"gpu_count={gpu_count}: pass machine_type for a machine with {gpu_count} GPUs")
        machine_type = str(defaults["machine_type"])
    elif not _MACHINE_RE.match(machine_type):
        raise UserError(f"machine_type {describe(machine_type)} is not a machine type name")
    _check_int(max_nodes, "max_nodes", 1, 1000)
    name = validate_rfc1035(name, "name", 63)
    namespace = validate_rfc1035(namespace, "namespace", 63)
    image = _check_image(image)
    _check_int(replicas, "replicas", 0, 1000)
    _check_int(shm_size_gib, "shm_size_gib", 1, 256)
    probe = size_startup_probe(model_load_time_s, port=DEFAULT_PORT)

    argv = [
        "gcloud",
        "container",
        "node-pools",
        "create",
        node_pool,
        f"--cluster={cluster}",
        f"--location={loc}",
    ]
    if project_id:
        argv.append(f"--project={project_id}")
    argv += [
        f"--machine-type={machine_type}",
        f"--accelerator=type={accelerator},count={gpu_count},gpu-driver-version=latest",
        "--num-nodes=1",
        "--enable-autoscaling",
        "--min-nodes=0",
        f"--max-nodes={max_nodes}",
    ]
    if spot:
        argv.append("--spot")

    vllm_args = serving.args(model_id, port=DEFAULT_PORT, tensor_parallel_size=gpu_count)
    labels = {"app": name}
    cpu = str(defaults["cpu"])
    memory = f"{defaults['memory_gib']}Gi"
    gpus = str(gpu_count)
    env: list[dict[str, Any]] = []
    if hf_secret_name is not None:
        validate_rfc1035(hf_secret_name, "hf_secret_name", 253)
        if not re.match(r"^[-._a-zA-Z0-9]{1,253}$", hf_secret_key):
            raise UserError(f"hf_secret_key {describe(hf_secret_key)} is not a valid Secret key")
        env.append(
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": hf_secret_name, "key": hf_secret_key}},
            }
        )
    http_get = {"path": "/health", "port": DEFAULT_PORT}
    container: dict[str, Any] = {
        "name": "vllm",
        "image": image,
        "command": ["vllm", "serve"],
        "args": vllm_args,
        "ports": [{"containerPort": DEFAULT_PORT, "name": "http"}],
        "env": env,
        "resources": {
            "requests": {"cpu": cpu, "memory": memory, "nvidia.com/gpu": gpus},
            "limits": {"memory": memory, "nvidia.com/gpu": gpus},
        },
        "startupProbe": {
            "httpGet": http_get,
            "initialDelaySeconds": probe.initial_delay_s,
            "periodSeconds": probe.period_s,
            "timeoutSeconds": probe.timeout_s,
            "failureThreshold": probe.failure_threshold,
        },
        "readinessProbe": {
            "httpGet": http_get,
            "periodSeconds": 5,
            "timeoutSeconds": 3,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": http_get,
            "periodSeconds": 15,
            "timeoutSeconds": 5,
            "failureThreshold": 4,
        },
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"cloud.google.com/gke-accelerator": accelerator},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [container],
                    "volumes": [
                        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm_size_gib}Gi"}}
                    ],
                },
            },
        },
    }
    service: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "type": "ClusterIP",
            "selector": labels,
            "ports": [{"name": "http", "port": DEFAULT_PORT, "targetPort": DEFAULT_PORT, "protocol": "TCP"}],
        },
    }
    deployment_yaml = _dump(deployment)
    service_yaml = _dump(service)
    notes = [
        "Create the node pool, then `kubectl apply -f` the manifests.",
        f"Pods are scheduled on nodes labelled cloud.google.com/gke-accelerator={accelerator}.",
    ]
    fit = check_fit(model_id, vllm_args, gpu=accelerator, gpu_count=gpu_count)
    if fit.fits is False:
        notes.insert(0, f"WARNING: {fit.verdict}")
    if hf_secret_name is not None:
        notes.append(
            f"Create the token secret first: kubectl create secret generic {shlex.quote(hf_secret_name)} "
            f"-n {namespace} --from-file={shlex.quote(hf_secret_key)}=PATH_TO_TOKEN_FILE"
        )
    return GkeDeploymentConfig(
        node_pool_command=_format_command(argv, 5),
        node_pool_argv=argv,
        deployment_yaml=deployment_yaml,
        service_yaml=service_yaml,
        manifests_yaml=deployment_yaml + "---\n" + service_yaml,
        deployment=deployment,
        service=service,
        fit=fit,
        notes=notes,
    )


# ---------------------------------------------------------------- the MCP resource

TEMPLATE_URI = "config://vllm-deployment-template"

TEMPLATE_PARAMETERS: list[TemplateParameter] = [
    TemplateParameter(name="SERVICE", description="Cloud Run service name (lower-case, <= 49 chars)"),
    TemplateParameter(name="REGION", description="Cloud Run region with GPUs"),
    TemplateParameter(
        name="IMAGE", description="vLLM OpenAI-compatible server image", default=DEFAULT_VLLM_IMAGE
    ),
    TemplateParameter(name="BUCKET", description="Cloud Storage bucket holding the weights"),
    TemplateParameter(name="WEIGHTS_PATH", description="folder of the weights inside the bucket"),
    TemplateParameter(name="SERVED_MODEL_NAME", description="the model name clients send (e.g. org/name)"),
    TemplateParameter(
        name="MAX_MODEL_LEN", description="vLLM --max-model-len (context length)", default="8192"
    ),
    TemplateParameter(
        name="GPU_MEMORY_UTILIZATION", description="vLLM --gpu-memory-utilization (0-1)", default="0.9"
    ),
    TemplateParameter(name="MAX_INSTANCES", description="autoscaling ceiling", default="1"),
    TemplateParameter(name="CONCURRENCY", description="requests per instance", default="16"),
    TemplateParameter(
        name="HF_TOKEN_SECRET", description="Secret Manager secret with the HF token", default="hf-token"
    ),
]


def vllm_deployment_template() -> DeploymentTemplate:
    """The ``config://vllm-deployment-template`` resource: a Cloud Run service YAML for vLLM on an L4
    (``gcloud run services replace``), with ``${PARAMETER}`` placeholders documented in its header."""
    probe = size_startup_probe(300)
    container = {
        "image": "${IMAGE}",
        "command": ["vllm"],
        "args": [
            "serve",
            f"{DEFAULT_MOUNT_PATH}/${{WEIGHTS_PATH}}",
            f"--port={DEFAULT_PORT}",
            "--served-model-name=${SERVED_MODEL_NAME}",
            "--max-model-len=${MAX_MODEL_LEN}",
            "--gpu-memory-utilization=${GPU_MEMORY_UTILIZATION}",
        ],
        "ports": [{"name": "http1", "containerPort": DEFAULT_PORT}],
        "env": [
            {"name": "HF_HUB_OFFLINE", "value": "1"},
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": "${HF_TOKEN_SECRET}", "key": "latest"}},
            },
        ],
        "resources": {"limits": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}},
        "startupProbe": {
            "httpGet": {"path": "/health", "port": DEFAULT_PORT},
            "initialDelaySeconds": probe.initial_delay_s,
            "periodSeconds": probe.period_s,
            "timeoutSeconds": probe.timeout_s,
            "failureThreshold": probe.failure_threshold,
        },
        "volumeMounts": [{"name": "model-weights", "mountPath": DEFAULT_MOUNT_PATH}],
    }
    doc = {
        "apiVersion": "serving.knative.dev/v1",
        "kind": "Service",
        "metadata": {"name": "${SERVICE}", "labels": {"cloud.googleapis.com/location": "${REGION}"}},
        "spec": {
            "template": {
                "metadata": {
                    "annotations": {
                        "autoscaling.knative.dev/maxScale": "${MAX_INSTANCES}",
                        "run.googleapis.com/cpu-throttling": "false",
                        "run.googleapis.com/gpu-zonal-redundancy-disabled": "true",
                        "run.googleapis.com/startup-cpu-boost": "true",
                    }
                },
                "spec": {
                    "containerConcurrency": "${CONCURRENCY}",
                    "timeoutSeconds": 600,
                    "nodeSelector": {"run.googleapis.com/accelerator": "nvidia-l4"},
                    "containers": [container],
                    "volumes": [
                        {
                            "name": "model-weights",
                            "csi": {
                                "driver": "gcsfuse.run.googleapis.com",
                                "readOnly": True,
                                "volumeAttributes": {"bucketName": "${BUCKET}"},
                            },
                        }
                    ],
                },
            }
        },
    }
    header = [
        "# vLLM on a Cloud Run NVIDIA L4 GPU. Fill in the parameters listed below, then:",
        "#   gcloud run services replace service.yaml --region=${REGION}",
        "# Parameters:",
    ]
    for p in TEMPLATE_PARAMETERS:
        default = f" (default: {p.default})" if p.default is not None else ""
        header.append(f"#   {p.name}: {p.description}{default}")
    # Annotation values must stay strings once filled in (containerConcurrency must become a number).
    body = _dump(doc).replace("maxScale: ${MAX_INSTANCES}", "maxScale: '${MAX_INSTANCES}'")
    text = "\n".join(header) + "\n" + body
    return DeploymentTemplate(uri=TEMPLATE_URI, text=text, parameters=list(TEMPLATE_PARAMETERS))
