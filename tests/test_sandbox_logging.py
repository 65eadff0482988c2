"""The sandbox's Cloud Logging v2 entries:list through the official google-cloud-logging client."""

from __future__ import annotations

import httpx
import pytest
from google.api_core import exceptions as gexc
from google.cloud import logging as gcl

from mcp_tools.endpoint import tls_context
from sandbox.cloudlogging.filter import FilterError, compile_filter
from sandbox.cloudlogging.model import STDERR, STDOUT, SYSTEM, run_resource
from sandbox.testing import logging_client, sandbox, sandbox_factory  # noqa: F401  (fixtures)


def _seed(sb, n: int = 120) -> None:
    t0 = sb.clock.now_s() - 3600
    res = run_resource(sb.project, sb.location, "svc", "svc-00001-abc")
    for i in range(n):
        sev = ["INFO", "WARNING", "ERROR"][i % 3]
        log_id = [STDOUT, STDERR, SYSTEM][i % 3]
        if i % 10 == 0:
            sb.logs.append(
                project=sb.project,
                log_id=STDOUT,
                timestamp=t0 + i,
                severity=sev,
                json_payload={"message": f"structured {i}", "code": i},
                resource=res,
            )
        else:
            sb.logs.append(
                project=sb.project,
                log_id=log_id,
                timestamp=t0 + i,
                severity=sev,
                text=f"line {i} {'CUDA out of memory' if i % 7 == 0 else 'ok'}",
                resource=res,
            )
    sb.logs.append(project="other-project", log_id=STDOUT, timestamp=t0, text="elsewhere", severity="ERROR")


def test_filters_paging_and_order(sandbox):  # noqa: F811
    _seed(sandbox)
    client = logging_client(sandbox)
    # no timestamp in the filter: the client adds a 24-hour timestamp>= (real clock); entries are inside it
    all_entries = list(client.list_entries(filter_='resource.type="cloud_run_revision"', page_size=25))
    assert len(all_entries) == 120
    assert [e.timestamp for e in all_entries] == sorted(e.timestamp for e in all_entries)
    errors = list(
        client.list_entries(filter_="severity>=ERROR resource.labels.service_name=svc", page_size=7)
    )
    assert len(errors) == 40 and {e.severity for e in errors} == {"ERROR"}
    oom = list(client.list_entries(filter_='textPayload:"cuda out of memory" AND NOT severity=INFO'))
    assert {int(e.payload.split()[1]) for e in oom} == {
        i for i in range(120) if i % 7 == 0 and i % 10 and i % 3
    }
    desc = list(client.list_entries(filter_=f'log_id("{STDERR}")', order_by=gcl.DESCENDING, page_size=10))
    assert desc and [e.timestamp for e in desc] == sorted((e.timestamp for e in desc), reverse=True)
    assert all(e.log_name.endswith("run.googleapis.com%2Fstderr") for e in desc)
    js = list(client.list_entries(filter_="jsonPayload.code>=50 jsonPayload.message:structured"))
    assert sorted(e.payload["code"] for e in js) == [50, 60, 70, 80, 90, 100, 110]
    rx = list(client.list_entries(filter_=r'textPayload=~"^line 1\d "'))
    assert len(rx) == 9  # 11..19 minus 10 (structured)
    assert all(e.resource.labels["revision_name"] == "svc-00001-abc" for e in rx)
    grouped = list(client.list_entries(filter_="severity=(WARNING OR ERROR) OR -textPayload:ok"))
    # a missing field never matches ':' so NOT of it holds: structured INFO entries count too
    info_ok_free = {i for i in range(120) if i % 3 == 0 and (i % 10 == 0 or i % 7 == 0)}
    assert len(grouped) == 80 + len(info_ok_free)


def test_one_page_at_a_time_and_tokens(sandbox):  # noqa: F811
    _seed(sandbox)
    client = logging_client(sandbox)
    assert len(list(client.list_entries(filter_="severity=WARNING", page_size=15))) == 40
    body = {"resourceNames": [f"projects/{sandbox.project}"], "filter": "severity=WARNING", "pageSize": 15}
    r1 = httpx.post(f"{sandbox.url}/v2/entries:list", json=body, timeout=5, verify=tls_context()).json()
    assert len(r1["entries"]) == 15 and r1["nextPageToken"]
    r2 = httpx.post(
        f"{sandbox.url}/v2/entries:list",
        json={**body, "pageToken": r1["nextPageToken"]},
        timeout=5,
        verify=tls_context(),
    )
    p2 = r2.json()
    assert len(p2["entries"]) == 15 and p2["nextPageToken"]
    p3 = httpx.post(
        f"{sandbox.url}/v2/entries:list",
        json={**body, "pageToken": p2["nextPageToken"]},
        timeout=5,
        verify=tls_context(),
    ).json()
    assert len(p3["entries"]) == 10 and "nextPageToken" not in p3
    ids = [e["insertId"] for page in (r1, p2, p3) for e in page["entries"]]
    assert len(set(ids)) == 40
    # a token from another query is refused
    bad = httpx.post(
        f"{sandbox.url}/v2/entries:list",
        json={**body, "filter": "severity=ERROR", "pageToken": r1["nextPageToken"]},
        timeout=5,
        verify=tls_context(),
    )
    assert bad.status_code == 400 and bad.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_unsupported_filters_are_google_400s(sandbox):  # noqa: F811
    client = logging_client(sandbox)
    for filt in [
        "sample(insertId, 0.1)",
        "severity>=LOUD",
        "nosuchfield=1",
        'textPayload=~"("',
        "(severity=ERROR",
    ]:
        with pytest.raises(gexc.BadRequest) as ei:
            list(client.list_entries(filter_=filt))
        body = ei.value.response.json()["error"]
        assert body["status"] == "INVALID_ARGUMENT" and "filter" in body["message"].lower()
    for body in [
        {"filter": "severity=ERROR"},
        {"resourceNames": ["nonsense"]},
        {"resourceNames": ["projects/p"], "orderBy": "severity"},
        {"resourceNames": ["projects/p"], "pageSize": "ten"},
        ["not", "an", "object"],
    ]:
        r = httpx.post(f"{sandbox.url}/v2/entries:list", json=body, timeout=5, verify=tls_context())
        assert r.status_code == 400 and r.json()["error"]["code"] == 400
    r = httpx.post(f"{sandbox.url}/v2/entries:list", content=b"{{", timeout=5, verify=tls_context())
    assert r.status_code == 400


