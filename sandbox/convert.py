"""``ServiceSpec`` (the neutral description incidents and plans use) -> Cloud Run v2 Service JSON."""

from __future__ import annotations

from typing import Any

from mcp_tools.incident import ServiceSpec


def service_from_spec(spec: ServiceSpec, *, port: int = 8080) -> dict[str, Any]:
    limits: dict[str, str] = {}
    if spec.cpu is not None:
        limits["cpu"] = str(spec.cpu)
    if spec.memory is not None:
        limits["memory"] = str(spec.memory)
    if spec.gpu_type:
        limits["nvidia.com/gpu"] = str(spec.gpu_count or 1)
    container: dict[str, Any] = {
        "name": "vllm",
        "image": spec.image or "vllm/vllm-openai:latest",
        "args": list(spec.args),
        "ports": [{"name": "http1", "containerPort": port}],
        "resources": {"limits": limits, "cpuIdle": False, "startupCpuBoost": True},
    }
    if spec.env:
        container["env"] = [{"name": k, "value": v} for k, v in spec.env.items()]
    if spec.startup_probe is not None:
        p = spec.startup_probe
        probe: dict[str, Any] = {
            "initialDelaySeconds": p.initial_delay_seconds,
            "timeoutSeconds": p.timeout_seconds,
            "periodSeconds": p.period_seconds,
            "failureThreshold": p.failure_threshold,
        }
        probe["httpGet" if p.http_path else "tcpSocket"] = (
            {"path": p.http_path, "port": port} if p.http_path else {"port": port}
        )
        container["startupProbe"] = probe
    template: dict[str, Any] = {
        "containers": [container],
        "scaling": {
            "minInstanceCount": spec.min_instances,
            **({"maxInstanceCount": spec.max_instances} if spec.max_instances is not None else {}),
        },
    }
    if spec.concurrency is not None:
        template["maxInstanceRequestConcurrency"] = spec.concurrency
    if spec.gpu_type:
        template["nodeSelector"] = {"accelerator": spec.gpu_type}
        template["gpuZonalRedundancyDisabled"] = not bool(spec.gpu_zonal_redundancy)
    return {"template": template}
