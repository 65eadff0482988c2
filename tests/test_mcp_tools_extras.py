"""The MCP extras against the emulated GCP surfaces, through the official clients over REST."""

from __future__ import annotations

import base64
import json
import logging
import shlex
import string
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from mcp_tools.errors import ExternalError, NotFoundError, UserError
from mcp_tools.extras import VllmServing
from mcp_tools.settings import get_settings
from sandbox.extras import (
    ExtrasState,
    create_extras_app,
    gpu_quota_info,
    seed_model_folder,
    seed_run_gpu_quotas,
    vertex_model,
)
from sandbox.serve import start_in_thread

PROJECT = "sandbox-project"
REGION = "us-central1"
# Shaped like a Hugging Face token; made up for the test.
FAKE_TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


@dataclass
class Extras:
    url: str
    state: ExtrasState


@pytest.fixture(scope="module")
def _server() -> Iterator[Extras]:
    state = ExtrasState()
    url, stop = start_in_thread(create_extras_app(state))
    try:
        yield Extras(url, state)
    finally:
        stop()


@pytest.fixture
def extras(_server: Extras, monkeypatch: pytest.MonkeyPatch) -> Iterator[Extras]:
    """A fresh emulated state per test, and settings pointing every client at it."""
    state = _server.state
    state.reset()
    for name in ("STORAGE", "SECRETMANAGER", "QUOTAS", "AIPLATFORM"):
        monkeypatch.setenv(f"GEMMA_SRE_{name}_API_ENDPOINT", _server.url)
    monkeypatch.setenv("GEMMA_SRE_ANONYMOUS_CREDENTIALS", "true")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", PROJECT)
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", REGION)
    get_settings.cache_clear()
    yield _server
    get_settings.cache_clear()


def _unwrap(command: str) -> list[str]:
    """What a POSIX shell would pass to gcloud for the multi-line command text."""
    return shlex.split(command.replace("\\\n", ""))


# ---------------------------------------------------------------- Cloud Run deploy command


