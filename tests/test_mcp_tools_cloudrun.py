"""Cloud Run layer: ServiceSpec <-> run_v2.Service conversion, names, and error mapping."""

from __future__ import annotations

import pytest
from google.cloud import run_v2

from mcp_tools.cloudrun import (
    GPU_LIMIT,
    CloudRun,
    apply_spec,
    revision_to_spec,
    service_to_spec,
)
from mcp_tools.endpoint import tls_context
from mcp_tools.errors import ExternalError, UserError
from mcp_tools.google_api import READ
from mcp_tools.incident import StartupProbe
from mcp_tools.names import validate_revision_name, validate_service_name
from mcp_tools.settings import Settings
from sandbox.scenarios import l4_spec
from tests.scripted_openai import free_port

SPEC = l4_spec(
    "gemma-12b",
    ["--model=/mnt/models/gemma-4-12B-it", "--max-model-len=16384"],
    region="region-a",
    startup_probe=StartupProbe(period_seconds=240, timeout_seconds=240, failure_threshold=1),
    gpu_zonal_redundancy=False,
)


def _named(svc: run_v2.Service) -> run_v2.Service:
    svc.name = "projects/proj/locations/region-a/services/gemma-12b"
    return svc


def test_spec_round_trips_through_run_v2_service() -> None:
    svc = _named(apply_spec(None, SPEC))
    t = svc.template
    c = t.containers[0]
    assert t.node_selector.accelerator == "nvidia-l4"
    assert c.resources.limits[GPU_LIMIT] == "1"
    assert c.resources.limits["cpu"] == "8"
    assert c.resources.limits["memory"] == "32Gi"
    assert c.resources.cpu_idle is False  # GPU services need CPU always allocated
    assert t.gpu_zonal_redundancy_disabled is True
    assert t.max_instance_request_concurrency == 4
    assert t.scaling.max_instance_count == 1
    assert c.ports[0].container_port == 8080  # from --port
    assert c.startup_probe.tcp_socket.port == 8080
    assert c.startup_probe.period_seconds == 240
    assert service_to_spec(svc) == SPEC


def test_apply_onto_current_keeps_what_the_spec_does_not_describe() -> None:
    current = _named(apply_spec(None, SPEC))
    c = current.template.containers[0]
    c.command = ["vllm", "serve"]
    c.env.append(
        run_v2.EnvVar(
            name="HF_TOKEN",
            value_source=run_v2.EnvVarSource(
                secret_key_ref=run_v2.SecretKeySelector(secret="hf-token", version="latest")
            ),
        )
    )
    current.template.volumes.append(run_v2.Volume(name="models"))
    current.template.service_account = "sa@example.iam.gserviceaccount.com"
    current.template.revision = "gemma-12b-pinned"
    current.etag = "etag-1"

    new_spec = SPEC.model_copy(deep=True)
    new_spec.args = [*SPEC.args, "--gpu-memory-utilization=0.95"]
    new_spec.max_instances = 3
    new_spec.env = {"HF_HUB_OFFLINE": "0"}
    out = apply_spec(current, new_spec)

    oc = out.template.containers[0]
    assert list(oc.command) == ["vllm", "serve"]
    assert out.template.volumes[0].name == "models"
    assert out.template.service_account == "sa@example.iam.gserviceaccount.com"
    assert out.template.revision == ""  # Cloud Run names the new revision
    assert out.etag == "etag-1"  # optimistic concurrency is kept
    names = {e.name: e for e in oc.env}
    assert names["HF_TOKEN"].value_source.secret_key_ref.secret == "hf-token"
    assert names["HF_HUB_OFFLINE"].value == "0"
    assert out.template.scaling.max_instance_count == 3
    assert "--gpu-memory-utilization=0.95" in list(oc.args)
    # the input is not modified
    assert current.template.revision == "gemma-12b-pinned"
    assert service_to_spec(out) == new_spec


def test_removing_the_gpu_clears_accelerator_and_limit() -> None:
    current = _named(apply_spec(None, SPEC))
    cpu_only = SPEC.model_copy(update={"gpu_type": None})
    out = apply_spec(current, cpu_only)
    assert GPU_LIMIT not in out.template.containers[0].resources.limits
    assert "node_selector" not in out.template


