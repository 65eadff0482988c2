"""The sandbox's Cloud Run Admin API v2, driven by the official google-cloud-run REST client, unmodified."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from google.api_core import exceptions as gexc
from google.cloud import run_v2
from google.protobuf import field_mask_pb2

from mcp_tools.endpoint import tls_context
from sandbox.testing import run_clients, sandbox, sandbox_factory  # noqa: F401  (fixtures)

QAT = "--model=/mnt/models/gemma-4-12B-it-qat-w4a16-ct"
BF16 = "--model=/mnt/models/gemma-4-12B-it"


def gpu_service(args: list[str], *, concurrency: int = 4) -> run_v2.Service:
    return run_v2.Service(
        template=run_v2.RevisionTemplate(
            containers=[
                run_v2.Container(
                    name="vllm",
                    image="vllm/vllm-openai:v0.11.0",
                    args=[*args, "--port=8080"],
                    resources=run_v2.ResourceRequirements(
                        limits={"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}
                    ),
                )
            ],
            node_selector=run_v2.NodeSelector(accelerator="nvidia-l4"),
            gpu_zonal_redundancy_disabled=True,
            max_instance_request_concurrency=concurrency,
            scaling=run_v2.RevisionScaling(max_instance_count=1),
        )
    )


@dataclass
class Healthy:
    """The "healthy" scenario's sandbox, its Cloud Run clients and its service's full name."""

    sb: Any
    services: run_v2.ServicesClient
    revisions: run_v2.RevisionsClient
    name: str


@pytest.fixture
def healthy(sandbox_factory: Any) -> Healthy:  # noqa: F811
    sb = sandbox_factory(scenario="healthy")
    services, revisions = run_clients(sb)
    return Healthy(sb, services, revisions, sb.service_name("gemma-4-12b"))


def _error_status(e: gexc.GoogleAPICallError) -> str:
    assert e.response is not None
    return str(e.response.json()["error"]["status"])


def test_create_get_list_update_delete(sandbox):  # noqa: F811
    services, revisions = run_clients(sandbox)
    parent = f"projects/{sandbox.project}/locations/{sandbox.location}"
    op = services.create_service(
        parent=parent, service=gpu_service([QAT, "--max-model-len=16384"]), service_id="g"
    )
    svc = op.result(timeout=30)
    assert svc.name == f"{parent}/services/g"
    assert svc.terminal_condition.type_ == "Ready"
    assert svc.terminal_condition.state == run_v2.Condition.State.CONDITION_SUCCEEDED
    assert {c.type_ for c in svc.conditions} == {"RoutesReady", "ConfigurationsReady"}
    assert svc.latest_ready_revision == svc.latest_created_revision
    assert svc.latest_ready_revision.startswith(f"{parent}/services/g/revisions/g-00001-")
    assert svc.uri.startswith(sandbox.url + "/_run/")
    assert svc.template.node_selector.accelerator == "nvidia-l4"
    assert svc.template.containers[0].resources.limits["nvidia.com/gpu"] == "1"
    assert svc.template.containers[0].startup_probe.tcp_socket.port == 8080  # Cloud Run's default probe
    assert (
        svc.traffic_statuses[0].type_
        == run_v2.TrafficTargetAllocationType.TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST
    )
    assert svc.traffic_statuses[0].percent == 100

    got = services.get_service(name=svc.name)
    assert got.etag and got.generation == 1
    assert [s.name for s in services.list_services(parent=parent)] == [svc.name]

    # update with an updateMask and an approval id sent as request metadata
    got.template.containers[0].args = [QAT, "--max-model-len=8192", "--port=8080"]
    got.description = "not in the mask: must not change"
    op = services.update_service(
        request=run_v2.UpdateServiceRequest(
            service=got, update_mask=field_mask_pb2.FieldMask(paths=["template"])
        ),
        metadata=[("x-gemma-sre-approval", "ap-42")],
    )
    new = op.result(timeout=30)
    assert new.generation == 2
    assert new.description == ""
    assert new.latest_ready_revision.rsplit("/", 1)[1].startswith("g-00002-")
    assert "--max-model-len=8192" in new.template.containers[0].args
    revs = list(revisions.list_revisions(parent=svc.name))
    assert len(revs) == 2

    entry = [e for e in sandbox.journal if e.method == "PATCH"][-1]
    assert entry.approval == "ap-42"
    assert entry.resource == f"{parent}/services/g"[0:] and entry.query["updateMask"] == "template"
    assert (
        entry.caller
        and entry.body
        and entry.body["template"]["containers"][0]["args"][1] == "--max-model-len=8192"
    )
    create = [e for e in sandbox.journal if e.method == "POST"][0]
    assert create.resource == f"{parent}/services/g" and create.approval is None

    deleted = services.delete_service(name=svc.name).result(timeout=10)
    assert deleted.name == svc.name
    with pytest.raises(gexc.NotFound):
        services.get_service(name=svc.name)
    assert [e.method for e in sandbox.journal] == ["POST", "PATCH", "DELETE"]


def test_bad_revision_fails_and_traffic_stays_on_the_good_one(healthy: Healthy):
    services, revisions, name = healthy.services, healthy.revisions, healthy.name
    before = services.get_service(name=name)
    good = before.latest_ready_revision
    before.template.containers[0].args = [BF16, "--max-model-len=16384", "--port=8080"]
    op = services.update_service(service=before)
    with pytest.raises(gexc.GoogleAPICallError) as ei:
        op.result(timeout=30)
    assert "is not ready and cannot serve traffic" in str(ei.value)
    after = services.get_service(name=name)
    assert after.latest_ready_revision == good
    assert after.latest_created_revision != good
    assert after.terminal_condition.state == run_v2.Condition.State.CONDITION_FAILED
    assert "failed to start and listen on the port" in after.terminal_condition.message
    bad = revisions.get_revision(name=after.latest_created_revision)
    ready = next(c for c in bad.conditions if c.type_ == "Ready")
    assert ready.state == run_v2.Condition.State.CONDITION_FAILED
    assert ready.revision_reason == run_v2.Condition.RevisionReason.HEALTH_CHECK_CONTAINER_ERROR
    # the service URL still reaches the good revision's vLLM endpoint
    card = httpx.get(f"{after.uri}/v1/models", timeout=5, verify=tls_context()).json()["data"][0]
    assert card["revision"] == good.rsplit("/", 1)[1]
    # rollback: pin traffic on the good revision (no new revision, the operation is done at once)
    after.traffic = [
        run_v2.TrafficTarget(
            type_=run_v2.TrafficTargetAllocationType.TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION,
            revision=good.rsplit("/", 1)[1],
            percent=100,
        )
    ]
    rolled = services.update_service(service=after).result(timeout=10)
    assert rolled.traffic_statuses[0].revision == good.rsplit("/", 1)[1]
    assert len(list(revisions.list_revisions(parent=name))) == 2
    # a failed revision cannot take traffic; a serving revision cannot be deleted
    rolled.traffic[0].revision = bad.name.rsplit("/", 1)[1]
    with pytest.raises(gexc.BadRequest) as ei2:
        services.update_service(service=rolled)
    assert _error_status(ei2.value) == "FAILED_PRECONDITION"
    with pytest.raises(gexc.BadRequest):
        revisions.delete_revision(name=good).result(timeout=5)
    gone = revisions.delete_revision(name=bad.name).result(timeout=5)
    assert gone.name == bad.name
    assert len(list(revisions.list_revisions(parent=name))) == 1


def test_list_revisions_pages(sandbox_factory):  # noqa: F811
    sb = sandbox_factory(scenario="weights-oom-with-good-revision")
    _, revisions = run_clients(sb)
    pager = revisions.list_revisions(
        request=run_v2.ListRevisionsRequest(parent=sb.service_name("gemma-4-12b"), page_size=1)
    )
    pages = list(pager.pages)
    assert len(pages) == 2
    names = [r.name.rsplit("/", 1)[1] for p in pages for r in p.revisions]
    assert names[0].startswith("gemma-4-12b-00002-") and names[1].startswith("gemma-4-12b-00001-")


def test_etags_and_conflicts(healthy: Healthy):
    services, name = healthy.services, healthy.name
    svc = services.get_service(name=name)
    stale = svc.etag
    svc.labels["team"] = "sre"
    services.update_service(service=svc).result(timeout=10)
    svc.etag = stale
    with pytest.raises(gexc.Conflict) as ei:
        services.update_service(service=svc)
    assert _error_status(ei.value) == "ABORTED"
    with pytest.raises(gexc.Conflict) as ei2:
        services.delete_service(request=run_v2.DeleteServiceRequest(name=name, etag=stale))
    assert _error_status(ei2.value) == "ABORTED"
    parent = name.rsplit("/services/", 1)[0]
    with pytest.raises(gexc.Conflict) as ei3:
        services.create_service(parent=parent, service=gpu_service([QAT]), service_id="gemma-4-12b")
    assert _error_status(ei3.value) == "ALREADY_EXISTS"


def test_validate_only_and_allow_missing(sandbox):  # noqa: F811
    services, _ = run_clients(sandbox)
    parent = f"projects/{sandbox.project}/locations/{sandbox.location}"
    req = run_v2.CreateServiceRequest(
        parent=parent, service=gpu_service([QAT]), service_id="v", validate_only=True
    )
    services.create_service(request=req)
    with pytest.raises(gexc.NotFound):
        services.get_service(name=f"{parent}/services/v")
    assert sandbox.journal[0].validate_only is True
    svc = gpu_service([QAT, "--max-model-len=4096"])
    svc.name = f"{parent}/services/am"
    made = services.update_service(request=run_v2.UpdateServiceRequest(service=svc, allow_missing=True))
    first = made.result(timeout=30).latest_ready_revision
    assert first
    # A delete that only validates answers with what would be deleted and deletes nothing.
    svc.template.containers[0].args.append("--max-num-seqs=8")
    ready = services.update_service(service=svc).result(timeout=30).latest_ready_revision
    assert ready != first
    checked = services.delete_service(request=run_v2.DeleteServiceRequest(name=svc.name, validate_only=True))
    assert checked.result(timeout=5).name == svc.name
    _, revisions = run_clients(sandbox)
    request = run_v2.DeleteRevisionRequest(name=first, validate_only=True)
    assert revisions.delete_revision(request=request).result(timeout=5).name == first
    assert services.get_service(name=svc.name).latest_ready_revision == ready
    assert [r.name for r in revisions.list_revisions(parent=svc.name)] == [ready, first]


def test_bad_requests_get_google_errors(sandbox_factory):  # noqa: F811
    sb = sandbox_factory(scenario="healthy")
    base = f"{sb.url}/v2/projects/{sb.project}/locations/{sb.location}/services"

    def err(r: httpx.Response) -> dict:
        body = r.json()
        assert set(body) == {"error"} and {"code", "message", "status"} <= set(body["error"])
        assert body["error"]["code"] == r.status_code
        return body["error"]

    r = httpx.post(f"{base}?serviceId=x", content=b"{not json", timeout=5, verify=tls_context())
    assert r.status_code == 400 and err(r)["status"] == "INVALID_ARGUMENT"
    r = httpx.post(
        f"{base}?serviceId=x", json={"template": {"bogusField": 1}}, timeout=5, verify=tls_context()
    )
    assert r.status_code == 400 and "bogusField" in err(r)["message"]
    r = httpx.post(
        f"{base}?serviceId=x",
        json={"ingress": "INGRESS_NOPE", "template": {}},
        timeout=5,
        verify=tls_context(),
    )
    assert r.status_code == 400 and err(r)["status"] == "INVALID_ARGUMENT"
    r = httpx.post(
        f"{base}?serviceId=x",
        json={"template": {"containers": [{"args": ["a"]}]}},
        timeout=5,
        verify=tls_context(),
    )
    assert r.status_code == 400 and "image" in err(r)["message"]
    r = httpx.post(
        f"{base}?serviceId=Bad_Name",
        json={"template": {"containers": [{"image": "i"}]}},
        timeout=5,
        verify=tls_context(),
    )
    assert r.status_code == 400
    r = httpx.post(base, json={"template": {"containers": [{"image": "i"}]}}, timeout=5, verify=tls_context())
    assert r.status_code == 400 and "serviceId" in err(r)["message"]
    r = httpx.get(f"{base}/nope", timeout=5, verify=tls_context())
    assert r.status_code == 404 and err(r)["status"] == "NOT_FOUND"
    r = httpx.get(f"{sb.url}/v2/projects/p/locations/l/unknownThings", timeout=5, verify=tls_context())
    assert r.status_code == 404 and err(r)["status"] == "NOT_FOUND"
    r = httpx.patch(
        f"{base}/gemma-4-12b?updateMask=template.noSuchField", json={}, timeout=5, verify=tls_context()
    )
    assert r.status_code == 400 and "updateMask" in err(r)["message"]
    r = httpx.post(
        f"{base}?serviceId=x&validateOnly=maybe", json={"template": {}}, timeout=5, verify=tls_context()
    )
    assert r.status_code == 400
    r = httpx.get(f"{base}?pageSize=abc", timeout=5, verify=tls_context())
    assert r.status_code == 400
    traffic = {"traffic": [{"type": 2, "revision": "gemma-4-12b-99999-zzz", "percent": 100}]}
    r = httpx.patch(f"{base}/gemma-4-12b?updateMask=traffic", json=traffic, timeout=5, verify=tls_context())
    assert r.status_code == 400 and "does not exist" in err(r)["message"]
    r = httpx.patch(
        f"{base}/gemma-4-12b?updateMask=traffic",
        json={"traffic": [{"type": 1, "percent": 50}]},
        timeout=5,
        verify=tls_context(),
    )
    assert r.status_code == 400 and "sum to 100" in err(r)["message"]
    # the sandbox is still up and the service untouched
    services, _ = run_clients(sb)
    assert services.get_service(name=sb.service_name("gemma-4-12b")).generation == 1
    assert all(e.status >= 400 for e in sb.journal)


def test_enum_ints_and_strings_are_both_accepted(sandbox):  # noqa: F811
    parent = f"{sandbox.url}/v2/projects/{sandbox.project}/locations/{sandbox.location}/services"
    body = json.loads(run_v2.Service.to_json(gpu_service([QAT]), use_integers_for_enums=True))
    body["ingress"] = 1
    r = httpx.post(f"{parent}?serviceId=ints", json=body, timeout=5, verify=tls_context())
    assert r.status_code == 200, r.text
    body["ingress"] = "INGRESS_TRAFFIC_INTERNAL_ONLY"
    r = httpx.post(f"{parent}?serviceId=strs", json=body, timeout=5, verify=tls_context())
    assert r.status_code == 200, r.text
    services, _ = run_clients(sandbox)
    assert services.get_service(name=f"{parent.split('/v2/')[1]}/ints").ingress == run_v2.IngressTraffic(1)
    assert (
        services.get_service(name=f"{parent.split('/v2/')[1]}/strs").ingress
        == run_v2.IngressTraffic.INGRESS_TRAFFIC_INTERNAL_ONLY
    )


@pytest.mark.parametrize(
    ("status", "exc"),
    [
        (429, gexc.TooManyRequests),
        (500, gexc.InternalServerError),
        (503, gexc.ServiceUnavailable),
        (404, gexc.NotFound),
    ],
)
def test_fault_injection_maps_to_client_exceptions(healthy: Healthy, status, exc):
    sb, services, name = healthy.sb, healthy.services, healthy.name
    sb.faults.inject("run", "status", status, count=1)
    with pytest.raises(exc):
        services.get_service(name=name, retry=None)
    assert services.get_service(name=name, retry=None).name == name  # the fault was used up


def test_fault_hang_and_drop(healthy: Healthy):
    import requests

    sb, services, name = healthy.sb, healthy.services, healthy.name
    sb.faults.inject("run", "hang", count=1, seconds=5)
    with pytest.raises((requests.exceptions.Timeout, gexc.GoogleAPICallError, gexc.RetryError)):
        services.get_service(name=name, retry=None, timeout=0.3)
    sb.faults.clear()
    sb.faults.inject("run", "drop", count=1)
    with pytest.raises((requests.exceptions.ConnectionError, gexc.GoogleAPICallError)):
        services.get_service(name=name, retry=None)
    # over HTTP too: arm a fault through /_sandbox/faults
    r = httpx.post(
        f"{sb.url}/_sandbox/faults",
        json={"target": "run", "kind": "status", "status": 503},
        timeout=5,
        verify=tls_context(),
    )
    assert r.status_code == 200
    with pytest.raises(gexc.ServiceUnavailable):
        services.get_service(name=name, retry=None)
    assert services.get_service(name=name).name == name


def test_control_endpoints(sandbox_factory):  # noqa: F811
    sb = sandbox_factory(scenario="reference-weights-oom")
    assert (
        httpx.get(f"{sb.url}/_sandbox/healthz", timeout=5, verify=tls_context()).json()["scenario"]
        == "reference-weights-oom"
    )
    services, _ = run_clients(sb)
    svc = services.get_service(name=sb.service_name("gemma-4-12b"))
    assert not svc.latest_ready_revision  # the first deployment never became Ready
    assert httpx.get(f"{svc.uri}/health", timeout=5, verify=tls_context()).status_code == 503
    svc.template.containers[0].args = [QAT, "--max-model-len=16384", "--port=8080"]
    services.update_service(service=svc, metadata=[("x-gemma-sre-approval", "ap-1")]).result(timeout=30)
    j = httpx.get(f"{sb.url}/_sandbox/journal", timeout=5, verify=tls_context()).json()["entries"]
    assert [(e["method"], e["approval"]) for e in j] == [("PATCH", "ap-1")]
    assert httpx.get(f"{svc.uri}/health", timeout=5, verify=tls_context()).status_code == 200


def test_never_crashes_on_garbage(sandbox_factory):  # noqa: F811
    sb = sandbox_factory(scenario="healthy")
    base = f"{sb.url}/v2/projects/{sb.project}/locations/{sb.location}/services"
    gpu = {"nvidia.com/gpu": "1"}
    bodies = [
        [], 5, "x", None, {"template": []}, {"template": {"containers": "x"}},
        {"traffic": [{"percent": "abc"}]},
        {"template": {"containers": [{"image": "i", "resources": {"limits": {"cpu": "lots"}}}]}},
        {"template": {"containers": [{"image": "i", "resources": {"limits": {"nvidia.com/gpu": "two"}}}],
                      "nodeSelector": {"accelerator": "nvidia-l4"}}},
        {"template": {"containers": [{"image": "i", "resources": {"limits": gpu}}],
                      "nodeSelector": {"accelerator": "nvidia-zz99"}}},
        {"template": {"maxInstanceRequestConcurrency": 99999999999, "containers": [{"image": "i"}]}},
        {"template": {"containers": [{"image": "i"}], "revision": "other-name"}},
        {"template": {"containers": [{"image": "i"}], "scaling": {"maxInstanceCount": -1}}},
        {"template": {"containers": [{"image": "i", "startupProbe": {"periodSeconds": -5}}]}},
        {"traffic": [{"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION", "percent": 100}],
         "template": {"containers": [{"image": "i"}]}},
        {"etag": 5}, {"labels": {"a": 1}},
    ]  # fmt: skip
    http = httpx.Client(
        timeout=10, verify=tls_context()
    )  # one client: building one per request costs an SSL context each
    for i, b in enumerate(bodies):
        for method, url in [
            ("POST", f"{base}?serviceId=f{i}"),
            ("PATCH", f"{base}/gemma-4-12b"),
            ("PATCH", f"{base}/gemma-4-12b?updateMask=template,traffic"),
        ]:
            r = http.request(method, url, content=json.dumps(b).encode())
            assert r.status_code == 400, (i, method, r.text)
            assert r.json()["error"]["status"] in ("INVALID_ARGUMENT", "FAILED_PRECONDITION")
    for path in [
        "/v2/",
        "/v2/projects",
        "/v2/projects/p/locations/l/services/s/revisions/r/x",
        "/v2/projects/p/locations/l/operations/zz:wait",
        "/_sandbox/nope",
        "/_run/a",
        "/_rev/a/b/c/x",
    ]:
        for m in ["GET", "POST", "DELETE", "PUT"]:
            assert http.request(m, sb.url + path, content=b"[1,2").status_code < 500
    services, _ = run_clients(sb)
    parent = f"projects/{sb.project}/locations/{sb.location}"
    assert [s.name.rsplit("/", 1)[1] for s in services.list_services(parent=parent)] == ["gemma-4-12b"]
    assert services.get_service(name=f"{parent}/services/gemma-4-12b").generation == 1


def test_journal_records_calls_refused_by_faults(sandbox_factory):  # noqa: F811
    sb = sandbox_factory(scenario="healthy")
    services, _ = run_clients(sb)
    svc = services.get_service(name=sb.service_name("gemma-4-12b"))
    svc.labels["x"] = "y"
    sb.faults.inject("run", "status", 503, count=1)
    with pytest.raises(gexc.ServiceUnavailable):
        services.update_service(service=svc, retry=None, metadata=[("x-gemma-sre-approval", "ap-9")])
    services.update_service(service=svc, metadata=[("x-gemma-sre-approval", "ap-9")]).result(timeout=10)
    assert [(e.method, e.status, e.approval) for e in sb.journal] == [
        ("PATCH", 503, "ap-9"),
        ("PATCH", 200, "ap-9"),
    ]