def test_cloud_run_command_has_the_gpu_flags_and_parses_back(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_tools.extras import get_vllm_deployment_config

    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", PROJECT)
    get_settings.cache_clear()
    cfg = get_vllm_deployment_config(
        "google/gemma-4-12B-it",
        service="gemma-12b",
        region="europe-west1",
        bucket="my-weights",
        weights_path="models/gemma-4-12B-it",
        serving=VllmServing(max_model_len=16384),
        model_load_time_s=600,
    )
    argv = _unwrap(cfg.command)
    assert argv == cfg.argv
    assert argv[:4] == ["gcloud", "run", "deploy", "gemma-12b"]
    for flag in (
        "--gpu=1",
        "--gpu-type=nvidia-l4",
        "--no-gpu-zonal-redundancy",
        "--cpu=8",
        "--memory=32Gi",
        "--no-cpu-throttling",
        "--max-instances=1",
        "--concurrency=16",
        "--region=europe-west1",
        f"--project={PROJECT}",
        "--set-secrets=HF_TOKEN=hf-token:latest",
        "--add-volume=name=model-weights,type=cloud-storage,bucket=my-weights,readonly=true",
        "--add-volume-mount=volume=model-weights,mount-path=/mnt/models",
        "--set-env-vars=HF_HUB_OFFLINE=1",
        "--no-allow-unauthenticated",
    ):
        assert flag in argv, flag
    args = next(a for a in argv if a.startswith("--args=")).removeprefix("--args=").split(",")
    assert args[:2] == ["serve", "/mnt/models/models/gemma-4-12B-it"]
    assert "--max-model-len=16384" in args and "--gpu-memory-utilization=0.9" in args
    assert "--served-model-name=google/gemma-4-12B-it" in args
    probe = next(a for a in argv if a.startswith("--startup-probe="))
    assert "httpGet.path=/health" in probe
    # The probe gives vLLM more than the estimated load time, within Cloud Run's limits.
    p = cfg.startup_probe
    assert p.budget_s >= 600 and p.initial_delay_s <= 240 and p.failure_threshold * p.period_s <= 1800
    assert f"failureThreshold={p.failure_threshold}" in probe


def test_configs_carry_the_planner_fit_check() -> None:
    from mcp_tools.extras import get_vllm_deployment_config, get_vllm_gpu_deployment_config

    # The reference failure: Gemma 4 12B in bf16 does not fit one L4; the config says so up front.
    bf16 = get_vllm_deployment_config("google/gemma-4-12B-it", region=REGION)
    assert bf16.fit.fits is False and bf16.notes[0].startswith("WARNING: does not fit")
    assert any("qat-w4a16" in s for s in bf16.fit.suggestions)
    qat = get_vllm_deployment_config(
        "google/gemma-4-12B-it-qat-w4a16-ct", region=REGION, serving=VllmServing(max_model_len=8192)
    )
    assert qat.fit.fits is True and (qat.fit.kv_cache_tokens or 0) > 8192
    assert not any(n.startswith("WARNING") for n in qat.notes)
    unknown = get_vllm_gpu_deployment_config("acme/custom-model", location=REGION)
    assert unknown.fit.fits is None and unknown.fit.verdict.startswith("fit not checked")


def test_cloud_run_command_quotes_hostile_values() -> None:
    from mcp_tools.extras import get_vllm_deployment_config

    hostile = [
        "--chat-template=$(touch /tmp/pwned); `id` 'x' \"y\"",
        '--override-generation-config={"a": 1, "b": 2}',
    ]
    cfg = get_vllm_deployment_config(
        "google/gemma-4-12B-it",
        region=REGION,
        serving=VllmServing(extra_args=hostile),
        zonal_redundancy=True,
        hf_token_secret=None,
    )
    argv = _unwrap(cfg.command)
    assert argv == cfg.argv
    assert "--gpu-zonal-redundancy" in argv and not any(a.startswith("--set-secrets") for a in argv)
    args_flag = next(a for a in argv if a.startswith("--args="))
    # An item holds a comma, so the gcloud list switches delimiter; each item survives intact.
    value = args_flag.removeprefix("--args=")
    assert value.startswith("^")
    delim = value[1]
    assert value[3:].split(delim)[-2:] == hostile
    # No project configured and none passed: gcloud's own default project is used.
    assert not any(a.startswith("--project") for a in argv)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"model": "not-a-model-id"}, "org/name"),
        ({"model": "google/gemma;rm -rf"}, "org/name"),
        ({"cpu": 2}, "at least 4 vCPU"),  # the wording of mcp_tools.cloudrun_limits
        ({"memory_gib": 8}, "16 GiB"),
        ({"gpu_type": "nvidia-h100"}, "not a Cloud Run GPU"),
        ({"service": "Bad_Name"}, "service name"),
        ({"bucket": "gs://Bad Bucket"}, "bucket"),
        ({"region": "us central1"}, "region"),
        ({"min_instances": 3, "max_instances": 2}, "min_instances"),
        ({"serving": VllmServing(gpu_memory_utilization=1.5)}, "gpu_memory_utilization"),
        ({"serving": VllmServing(extra_args=["--x=\nnewline"])}, "control characters"),
        ({"serving": VllmServing(served_model_name="-bad name")}, "served_model_name"),
        ({"hf_token_secret": "bad secret"}, "secret id"),
    ],
)
def test_cloud_run_command_rejects_bad_input(kwargs: dict[str, object], needle: str) -> None:
    from mcp_tools.extras import get_vllm_deployment_config

    kwargs = {"model": "google/gemma-4-12B-it", "region": REGION, **kwargs}
    with pytest.raises(UserError, match=needle):
        get_vllm_deployment_config(**kwargs)  # type: ignore[arg-type]


def test_cloud_run_command_needs_a_region_and_model() -> None:
    from mcp_tools.extras import get_vllm_deployment_config

    with pytest.raises(UserError, match="GOOGLE_CLOUD_LOCATION"):
        get_vllm_deployment_config("google/gemma-4-12B-it")
    with pytest.raises(UserError, match="MODEL_NAME"):
        get_vllm_deployment_config(region=REGION)


# ---------------------------------------------------------------- GKE