def test_http_probe_and_unset_scaling() -> None:
    spec = SPEC.model_copy(
        update={
            "startup_probe": StartupProbe(period_seconds=10, failure_threshold=30, http_path="/health"),
            "max_instances": None,
            "concurrency": None,
            "gpu_zonal_redundancy": None,
        }
    )
    svc = _named(apply_spec(None, spec))
    assert svc.template.containers[0].startup_probe.http_get.path == "/health"
    back = service_to_spec(svc)
    assert back.startup_probe is not None and back.startup_probe.http_path == "/health"
    assert back.startup_probe.budget_seconds == 300
    assert back.max_instances is None and back.concurrency is None
    assert back.gpu_zonal_redundancy is None


def test_revision_to_spec_reads_the_revision() -> None:
    svc = _named(apply_spec(None, SPEC))
    t = svc.template
    rev = run_v2.Revision(
        name="projects/proj/locations/region-a/services/gemma-12b/revisions/gemma-12b-00002-abc",
        service="projects/proj/locations/region-a/services/gemma-12b",
        containers=list(t.containers),
        scaling=t.scaling,
        max_instance_request_concurrency=4,
        node_selector=t.node_selector,
        gpu_zonal_redundancy_disabled=True,
    )
    assert revision_to_spec(rev) == SPEC


@pytest.mark.parametrize("bad", ["", "Gemma", "1abc", "abc-", "a_b", "a" * 50, "x/y", 'a" OR "b'])
def test_bad_service_names_are_refused(bad: str) -> None:
    with pytest.raises(UserError, match="invalid Cloud Run service name"):
        validate_service_name(bad)


def test_good_names_pass() -> None:
    assert validate_service_name("gemma-12b") == "gemma-12b"
    assert validate_service_name("a" * 49) == "a" * 49
    assert validate_revision_name("gemma-12b-00002-abc") == "gemma-12b-00002-abc"
    with pytest.raises(UserError):
        validate_revision_name("Gemma-12b")


def test_service_path_accepts_full_names_and_needs_project() -> None:
    cr = CloudRun(Settings(project="proj", location="region-a"))
    assert cr.service_path("gemma") == "projects/proj/locations/region-a/services/gemma"
    full = "projects/other/locations/region-b/services/gemma"
    assert cr.service_path(full) == full
    with pytest.raises(UserError, match="GOOGLE_CLOUD_PROJECT"):
        CloudRun(Settings(location="region-a")).service_path("gemma")


def test_unreachable_api_is_one_external_error_after_bounded_retries() -> None:
    settings = Settings(
        project="proj",
        location="region-a",
        run_api_endpoint=f"http://127.0.0.1:{free_port()}",
        anonymous_credentials=True,
        http_timeout_s=2,
    )
    cr = CloudRun(settings, policy=READ.with_(attempts=2, max_delay_s=0.1))
    with pytest.raises(ExternalError, match=r"unavailable after 2 attempts"):
        cr.get_service("gemma")


def test_mutations_need_an_approval_id() -> None:
    cr = CloudRun(Settings(project="proj", location="region-a"))
    with pytest.raises(UserError, match="approval id"):
        cr.update_service("gemma", SPEC, approval_id="")
    with pytest.raises(UserError, match="approval id"):
        cr.rollback("gemma", "gemma-00001-abc", approval_id="bad id\n")


# --- against the sandbox (the official client over REST) ----------------------------------------------

from collections.abc import Iterator  # noqa: E402

from sandbox.server import Sandbox, start_sandbox  # noqa: E402
from sandbox.testing import TEST_TIME_SCALE  # noqa: E402


def _settings(sb: Sandbox) -> Settings:
    return Settings(**sb.settings_fields())


