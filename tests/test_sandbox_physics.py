"""Scenarios, physics and serving: each failure shows vLLM's / Cloud Run's own wording, each fix comes up
Ready, and a ready revision serves a vLLM-compatible endpoint whose figures come from the planner."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from google.cloud import run_v2
from prometheus_client.parser import text_string_to_metric_families

from mcp_tools import capacity
from mcp_tools.endpoint import tls_context
from sandbox.testing import logging_client, run_clients, sandbox_factory  # noqa: F401  (fixtures)
from tests.loop_support import metrics_when

ALL_TIME = 'timestamp>="2000-01-01T00:00:00Z"'


def _texts(sb, service: str) -> list[str]:
    client = logging_client(sb)
    f = f'resource.labels.service_name="{service}" {ALL_TIME}'
    return [e.payload for e in client.list_entries(filter_=f, page_size=1000) if isinstance(e.payload, str)]


def _fix(sb, service: str, args: list[str] | None = None, **probe: int) -> run_v2.Service:
    services, _ = run_clients(sb)
    svc = services.get_service(name=sb.service_name(service))
    if args is not None:
        svc.template.containers[0].args = args
    for k, v in probe.items():
        setattr(svc.template.containers[0].startup_probe, k, v)
    return services.update_service(service=svc).result(timeout=30)


@pytest.mark.parametrize(
    ("scenario", "service", "category", "evidence"),
    [
        ("reference-weights-oom", "gemma-4-12b", "weights_oom", "torch.OutOfMemoryError: CUDA out of memory"),
        (
            "kv-starvation",
            "llama-3-8b",
            "kv_cache_oom",
            "ValueError: To serve at least one request with the models's max seq len (131072)",
        ),
        (
            "startup-timeout",
            "gemma-4-12b-fp8",
            "startup_timeout",
            'STARTUP TCP probe failed 12 times consecutively for container "vllm" on port 8080',
        ),
        (
            "fp8-on-t4",
            "gemma-4-e4b",
            "unsupported_config",
            "The quantization method fp8 is not supported for the current GPU. Minimum capability: 80. "
            "Current capability: 75.",
        ),
    ],
)
def test_failure_scenarios(sandbox_factory, scenario, service, category, evidence):  # noqa: F811
    sb = sandbox_factory(scenario=scenario)
    services, revisions = run_clients(sb)
    svc = services.get_service(name=sb.service_name(service))
    assert not svc.latest_ready_revision
    assert svc.terminal_condition.state == run_v2.Condition.State.CONDITION_FAILED
    rev = revisions.get_revision(name=svc.latest_created_revision)
    ready = next(c for c in rev.conditions if c.type_ == "Ready")
    assert ready.state == run_v2.Condition.State.CONDITION_FAILED and "Logs URL:" in ready.message
    state = sb.state()["services"]
    assert next(iter(state.values()))["revisions"][rev.name.rsplit("/", 1)[1]]["category"] == category
    texts = _texts(sb, service)
    assert any(evidence in t for t in texts), texts[-12:]
    assert httpx.get(f"{svc.uri}/health", timeout=5, verify=tls_context()).status_code == 503


def test_reference_fix_comes_up_ready_with_vllm_startup_lines(sandbox_factory):  # noqa: F811
    sb = sandbox_factory(scenario="reference-weights-oom")
    new = _fix(
        sb,
        "gemma-4-12b",
        ["--model=/mnt/models/gemma-4-12B-it-FP8-Dynamic", "--max-model-len=16384", "--port=8080"],
    )
    assert new.latest_ready_revision == new.latest_created_revision
    client = logging_client(sb)
    rev = new.latest_ready_revision.rsplit("/", 1)[1]
    lines = [
        e.payload for e in client.list_entries(filter_=f'resource.labels.revision_name="{rev}" {ALL_TIME}')
    ]
    figures = capacity.parse_vllm_startup(lines)
    plan = capacity.plan_capacity(
        "RedHatAI/gemma-4-12B-it-FP8-Dynamic",
        gpu="nvidia-l4",
        flags=capacity.parse_vllm_args(["--max-model-len=16384"]),
    )
    assert figures.kv_cache_tokens == plan.kv_cache_tokens
    assert figures.model_loading_gib == pytest.approx(plan.weights_gib, abs=0.01)
    assert figures.max_concurrency == pytest.approx(plan.max_concurrency, abs=0.01)
    assert any("Application startup complete." in str(t) for t in lines)
    # the endpoint behind the service URL is sized by the planner
    models = httpx.get(f"{new.uri}/v1/models", timeout=5, verify=tls_context()).json()["data"][0]
    assert models["max_model_len"] == 16384 and models["revision"] == rev
    r = httpx.post(
        f"{new.uri}/v1/chat/completions",
        timeout=10,
        json={"model": models["id"], "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5},
        verify=tls_context(),
    )
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 5
    metrics = httpx.get(f"{new.uri}/metrics", timeout=5, verify=tls_context()).text
    fams = {f.name: f for f in text_string_to_metric_families(metrics)}
    assert "vllm:kv_cache_usage_perc" in fams and "vllm:num_requests_waiting" in fams
    assert fams["vllm:time_to_first_token_seconds"].type == "histogram"
    # a request log entry was written for each served request
    reqs = list(client.list_entries(filter_=f'log_id("run.googleapis.com/requests") {ALL_TIME}'))
    assert any(e.http_request and e.http_request.get("status") == 200 for e in reqs)


@pytest.mark.parametrize(
    ("scenario", "service", "args", "probe"),
    [
        ("startup-timeout", "gemma-4-12b-fp8", None, {"failure_threshold": 24}),  # a longer probe
        (  # a shorter context
            "kv-starvation",
            "llama-3-8b",
            ["--model=/mnt/models/Llama-3.1-8B-Instruct", "--max-model-len=16384", "--port=8080"],
            {},
        ),
    ],
)
def test_the_fix_comes_up_ready(sandbox_factory, scenario, service, args, probe):  # noqa: F811
    sb = sandbox_factory(scenario=scenario)
    new = _fix(sb, service, args, **probe)
    assert new.latest_ready_revision and new.latest_ready_revision == new.latest_created_revision


def test_other_physics(sandbox_factory):  # noqa: F811
    sb = sandbox_factory(scenario="healthy")
    # a Hugging Face id is downloaded into Cloud Run's in-memory file system: 22 GiB do not fit in 16 GiB
    services, _ = run_clients(sb)
    svc = services.get_service(name=sb.service_name("gemma-4-12b"))
    svc.template.containers[0].args = ["--model=google/gemma-4-12B-it", "--port=8080"]
    svc.template.containers[0].resources.limits["memory"] = "16Gi"  # the least an L4 instance takes
    with pytest.raises(Exception, match="not ready"):
        services.update_service(service=svc).result(timeout=30)
    texts = _texts(sb, "gemma-4-12b")
    assert any(t.startswith("Memory limit of 16384 MiB exceeded with") for t in texts)
    # an unknown checkpoint: vLLM's own model-not-found error
    svc = services.get_service(name=sb.service_name("gemma-4-12b"))
    svc.template.containers[0].args = ["--model=/mnt/models/no-such-model", "--port=8080"]
    with pytest.raises(Exception, match="not ready"):
        services.update_service(service=svc).result(timeout=30)
    assert any(
        "Invalid repository ID or local directory specified: '/mnt/models/no-such-model'" in t
        for t in _texts(sb, "gemma-4-12b")
    )
    # through all of it the first revision kept serving
    assert httpx.get(f"{svc.uri}/health", timeout=5, verify=tls_context()).status_code == 200


def test_incident_file_becomes_the_service_and_its_logs(sandbox_factory, tmp_path: Path):  # noqa: F811
    inc = tmp_path / "inc.yaml"
    inc.write_text(
        "id: t1\ntitle: test\nservice:\n  name: gemma-12b\n  region: us-east4\n  gpu_type: nvidia-l4\n"
        "  gpu_count: 1\n  cpu: 8\n  memory: 32Gi\n  image: vllm/vllm-openai:v0.11.0\n"
        '  args: ["--model=/mnt/models/gemma-4-12B-it", "--max-model-len=16384"]\n'
        "logs:\n"
        '  - {timestamp: "2026-05-29T19:07:48Z", severity: INFO, text: "first line"}\n'
        '  - {timestamp: "2026-05-29T19:07:50Z", severity: ERROR,'
        ' text: "torch.OutOfMemoryError: CUDA out of memory."}\n'
        '  - {severity: ERROR, json: {message: "structured"}}\n'
    )
    sb = sandbox_factory(incident=str(inc))
    assert sb.location == "us-east4"
    client = logging_client(sb)
    got = list(
        client.list_entries(filter_='resource.labels.service_name="gemma-12b" textPayload:"first line"')
    )
    assert len(got) == 1  # inside the client's default 24-hour window
    both = list(
        client.list_entries(filter_='textPayload:"first line" OR textPayload:"torch.OutOfMemoryError"')
    )
    assert (both[1].timestamp - both[0].timestamp).total_seconds() == pytest.approx(2.0, abs=0.01)
    assert list(client.list_entries(filter_="jsonPayload.message=structured"))
    services, _ = run_clients(sb)
    assert services.get_service(name=sb.service_name("gemma-12b")).latest_created_revision


def test_overload_shows_queueing_and_preemption(sandbox_factory):  # noqa: F811
    sb = sandbox_factory(scenario="overload", zero_latency=False)

    def overloaded(m: dict[str, float]) -> bool:
        assert m.get("vllm:num_requests_running", 0) <= 16, m  # never more than --max-num-seqs=16
        return (
            m.get("vllm:num_requests_running", 0) >= 12  # (a preempted one waits)
            and m.get("vllm:num_requests_waiting", 0) >= 16
            and m.get("vllm:kv_cache_usage_perc", 0) > 0.9
            and m.get("vllm:num_preemptions", 0) > 0
        )

    metrics_when(sb, overloaded, "queueing with preemption", service="gemma-4-12b")


def test_incident_fate_follows_the_incident(sandbox_factory, tmp_path: Path):  # noqa: F811
    inc = tmp_path / "up.yaml"
    inc.write_text(
        "id: up\ntitle: healthy but the planner does not know the model\nservice:\n  name: odd\n"
        "  gpu_type: nvidia-l4\n  cpu: 8\n  memory: 32Gi\n"
        '  args: ["--model=/mnt/models/some-private-finetune", "--max-model-len=4096"]\n'
        "logs:\n"
        '  - {severity: INFO, text: "INFO 05-29 19:07:48 [kv_cache_utils.py:1087] '
        'GPU KV cache size: 52,000 tokens"}\n'
        '  - {severity: INFO, text: "INFO:     Application startup complete."}\n'
        "expected: {category: healthy}\n"
    )
    sb = sandbox_factory(incident=str(inc))
    services, _ = run_clients(sb)
    svc = services.get_service(name=sb.service_name("odd"))
    assert svc.latest_ready_revision  # up, as the incident says, though the planner cannot resolve the model
    card = httpx.get(f"{svc.uri}/v1/models", timeout=5, verify=tls_context()).json()["data"][0]
    assert card["id"] == "/mnt/models/some-private-finetune" and card["max_model_len"] == 4096
    assert sb.service == "odd"


def test_endpoint_faults_and_container_concurrency(sandbox_factory):  # noqa: F811
    import asyncio

    sb = sandbox_factory(scenario="healthy", zero_latency=False)
    services, _ = run_clients(sb)
    uri = services.get_service(name=sb.service_name("gemma-4-12b")).uri
    sb.faults.inject("endpoint", "status", 503, count=1)
    assert httpx.get(f"{uri}/v1/models", timeout=5, verify=tls_context()).status_code == 503
    assert httpx.get(f"{uri}/v1/models", timeout=5, verify=tls_context()).status_code == 200
    sb.faults.inject("gemma-4-12b", "drop", count=1)
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{uri}/health", timeout=5, verify=tls_context())
    sb.faults.inject("endpoint", "hang", count=1, seconds=5)
    with pytest.raises(httpx.TimeoutException):
        httpx.get(f"{uri}/health", timeout=0.3, verify=tls_context())
    model = httpx.get(f"{uri}/v1/models", timeout=5, verify=tls_context()).json()["data"][0]["id"]

    async def burst() -> list[int]:
        async with httpx.AsyncClient(timeout=30, verify=tls_context()) as c:
            body = {"model": model, "prompt": "hello there", "max_tokens": 30}
            rs = await asyncio.gather(*(c.post(f"{uri}/v1/completions", json=body) for _ in range(7)))
            return [r.status_code for r in rs]

    codes = asyncio.run(burst())
    assert codes.count(200) == 4 and codes.count(429) == 3  # maxInstanceRequestConcurrency=4, one instance