def test_fault_on_logging(sandbox):  # noqa: F811
    client = logging_client(sandbox)
    sandbox.faults.inject("logging", "status", 429)
    with pytest.raises(gexc.TooManyRequests):
        list(client.list_entries(filter_="severity>=ERROR"))
    assert list(client.list_entries(filter_="severity>=ERROR")) == []


def test_scenario_logs_look_like_cloud_run(sandbox_factory):  # noqa: F811
    sb = sandbox_factory(scenario="reference-weights-oom")
    client = logging_client(sb)
    f = (
        'resource.type="cloud_run_revision" AND resource.labels.service_name="gemma-4-12b" '
        'AND logName:"run.googleapis.com" AND timestamp>="2000-01-01T00:00:00Z"'
    )
    entries = list(client.list_entries(filter_=f, page_size=1000))
    texts = [e.payload for e in entries if isinstance(e.payload, str)]
    assert any("torch.OutOfMemoryError: CUDA out of memory" in t for t in texts)
    assert any("EngineCore failed to start" in t for t in texts)
    assert any("Engine core initialization failed" in t for t in texts)
    assert any(t == "Container called exit(1)." for t in texts)
    labels = entries[0].resource.labels
    assert set(labels) >= {"service_name", "revision_name", "location", "project_id", "configuration_name"}
    assert {e.log_name.rsplit("/", 1)[1] for e in entries} >= {
        "run.googleapis.com%2Fstdout",
        "run.googleapis.com%2Fstderr",
        "run.googleapis.com%2Fvarlog%2Fsystem",
    }


def test_filter_parser_semantics() -> None:
    e = {
        "severity": "ERROR",
        "textPayload": "CUDA out of memory",
        "logName": "projects/p/logs/x",
        "resource": {"type": "cloud_run_revision", "labels": {"service_name": "gemma"}},
        "jsonPayload": {"a": {"b": 5}},
        "timestamp": "2026-01-01T00:00:00Z",
    }
    t = lambda f: compile_filter(f)(e)  # noqa: E731
    assert t("severity>=WARNING") and not t("severity<ERROR") and t("severity>=500")
    assert t("severity=ERROR OR severity=INFO textPayload:cuda")  # OR binds tighter than (implicit) AND
    assert not t("severity=INFO OR severity=DEBUG textPayload:cuda")
    assert (
        t("NOT textPayload:foo")
        and not t("-textPayload:cuda")
        and not t("NOT (labels.x=1 OR severity=ERROR)")
    )
    assert t('timestamp>="2025-12-31T23:00:00.5+0000"') and not t('timestamp>"2026-01-01T00:00:00Z"')
    assert (
        t("jsonPayload.a.b>3") and t("jsonPayload.a:*") and not t("jsonPayload.x:*") and t("jsonPayload.x!=1")
    )
    assert t('textPayload!~"^foo"') and t('resource.labels.service_name=("x" OR "gemma")')
    assert t("memory") and not t("nowhere-to-be-found")
    for bad in ["severity>=", "a AND", "(severity=ERROR", 'SEARCH("x")', 'resource.type="unterminated']:
        with pytest.raises(FilterError):
            compile_filter(bad)


def test_clock_runs_fast_only_while_starting_and_real_now_bounds_work(sandbox):  # noqa: F811
    import time
    from datetime import UTC, datetime, timedelta

    from mcp_tools.incident import ServiceSpec

    real_start = datetime.now(UTC)
    spec = ServiceSpec(
        name="clk",
        gpu_type="nvidia-l4",
        cpu=8,
        memory="32Gi",
        image="vllm/vllm-openai",
        args=["--model=/mnt/models/gemma-4-12B-it-qat-w4a16-ct", "--max-model-len=8192"],
    )
    # Fast only while starting: judged by how far the sandbox's own clock got ahead of the real one
    # over the start-up, not by catching it mid-start (at x1000 the start-up lasts 0.1 s of real time,
    # shorter than a busy machine's stall).
    drift_before = sandbox.clock.now_s() - time.time()
    op = sandbox.deploy(spec)
    done = sandbox.wait_operation(op["name"], timeout=10)
    assert done["done"] and "response" in done
    time.sleep(0.05)
    assert not sandbox.clock.fast
    drift = sandbox.clock.now_s() - time.time()
    assert drift - drift_before > 30  # it ran fast while the revision started
    assert 30 < drift < 300  # ahead by the simulated start-up (~100 s), not by 1000x the session
    client = logging_client(sandbox)
    now = datetime.now(UTC)
    f = (
        f'timestamp>="{(real_start - timedelta(minutes=1)).isoformat()}" '
        f'timestamp<="{now.isoformat()}" textPayload:"Application startup complete"'
    )
    assert len(list(client.list_entries(filter_=f))) == 1  # the real "now" bound reads as the sandbox's now
    old = (now - timedelta(hours=3)).isoformat()
    assert list(client.list_entries(filter_=f'timestamp<="{old}" textPayload:"startup complete"')) == []