@pytest.fixture
def two_revisions() -> Iterator[tuple[Sandbox, CloudRun]]:
    """gemma-4-12b: revision 1 (QAT, Ready, serving) and revision 2 (bf16, failed: weights OOM)."""
    sb = start_sandbox(
        scenario="weights-oom-with-good-revision", time_scale=TEST_TIME_SCALE, zero_latency=True
    )
    try:
        yield sb, CloudRun(_settings(sb), policy=READ.with_(attempts=2, max_delay_s=0.1))
    finally:
        sb.stop()


def test_get_service_reads_spec_traffic_and_conditions(two_revisions: tuple[Sandbox, CloudRun]) -> None:
    sb, cr = two_revisions
    info = cr.get_service("gemma-4-12b")
    assert info.full_name == sb.service_name("gemma-4-12b")
    assert info.spec.gpu_type == "nvidia-l4" and info.spec.concurrency == 4
    assert "--model=/mnt/models/gemma-4-12B-it" in info.spec.args  # the failed template
    assert info.latest_created_revision != info.latest_ready_revision
    assert not info.ready and info.terminal_condition is not None
    assert "failed to start" in info.terminal_condition.message
    assert info.uri and info.serving_revision == info.latest_ready_revision
    assert info.etag
    revs = {r.name: r for r in info.revisions}
    assert revs[info.latest_ready_revision].ready and revs[info.latest_ready_revision].traffic_percent == 100
    failed = revs[info.latest_created_revision]
    assert not failed.ready and any(c.state == "CONDITION_FAILED" for c in failed.conditions)
    assert revs[info.latest_ready_revision].spec.args[0].endswith("qat-w4a16-ct")
    assert sb.journal.entries() == []  # reads are not journalled mutations


def test_unknown_service_is_a_user_error(two_revisions: tuple[Sandbox, CloudRun]) -> None:
    _, cr = two_revisions
    with pytest.raises(UserError, match="not found"):
        cr.get_service("no-such-service")


def test_update_sends_approval_and_waits_for_ready(two_revisions: tuple[Sandbox, CloudRun]) -> None:
    sb, cr = two_revisions
    info = cr.get_service("gemma-4-12b")
    good = info.revisions[-1].spec  # the QAT revision's spec
    fixed = good.model_copy(update={"args": [*good.args, "--gpu-memory-utilization=0.92"]})
    res = cr.update_service("gemma-4-12b", fixed, approval_id="appr-123", deadline_s=60)
    assert res.ready and res.revision and res.approval_id == "appr-123"
    (entry,) = sb.journal.entries()
    assert entry.method == "PATCH" and entry.approval == "appr-123"
    after = cr.get_service("gemma-4-12b")
    assert after.latest_ready_revision == res.revision == after.serving_revision
    assert "--gpu-memory-utilization=0.92" in after.spec.args


def test_failed_rollout_reports_not_ready(two_revisions: tuple[Sandbox, CloudRun]) -> None:
    sb, cr = two_revisions
    info = cr.get_service("gemma-4-12b")  # its template is the bf16 one that does not fit
    res = cr.update_service("gemma-4-12b", info.spec, approval_id="appr-2", deadline_s=60)
    assert not res.ready and res.revision
    assert "not ready" in res.message or "failed" in res.message
    assert cr.get_service("gemma-4-12b").serving_revision == info.latest_ready_revision


def test_rollback_routes_traffic_and_refuses_bad_targets(two_revisions: tuple[Sandbox, CloudRun]) -> None:
    sb, cr = two_revisions
    info = cr.get_service("gemma-4-12b")
    with pytest.raises(UserError, match="not Ready"):
        cr.rollback("gemma-4-12b", info.latest_created_revision or "", approval_id="a1")
    with pytest.raises(UserError, match="not a revision of"):
        cr.rollback("gemma-4-12b", "gemma-4-12b-99999-zzz", approval_id="a1")
    assert sb.journal.entries() == []
    res = cr.rollback("gemma-4-12b", info.latest_ready_revision or "", approval_id="a2")
    assert res.ready
    (entry,) = sb.journal.entries()
    assert entry.approval == "a2"
    after = cr.get_service("gemma-4-12b")
    assert [(t.revision, t.percent, t.latest) for t in after.traffic] == [
        (info.latest_ready_revision, 100, False)
    ]