def test_gke_config_manifests_reparse_with_the_essentials() -> None:
    from mcp_tools.extras import get_vllm_gpu_deployment_config

    hostile = "--chat-template=$(reboot) 'q' \"d\""
    cfg = get_vllm_gpu_deployment_config(
        "google/gemma-4-12B-it",
        cluster="gpu-cluster",
        location="us-central1-a",
        project=PROJECT,
        serving=VllmServing(extra_args=[hostile], max_num_seqs=32),
    )
    argv = _unwrap(cfg.node_pool_command)
    assert argv == cfg.node_pool_argv
    assert argv[:5] == ["gcloud", "container", "node-pools", "create", "vllm-gpu-pool"]
    assert "--accelerator=type=nvidia-l4,count=1,gpu-driver-version=latest" in argv
    assert "--machine-type=g2-standard-8" in argv and "--cluster=gpu-cluster" in argv

    assert "&id" not in cfg.manifests_yaml and "*id" not in cfg.manifests_yaml  # no YAML aliases
    docs = list(yaml.safe_load_all(cfg.manifests_yaml))
    assert [d["kind"] for d in docs] == ["Deployment", "Service"]
    dep = yaml.safe_load(cfg.deployment_yaml)
    assert dep == docs[0] == cfg.deployment
    pod = dep["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    (c,) = pod["containers"]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert (
        c["args"][0] == "google/gemma-4-12B-it" and hostile in c["args"] and "--max-num-seqs=32" in c["args"]
    )
    assert c["env"] == [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-secret", "key": "hf_api_token"}}}
    ]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": "/health", "port": 8000}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}} in pod["volumes"]
    svc = yaml.safe_load(cfg.service_yaml)
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    assert svc["spec"]["ports"][0]["targetPort"] == 8000


def test_gke_config_rejects_bad_input() -> None:
    from mcp_tools.extras import get_vllm_gpu_deployment_config

    with pytest.raises(UserError, match="accelerator"):
        get_vllm_gpu_deployment_config("google/gemma-4-12B-it", location=REGION, accelerator="nvidia-tpu")
    with pytest.raises(UserError, match="machine_type"):
        get_vllm_gpu_deployment_config("google/gemma-4-12B-it", location=REGION, gpu_count=2)
    with pytest.raises(UserError, match="cluster"):
        get_vllm_gpu_deployment_config("google/gemma-4-12B-it", location=REGION, cluster="x; rm -rf /")