def test_a_tagged_revision_gets_no_traffic_until_told_and_its_tag_url_serves_it() -> None:
    import httpx

    from mcp_tools.spec_ops import canary_names, canary_split

    with start_sandbox(scenario="healthy", time_scale=TEST_TIME_SCALE, zero_latency=True) as sb:
        cr = CloudRun(_settings(sb), policy=READ.with_(attempts=2, max_delay_s=0.1))
        info = cr.get_service("gemma-4-12b")
        old = info.serving_revision or ""
        revision, tag = canary_names("gemma-4-12b", "thread-1:plan")
        new_spec = info.spec.model_copy(update={"env": {**info.spec.env, "X": "1"}})
        with pytest.raises(UserError, match="tag 'Canary_1'"):  # Cloud Run's tag rules, as a 400
            cr.deploy_tagged(
                "gemma-4-12b", new_spec, revision=revision, tag="Canary_1", serving=old, approval_id="c0"
            )
        res = cr.deploy_tagged(
            "gemma-4-12b", new_spec, revision=revision, tag=tag, serving=old, approval_id="c1"
        )
        assert res.ready and res.revision == revision
        after = cr.get_service("gemma-4-12b")
        assert after.latest_ready_revision == revision and after.percent_of(revision) == 0
        assert after.percent_of(old) == 100
        url = after.tag_uri(tag)
        assert url and url.endswith(f"/{tag}---gemma-4-12b")  # Cloud Run's TAG---SERVICE form

        def served_by(base: str, n: int) -> dict[str, int]:
            before = {r: sb.revision_sim("gemma-4-12b", r).metrics.success["length"] for r in (old, revision)}
            model = sb.revision_sim("gemma-4-12b", old).config.served_model_name
            body = {"model": model, "prompt": "hi", "max_tokens": 2}
            with httpx.Client(timeout=10, verify=tls_context()) as client:
                for _ in range(n):
                    assert client.post(f"{base}/v1/completions", json=body).status_code == 200
            now = {r: sb.revision_sim("gemma-4-12b", r).metrics.success["length"] for r in (old, revision)}
            return {r: now[r] - before[r] for r in now}

        assert served_by(url, 5) == {old: 0, revision: 5}
        assert served_by(after.uri or "", 20) == {old: 20, revision: 0}
        split = canary_split(old, revision, 30)
        res = cr.set_traffic("gemma-4-12b", split, tags={revision: tag}, approval_id="c2")
        assert res.ready and res.operation == "traffic"
        assert served_by(after.uri or "", 100) == {old: 70, revision: 30}  # the router honours percents
        with pytest.raises(UserError, match="sum to 100"):
            cr.set_traffic("gemma-4-12b", {old: 50, revision: 30}, approval_id="c3")
        assert [(e.approval, e.status) for e in sb.journal.entries()] == [
            ("c0", 400),
            ("c1", 200),
            ("c2", 200),
        ]
        res = cr.rollback("gemma-4-12b", old, approval_id="c4")  # back, and the tag is dropped
        assert res.ready and cr.get_service("gemma-4-12b").tag_uri(tag) is None
        assert httpx.get(f"{url}/health", timeout=10, verify=tls_context()).status_code == 404


def test_create_and_delete(two_revisions: tuple[Sandbox, CloudRun]) -> None:
    sb, cr = two_revisions
    good = cr.get_service("gemma-4-12b").revisions[-1].spec
    res = cr.create_service(
        good.model_copy(update={"name": "gemma-copy"}), approval_id="c1", gcs_bucket="models-b"
    )
    assert res.ready and res.revision
    raw = cr.get_raw("gemma-copy")
    assert raw.template.volumes[0].gcs.bucket == "models-b"
    assert raw.template.containers[0].volume_mounts[0].mount_path == "/mnt/models"
    gone = cr.delete_service("gemma-copy", approval_id="d1")
    assert gone.ready
    with pytest.raises(UserError, match="not found"):
        cr.get_service("gemma-copy")
    assert [(e.method, e.approval) for e in sb.journal.entries()] == [("POST", "c1"), ("DELETE", "d1")]