def test_deployment_template_documents_every_placeholder() -> None:
    import re

    from mcp_tools.extras import TEMPLATE_URI, vllm_deployment_template

    tpl = vllm_deployment_template()
    assert tpl.uri == TEMPLATE_URI == "config://vllm-deployment-template"
    doc = yaml.safe_load(tpl.text)
    assert doc["kind"] == "Service" and doc["apiVersion"] == "serving.knative.dev/v1"
    spec = doc["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"run.googleapis.com/accelerator": "nvidia-l4"}
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    body = tpl.text.split("\napiVersion:", 1)[1]
    used = set(re.findall(r"\$\{([A-Z_]+)\}", body))
    documented = {p.name for p in tpl.parameters}
    assert used == documented
    for name in documented:
        assert f"#   {name}:" in tpl.text
    # Filled in, the YAML has the types Cloud Run expects: annotations as strings, numbers as numbers.
    values = {p.name: p.default or f"x-{p.name.lower().replace('_', '-')}" for p in tpl.parameters}
    values["MAX_INSTANCES"] = "3"
    filled = yaml.safe_load(string.Template(tpl.text).substitute(values))
    tmpl = filled["spec"]["template"]
    assert tmpl["metadata"]["annotations"]["autoscaling.knative.dev/maxScale"] == "3"
    assert tmpl["spec"]["containerConcurrency"] == 16
    assert "--max-model-len=8192" in tmpl["spec"]["containers"][0]["args"]


# ---------------------------------------------------------------- quotas


def test_check_gpu_quotas_reports_cloud_run_quota_per_region(extras: Extras) -> None:
    from mcp_tools.extras import check_gpu_quotas

    seed_run_gpu_quotas(extras.state, PROJECT)
    report = check_gpu_quotas()
    assert report.project == PROJECT and report.service == "run.googleapis.com"
    rows = {(q.region, q.gpu_type, q.zonal_redundancy): q.limit for q in report.quotas}
    assert rows[("us-central1", "nvidia-l4", False)] == 3
    assert rows[("us-central1", "nvidia-l4", True)] == 1
    assert rows[("europe-west1", "nvidia-l4", False)] == 1
    assert rows[("europe-west1", "nvidia-l4", True)] == 0  # from the region-less default entry
    assert rows[("us-central1", "nvidia-rtx-pro-6000", False)] == 0
    assert {q.quota_id for q in report.quotas} >= {
        "NvidiaL4GpuAllocNoZonalRedundancyPerProjectRegion",
        "NvidiaL4GpuAllocPerProjectRegion",
    }
    assert not any("Cpu" in q.quota_id or "Mem" in q.quota_id for q in report.quotas)
    assert "us-central1 nvidia-l4: with zonal redundancy 1, without zonal redundancy 3" in report.summary
    # The official client called the Cloud Quotas REST path for Cloud Run's service.
    assert any(
        p == f"/v1/projects/{PROJECT}/locations/global/services/run.googleapis.com/quotaInfos"
        for _, p in extras.state.requests
    )


def test_check_gpu_quotas_one_region_and_errors(extras: Extras) -> None:
    from mcp_tools.extras import check_gpu_quotas

    seed_run_gpu_quotas(extras.state, PROJECT)
    report = check_gpu_quotas(region="europe-west1")
    assert {q.region for q in report.quotas} == {"europe-west1"}
    empty = check_gpu_quotas(region="asia-south1")
    assert empty.quotas == [] and "g.co/cloudrun/gpu-quota" in empty.notes[0]
    # A region-less default with no listed locations applies to any region asked about.
    extras.state.set_quota_infos(
        "other-project",
        "run.googleapis.com",
        [gpu_quota_info("other-project", "NvidiaL4GpuAllocPerProjectRegion", regions={}, default=2)],
    )
    (only,) = check_gpu_quotas(region="asia-south1", project="other-project").quotas
    assert (only.region, only.zonal_redundancy, only.limit) == ("asia-south1", True, 2)
    with pytest.raises(NotFoundError, match="not found"):
        check_gpu_quotas(project="missing-project")
    with pytest.raises(UserError, match="region"):
        check_gpu_quotas(region="Europe West")


def test_check_gpu_quotas_retries_a_transient_failure(extras: Extras) -> None:
    from mcp_tools.extras import check_gpu_quotas

    seed_run_gpu_quotas(extras.state, PROJECT)
    extras.state.inject_fault("/quotaInfos", 503, "UNAVAILABLE", count=1)
    report = check_gpu_quotas()
    assert report.quotas
    calls = [p for _, p in extras.state.requests if p.endswith("/quotaInfos")]
    assert len(calls) == 2


def test_check_gpu_quotas_permission_denied_is_an_external_error(extras: Extras) -> None:
    from mcp_tools.extras import check_gpu_quotas

    seed_run_gpu_quotas(extras.state, PROJECT)
    extras.state.inject_fault("/quotaInfos", 403, "PERMISSION_DENIED", count=5)
    with pytest.raises(ExternalError, match="permission denied"):
        check_gpu_quotas()


# ---------------------------------------------------------------- buckets


def test_list_bucket_models_finds_model_folders(extras: Extras) -> None:
    from mcp_tools.extras import list_bucket_models

    st = extras.state
    st.add_bucket("weights")
    seed_model_folder(
        st,
        "weights",
        "models/gemma-4-12B-it",
        config={
            "architectures": ["Gemma3ForConditionalGeneration"],
            "model_type": "gemma3",
            "text_config": {"torch_dtype": "bfloat16"},
        },
        shards=5,
        shard_size=5 * 2**30,
    )
    seed_model_folder(
        st,
        "weights",
        "models/gemma-4-12B-it-qat-w4a16",
        config={
            "architectures": ["Gemma3ForCausalLM"],
            "torch_dtype": "bfloat16",
            "quantization_config": {"quant_method": "compressed-tensors"},
        },
        shards=2,
        shard_size=4 * 2**30,
    )
    seed_model_folder(st, "weights", "models/broken", config="{not json", shards=1, shard_size=100)
    seed_model_folder(st, "weights", "models/no-config", config=None, shards=1)
    st.put_object("weights", "models/readme.txt", b"hello")

    result = list_bucket_models("gs://weights", prefix="models/")
    by_path = {m.path: m for m in result.models}
    assert set(by_path) == {"models/gemma-4-12B-it", "models/gemma-4-12B-it-qat-w4a16", "models/broken"}
    full = by_path["models/gemma-4-12B-it"]
    assert full.shard_count == 5 and full.uri == "gs://weights/models/gemma-4-12B-it"
    assert full.size_gib == pytest.approx(25.0, abs=0.01)
    assert full.architecture == "Gemma3ForConditionalGeneration" and full.torch_dtype == "bfloat16"
    assert full.quantization is None
    assert by_path["models/gemma-4-12B-it-qat-w4a16"].quantization == "compressed-tensors"
    assert by_path["models/broken"].config_error and by_path["models/broken"].architecture is None
    # 8 + 5 + 3 + 2 objects in the four folders, plus the readme: every one under the prefix was seen.
    assert not result.truncated and result.objects_scanned == 19 == len(st.buckets["weights"])


def test_list_bucket_models_is_bounded(extras: Extras) -> None:
    from mcp_tools.extras import list_bucket_models

    for i in range(30):
        extras.state.put_object("big", f"junk/{i:03d}.txt", b"x")
    result = list_bucket_models("big", max_objects=10)
    assert result.truncated and result.objects_scanned == 10 and "narrower prefix" in (result.note or "")


def test_list_bucket_models_errors(extras: Extras) -> None:
    from mcp_tools.extras import list_bucket_models

    with pytest.raises(NotFoundError, match="not found"):
        list_bucket_models("no-such-bucket")
    with pytest.raises(UserError, match="bucket"):
        list_bucket_models("Not A Bucket")
    with pytest.raises(UserError, match="'..'"):
        list_bucket_models("weights", prefix="models/../secrets")


# ---------------------------------------------------------------- Vertex


def test_list_vertex_models(extras: Extras) -> None:
    from mcp_tools.extras import list_vertex_models

    for i in range(3):
        extras.state.add_vertex_model(
            PROJECT,
            REGION,
            vertex_model(
                PROJECT,
                REGION,
                f"10{i}",
                f"gemma-{i}",
                artifact_uri=f"gs://mg/gemma-{i}",
                image="vllm/vllm-openai",
            ),
        )
    result = list_vertex_models()
    assert [m.display_name for m in result.models] == ["gemma-0", "gemma-1", "gemma-2"]
    first = result.models[0]
    assert first.model_id == "100" and first.artifact_uri == "gs://mg/gemma-0"
    assert first.container_image == "vllm/vllm-openai" and first.labels == {"source": "sandbox"}
    assert first.create_time and first.create_time.startswith("2026-05-01")
    limited = list_vertex_models(REGION, limit=2)
    assert len(limited.models) == 2 and limited.truncated
    assert list_vertex_models("europe-west4").models == []


# ---------------------------------------------------------------- HF token


def _access_latest(url: str, name: str) -> bytes:
    """Read back through the official client, as the service would."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import secretmanager

    client = secretmanager.SecretManagerServiceClient(
        transport="rest", credentials=AnonymousCredentials(), client_options={"api_endpoint": url}
    )
    return bytes(client.access_secret_version(name=f"{name}/versions/latest").payload.data)


def test_save_hf_token_from_env_creates_the_secret_and_never_shows_the_token(
    extras: Extras,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from mcp_tools.extras import save_hf_token

    monkeypatch.setenv("HF_TOKEN", FAKE_TOKEN)
    caplog.set_level(logging.DEBUG)
    saved = save_hf_token()
    assert saved.secret == f"projects/{PROJECT}/secrets/hf-token"
    assert saved.version == f"projects/{PROJECT}/secrets/hf-token/versions/1" and saved.version_id == "1"
    assert saved.created_secret and saved.source == "environment variable HF_TOKEN"
    assert _access_latest(extras.url, saved.secret) == FAKE_TOKEN.encode()
    # A second save adds a version to the existing secret.
    again = save_hf_token()
    assert again.version_id == "2" and not again.created_secret
    out = capsys.readouterr()
    for text in (saved.model_dump_json(), again.model_dump_json(), caplog.text, out.out, out.err):
        assert FAKE_TOKEN not in text and FAKE_TOKEN[3:] not in text
    # Not in any record's attributes either (the Google libraries attach request bodies as extras).
    b64 = base64.b64encode(FAKE_TOKEN.encode()).decode()
    for record in caplog.records:
        blob = repr(record.__dict__)
        assert FAKE_TOKEN not in blob and b64[:40] not in blob, record.getMessage()


@pytest.fixture
def google_sdk_debug_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Turn on the Google SDK's own structured DEBUG logging (GOOGLE_SDK_PYTHON_LOGGING_SCOPE), which
    writes every request body to stderr; restore the logger afterwards."""
    from google.api_core import client_logging

    google = logging.getLogger("google")
    saved = (google.level, google.propagate, list(google.handlers))
    monkeypatch.setenv("GOOGLE_SDK_PYTHON_LOGGING_SCOPE", "google")
    monkeypatch.setattr(client_logging, "_LOGGING_INITIALIZED", False)
    google.setLevel(logging.NOTSET)  # unconfigured, as in a fresh process
    google.propagate = True
    google.handlers[:] = []
    yield
    google.setLevel(saved[0])
    google.propagate = saved[1]
    google.handlers[:] = saved[2]


def test_save_hf_token_survives_google_sdk_debug_logging(
    extras: Extras,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    google_sdk_debug_logging: None,
) -> None:
    from mcp_tools.extras import save_hf_token

    monkeypatch.setenv("HF_TOKEN", FAKE_TOKEN)
    saved = save_hf_token()
    err = capsys.readouterr().err
    # The SDK did log (the secret lookup and creation), but never the version payload.
    assert "GetSecret" in err or "CreateSecret" in err
    b64 = base64.b64encode(FAKE_TOKEN.encode()).decode()
    assert FAKE_TOKEN not in err and b64[:40] not in err
    assert saved.version_id == "1"
    assert logging.getLogger("google").level == logging.DEBUG  # our guard restored the SDK's level


def test_save_hf_token_from_file(extras: Extras, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from mcp_tools.extras import save_hf_token

    token_file = tmp_path / "token"
    token_file.write_text(FAKE_TOKEN + "\n")
    caplog.set_level(logging.DEBUG)
    saved = save_hf_token("my-hf", from_file=str(token_file), project=PROJECT)
    assert saved.secret.endswith("/secrets/my-hf") and saved.source == f"file {token_file}"
    assert _access_latest(extras.url, saved.secret) == FAKE_TOKEN.encode()
    assert FAKE_TOKEN not in caplog.text and FAKE_TOKEN not in saved.model_dump_json()


def test_save_hf_token_bad_sources(extras: Extras, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_tools.extras import save_hf_token

    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(UserError, match="HF_TOKEN is not set"):
        save_hf_token()
    with pytest.raises(UserError, match="does not exist"):
        save_hf_token(from_file=str(tmp_path / "missing"))
    with pytest.raises(UserError, match="not a regular file"):
        save_hf_token(from_file=str(tmp_path))
    with pytest.raises(UserError, match="no token source"):
        save_hf_token(from_env=None)
    wrong = "sk-" + "x" * 40
    monkeypatch.setenv("OTHER_TOKEN", wrong)
    with pytest.raises(UserError, match="does not look like a Hugging Face") as info:
        save_hf_token(from_env="OTHER_TOKEN")
    assert wrong not in str(info.value)
    with pytest.raises(UserError, match="secret id"):
        save_hf_token("bad/secret")
    # Nothing reached Secret Manager.
    assert extras.state.secrets == {}


def test_save_hf_token_api_failure_is_external_and_silent(
    extras: Extras, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from mcp_tools.extras import save_hf_token

    monkeypatch.setenv("HF_TOKEN", FAKE_TOKEN)
    extras.state.inject_fault(":addVersion", 403, "PERMISSION_DENIED")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ExternalError, match="permission denied") as info:
        save_hf_token()
    assert FAKE_TOKEN not in str(info.value) and FAKE_TOKEN not in caplog.text


# ---------------------------------------------------------------- copy instructions and hub paths


def test_hf_copy_instructions() -> None:
    from mcp_tools.extras import get_huggingface_model_copy_instructions

    ins = get_huggingface_model_copy_instructions("google/gemma-4-12B-it", "gs://weights", project=PROJECT)
    assert ins.destination == "gs://weights/models/gemma-4-12B-it"
    download = next(s for s in ins.steps if s.startswith("hf download"))
    assert shlex.split(download)[:3] == ["hf", "download", "google/gemma-4-12B-it"]
    copy = next(s for s in ins.steps if s.startswith("gcloud storage cp"))
    assert shlex.split(copy)[-2:] == ["gs://weights/models/gemma-4-12B-it/", f"--project={PROJECT}"]
    assert "--secret=hf-token" in ins.text and FAKE_TOKEN not in ins.text
    for bad in ("gemma", "google/gemma/extra", "goo gle/gemma", "google/..", "../etc", "google/$(id)"):
        with pytest.raises(UserError, match="org/name"):
            get_huggingface_model_copy_instructions(bad, "weights")


def test_vertex_copy_instructions() -> None:
    from mcp_tools.extras import get_vertex_ai_model_copy_instructions

    ins = get_vertex_ai_model_copy_instructions(
        "publishers/google/models/gemma4",
        "weights",
        source_uri="gs://mg-public/gemma4/12b it",
        destination_prefix="",
    )
    copy = next(s for s in ins.steps if s.startswith("gcloud storage cp"))
    assert shlex.split(copy) == [
        "gcloud",
        "storage",
        "cp",
        "--recursive",
        "gs://mg-public/gemma4/12b it/*",
        "gs://weights/gemma4/",
    ]
    reg = get_vertex_ai_model_copy_instructions(
        f"projects/{PROJECT}/locations/{REGION}/models/123", "weights"
    )
    assert "gcloud ai models describe" in reg.steps[0] and f"--region={REGION}" in reg.steps[0]
    with pytest.raises(UserError, match="gs://"):
        get_vertex_ai_model_copy_instructions("gemma4", "weights", source_uri="https://example.com/x")
    with pytest.raises(UserError, match="Vertex AI model"):
        get_vertex_ai_model_copy_instructions("gemma4; rm -rf /", "weights")


def test_hub_download_path() -> None:
    from mcp_tools.extras import get_huggingfacehub_download_path

    p = get_huggingfacehub_download_path("google/gemma-4-12B-it", filename="config.json")
    assert p.repo_url == "https://huggingface.co/google/gemma-4-12B-it"
    assert p.file_url == "https://huggingface.co/google/gemma-4-12B-it/resolve/main/config.json"
    assert p.cache_dir == "$HF_HOME/hub/models--google--gemma-4-12B-it"
    assert p.file_url_pattern.endswith("/resolve/main/{filename}")
    with pytest.raises(UserError, match="org/name"):
        get_huggingfacehub_download_path("https://huggingface.co/google/gemma")
    with pytest.raises(UserError, match="revision"):
        get_huggingfacehub_download_path("google/gemma-4-12B-it", revision="../../x")


# ---------------------------------------------------------------- help


def test_get_help_lists_every_tool_once() -> None:
    from mcp_tools.extras import get_help

    # The tool names issue 4 lists, then the new ones.
    issue_tools = [
        *("get_help", "save_hf_token", "get_vllm_endpoint", "get_endpoint", "get_system_status"),
        *("get_model_details", "verify_model_health", "status_vllm", "deploy_vllm", "destroy_vllm"),
        *("update_vllm_scaling", "get_vllm_deployment_config", "get_vllm_gpu_deployment_config"),
        *("check_gpu_quotas", "list_vertex_models", "list_bucket_models"),
        *("get_vertex_ai_model_copy_instructions", "get_huggingface_model_copy_instructions"),
        *("get_huggingfacehub_download_path", "query_vllm", "query_gemma4", "query_gemma4_with_stats"),
        *("analyze_cloud_logging", "analyze_gpu_logs", "suggest_sre_remediation", "run_benchmark"),
    ]
    new_tools = [
        "get_vllm_metrics",
        "plan_capacity",
        "list_revisions",
        "rollback_service",
        "get_service_logs",
    ]
    h = get_help()
    names = [t.name for t in h.tools]
    assert len(names) == len(set(names))
    assert set(names) == set(issue_tools) | set(new_tools)
    assert {t.name for t in h.tools if t.new} == set(new_tools)
    assert {t.name for t in h.tools if t.mutating} == {
        "deploy_vllm",
        "destroy_vllm",
        "update_vllm_scaling",
        "rollback_service",
    }
    assert all(t.summary and "\n" not in t.summary for t in h.tools)
    assert h.resources[0].uri == "config://vllm-deployment-template"
    assert "check_gpu_quotas: " in h.text
    json.loads(h.model_dump_json())


# ---------------------------------------------------------------- through the official MCP client


def _text(result: object) -> str:
    from mcp.types import TextContent

    first = result.content[0]  # type: ignore[attr-defined]
    assert isinstance(first, TextContent)
    return first.text


async def test_tools_through_the_mcp_client(extras: Extras, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp.shared.memory import create_connected_server_and_client_session

    from mcp_tools.server import build_server

    seed_run_gpu_quotas(extras.state, PROJECT)
    monkeypatch.setenv("HF_TOKEN", FAKE_TOKEN)
    server = build_server()  # the server users run, not a side registration
    async with create_connected_server_and_client_session(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"get_help", "check_gpu_quotas", "save_hf_token", "get_vllm_deployment_config"} <= set(tools)
        assert "token" not in tools["save_hf_token"].inputSchema["properties"]
        assert tools["check_gpu_quotas"].outputSchema is not None

        res = await client.call_tool("check_gpu_quotas", {"region": "us-central1"})
        assert not res.isError and res.structuredContent is not None
        assert "us-central1 nvidia-l4: with zonal redundancy 1, without zonal redundancy 3" in _text(res)
        assert res.structuredContent["project"] == PROJECT

        cfg = await client.call_tool(
            "get_vllm_deployment_config", {"model": "google/gemma-4-12B-it", "bucket": "weights"}
        )
        assert not cfg.isError and "--no-gpu-zonal-redundancy" in _text(cfg)
        # vLLM's options are flat arguments of the tool, gathered into the function's VllmServing.
        props = tools["get_vllm_gpu_deployment_config"].inputSchema["properties"]
        assert {"max_model_len", "quantization", "extra_args"} <= set(props) and "serving" not in props
        gke = await client.call_tool(
            "get_vllm_gpu_deployment_config",
            {"model": "google/gemma-4-12B-it", "max_model_len": 4096, "kv_cache_dtype": "fp8"},
        )
        assert not gke.isError and gke.structuredContent is not None
        (container,) = gke.structuredContent["deployment"]["spec"]["template"]["spec"]["containers"]
        assert {"--max-model-len=4096", "--kv-cache-dtype=fp8"} <= set(container["args"])

        bad = await client.call_tool("get_vllm_deployment_config", {"model": "nope", "cpu": 2})
        assert bad.isError and "org/name" in _text(bad) and "Traceback" not in _text(bad)

        saved = await client.call_tool("save_hf_token", {})
        assert not saved.isError and FAKE_TOKEN not in _text(saved)
        assert FAKE_TOKEN not in json.dumps(saved.structuredContent)

        template = await client.read_resource("config://vllm-deployment-template")  # type: ignore[arg-type]
        assert yaml.safe_load(template.contents[0].text)["kind"] == "Service"  # type: ignore[union-attr]


async def test_read_only_policy_leaves_out_save_hf_token(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp.shared.memory import create_connected_server_and_client_session

    from mcp_tools.server import build_server

    monkeypatch.setenv("GEMMA_SRE_POLICY", "read-only")
    get_settings.cache_clear()
    server = build_server()
    async with create_connected_server_and_client_session(server) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert "save_hf_token" not in names and "check_gpu_quotas" in names


def test_seed_demo_is_consistent_with_the_tools(extras: Extras) -> None:
    from mcp_tools.extras import check_gpu_quotas, list_bucket_models, list_vertex_models
    from sandbox.extras import seed_demo

    seed_demo(extras.state, PROJECT, REGION, bucket="demo-models")
    models = {m.path: m for m in list_bucket_models("demo-models", "models/").models}
    assert models["models/gemma-4-12B-it-qat-w4a16-ct"].quantization == "compressed-tensors"
    (registered,) = list_vertex_models().models
    assert registered.artifact_uri == models["models/gemma-4-12B-it-qat-w4a16-ct"].uri
    assert check_gpu_quotas(region=REGION).quotas
