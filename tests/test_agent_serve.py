"""``gemma-sre serve``: alert webhooks wake an investigation, Slack buttons decide it.

The server runs as a real ``gemma-sre serve`` process against the sandbox; alerts are the payload
shapes of Google's and Alertmanager's documentation (``tests/data/alerts``), posted over HTTP; the
Slack API is a local Slack-compatible server the official ``slack_sdk`` client talks to (mocking at
the wire), and callbacks are signed the way Slack signs them. What happened is read from the sandbox
journal, the decisions table, the audit log and the report.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from graph import audit
from graph.checkpoint import open_decisions
from mcp_tools.endpoint import tls_context
from sandbox.scenarios import scenario_specs
from sandbox.server import Sandbox, start_sandbox
from sandbox.testing import TEST_TIME_SCALE, sandbox_env
from tests.mcp_client import server_env
from tests.processes import announcing, serving
from tests.scripted_openai import free_port
from tests.waiting import wait_until

DATA = Path(__file__).parent / "data" / "alerts"
TOKEN = "serve-token-" + "x" * 20
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"  # the signing secret of Slack's documentation example
BOT = "xoxb-" + "1" * 12 + "-" + "a" * 24
CHANNEL = "C0GEMMASRE"


# --- a Slack-compatible Web API, at the wire -------------------------------------------------------


class FakeSlack:
    """chat.postMessage / chat.update, recorded; answers as Slack's Web API does."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/api/"

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        async def method(request: Request) -> JSONResponse:
            name = request.path_params["name"]
            raw = await request.body()
            if request.headers.get("content-type", "").startswith("application/json"):
                args = json.loads(raw)
            else:
                from urllib.parse import parse_qsl

                args = dict(parse_qsl(raw.decode()))
                if isinstance(args.get("blocks"), str):
                    args["blocks"] = json.loads(args["blocks"])
            self.calls.append((name, args, request.headers.get("authorization", "")))
            ts = f"{time.time():.6f}"
            return JSONResponse(
                {
                    "ok": True,
                    "channel": args.get("channel", CHANNEL),
                    "ts": args.get("ts", ts),
                    "message": {"text": args.get("text", "")},
                }
            )

        return Starlette(routes=[Route("/api/{name}", method, methods=["POST"])])

    def of(self, name: str) -> list[dict[str, Any]]:
        return [a for n, a, _ in self.calls if n == name]


@pytest.fixture(scope="module")
def fake_slack() -> Iterator[FakeSlack]:
    import uvicorn

    fs = FakeSlack()
    srv = uvicorn.Server(uvicorn.Config(fs.app(), host="127.0.0.1", port=fs.port, log_level="warning"))
    t = threading.Thread(target=srv.run, daemon=True)
    t.start()
    wait_until(
        lambda: srv.started or not t.is_alive(), f"the Slack-compatible server on {fs.port}", timeout_s=30
    )
    assert srv.started, f"the Slack-compatible server on port {fs.port} stopped before it served"
    yield fs
    srv.should_exit = True
    t.join(10)


class World:
    """The server under test, called with the process's TLS settings (``tls_context``): its status is
    polled, and a call's own client would load the CA bundle each time."""

    def __init__(self, sb: Sandbox, url: str, state: Path, slack: FakeSlack) -> None:
        self.sb, self.url, self.state, self.slack = sb, url, state, slack
        self._auth = {"authorization": f"Bearer {TOKEN}"}

    def post(self, path: str, doc: Any, *, auth: Any = None, headers: dict[str, str] | None = None) -> Any:
        h = {"authorization": f"Bearer {TOKEN}"} if auth is None and headers is None else (headers or {})
        return httpx.post(self.url + path, json=doc, headers=h, auth=auth, timeout=30, verify=tls_context())

    def investigation(self, thread: str) -> dict[str, Any]:
        r = httpx.get(self.url + "/investigations", headers=self._auth, timeout=30, verify=tls_context())
        assert r.status_code == 200, r.text
        (inv,) = [i for i in r.json()["investigations"] if i["thread_id"] == thread]
        return dict(inv)

    def investigations_of(self, service: str) -> list[dict[str, Any]]:
        r = httpx.get(self.url + "/investigations", headers=self._auth, timeout=30, verify=tls_context())
        return [i for i in r.json()["investigations"] if i["service"] == service]

    def wait_status(self, thread: str, *statuses: str, timeout: float = 120) -> dict[str, Any]:
        last: dict[str, Any] = {}

        def reached() -> dict[str, Any] | None:
            last.update(self.investigation(thread))
            return dict(last) if last["status"] in statuses else None

        return wait_until(reached, lambda: f"{statuses}: {last}", timeout_s=timeout, every_s=0.1)

    def deploy_broken(self, name: str) -> None:
        spec = scenario_specs("reference-weights-oom")[0][0]
        self.sb.deploy(spec.model_copy(update={"name": name}), wait=True)

    def deploy_healthy(self, name: str) -> None:
        spec = scenario_specs("healthy")[0][0]
        self.sb.deploy(spec.model_copy(update={"name": name}), wait=True)

    def mutations(self, service: str) -> list[Any]:
        return [
            e
            for e in self.sb.journal.entries()
            if e.method in ("POST", "PATCH", "PUT", "DELETE") and e.resource.endswith(f"/services/{service}")
        ]


@pytest.fixture(scope="module")
def world(fake_slack: FakeSlack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    sb = start_sandbox(time_scale=TEST_TIME_SCALE, zero_latency=True)
    state = tmp_path_factory.mktemp("serve-state")
    port = free_port()
    env = server_env(
        {
            **sandbox_env(sb),
            "XDG_CONFIG_HOME": str(state / "xdg-config"),  # no developer's gemma-sre.toml
            "GEMMA_SRE_SERVE_TOKEN": TOKEN,
            "GEMMA_SRE_SLACK_SIGNING_SECRET": SECRET,
            "GEMMA_SRE_SLACK_BOT_TOKEN": BOT,
            "GEMMA_SRE_SLACK_CHANNEL": CHANNEL,
            "GEMMA_SRE_SLACK_API_URL": fake_slack.url,
        },
        state,
    )
    try:
        with serving([sys.executable, "-m", "agent.cli", "serve", "--port", str(port)], port, env=env):
            yield World(sb, f"http://127.0.0.1:{port}", state, fake_slack)
    finally:
        sb.stop()


# --- payloads ---------------------------------------------------------------------------------------


def cloud_monitoring(
    sb: Sandbox, service: str, incident_id: str, state: str, ended_at: int | None = None
) -> dict[str, Any]:
    """Google's documented example, about a Cloud Run revision of ``service``."""
    doc = json.loads((DATA / "cloud_monitoring_doc_example.json").read_text())
    inc = doc["incident"]
    inc.update(
        {
            "incident_id": incident_id,
            "state": state,
            "scoping_project_id": sb.project,
            "policy_name": "vLLM 5xx ratio",
            "resource_type_display_name": "Cloud Run Revision",
        }
    )
    inc["resource"] = {
        "type": "cloud_run_revision",
        "labels": {
            "project_id": sb.project,
            "service_name": service,
            "revision_name": f"{service}-00001-abc",
            "location": sb.location,
            "configuration_name": service,
        },
    }
    inc["started_at"] = int(time.time()) - 600
    inc["ended_at"] = None if state == "open" else (ended_at or int(time.time()))
    return dict(doc)


def alertmanager(sb: Sandbox, service: str, status: str, project: str | None = None) -> dict[str, Any]:
    doc = json.loads((DATA / "alertmanager_v4.json").read_text())
    raw = json.dumps(doc).replace("PROJECT", project or sb.project).replace("REGION", sb.location)
    doc = json.loads(raw.replace('"SERVICE"', json.dumps(service)))
    doc["status"] = status
    for a in doc["alerts"]:
        a["status"] = status
        if status == "resolved":
            a["endsAt"] = "2026-05-29T19:37:48.123Z"
    return dict(doc)


def signed(body: str, *, secret: str = SECRET, ts: int | None = None) -> dict[str, str]:
    """Headers as Slack sends them: v0=HMAC-SHA256(secret, "v0:{ts}:{body}")."""
    stamp = str(ts if ts is not None else int(time.time()))
    mac = hmac.new(secret.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256).hexdigest()
    return {
        "x-slack-request-timestamp": stamp,
        "x-slack-signature": f"v0={mac}",
        "content-type": "application/x-www-form-urlencoded",
    }


def press(world: World, button: dict[str, Any], **sign: Any) -> tuple[httpx.Response, str, dict[str, str]]:
    payload = {
        "type": "block_actions",
        "user": {"id": "U0ALICE42", "username": "alice", "name": "alice", "team_id": "T0TEAM"},
        "api_app_id": "A0APP",
        "token": "verification-token-unused",
        "trigger_id": "1.2.3",
        "team": {"id": "T0TEAM", "domain": "example"},
        "container": {"type": "message", "channel_id": CHANNEL, "message_ts": "1.0"},
        "channel": {"id": CHANNEL, "name": "sre"},
        "actions": [
            {
                "type": "button",
                "action_id": button["action_id"],
                "block_id": "gemma_sre_decision",
                "value": button["value"],
                "action_ts": "1.1",
            }
        ],
    }
    body = urlencode({"payload": json.dumps(payload)})
    headers = signed(body, **sign)
    r = httpx.post(
        world.url + "/slack/interactions", content=body, headers=headers, timeout=30, verify=tls_context()
    )
    return r, body, headers


def buttons_for(world: World, thread: str) -> dict[str, dict[str, Any]]:

    def posted() -> dict[str, dict[str, Any]] | None:
        for args in world.slack.of("chat.postMessage"):
            for b in args.get("blocks") or []:
                if b.get("type") == "actions" and any(thread in e["value"] for e in b["elements"]):
                    return {e["text"]["text"]: e for e in b["elements"]}
        return None

    return wait_until(
        posted, lambda: f"the buttons for {thread}: {world.slack.calls}", timeout_s=30, every_s=0.1
    )


def decisions(world: World, thread: str) -> list[Any]:
    with open_decisions(None, world.state) as store:
        return store.for_thread(thread)


# --- tests ------------------------------------------------------------------------------------------


def test_every_request_but_slack_needs_the_token_and_googles_example_is_read(world: World) -> None:
    doc = json.loads((DATA / "cloud_monitoring_doc_example.json").read_text())
    assert world.post("/alerts/cloud-monitoring", doc, headers={}).status_code == 401
    assert (
        world.post("/alerts/cloud-monitoring", doc, headers={"authorization": "Bearer wrong"}).status_code
        == 401
    )
    assert httpx.get(world.url + "/investigations", timeout=10, verify=tls_context()).status_code == 401
    assert world.post("/alerts/cloud-monitoring", doc, auth=("cloud-monitoring", "wrong")).status_code == 401
    # Cloud Monitoring's webhook_basicauth channel: the token as the password.
    r = world.post("/alerts/cloud-monitoring", doc, auth=("cloud-monitoring", TOKEN))
    assert r.status_code == 202, r.text
    (ignored,) = r.json()["ignored"]  # a gce_instance: no Cloud Run service to investigate
    assert ignored["alert_id"] == "0.opqiw61fsv7p" and "no Cloud Run service" in ignored["note"]
    assert r.json()["accepted"] == []
    bad = world.post("/alerts/cloud-monitoring", {"incident": {"state": "open"}})
    assert bad.status_code == 400 and "incident_id" in bad.json()["error"]
    assert TOKEN not in bad.text


def test_cloud_monitoring_alert_to_slack_approval_to_verified_fix(world: World) -> None:
    service = "cm-weights-oom"
    world.deploy_broken(service)
    r = world.post("/alerts/cloud-monitoring", cloud_monitoring(world.sb, service, "0.first", "open"))
    assert r.status_code == 202, r.text
    (first,) = r.json()["accepted"]
    assert first["action"] == "started"
    thread = first["thread_id"]
    # A second alert for the same service joins the investigation: no second cycle.
    r2 = world.post("/alerts/cloud-monitoring", cloud_monitoring(world.sb, service, "0.second", "open"))
    (second,) = r2.json()["accepted"]
    assert second["action"] == "joined" and second["thread_id"] == thread
    world.wait_status(thread, "awaiting_approval")
    assert len(world.investigations_of(service)) == 1

    buttons = buttons_for(world, thread)
    assert "Approve" in buttons and "Reject" in buttons
    (posted,) = [a for a in world.slack.of("chat.postMessage") if thread in json.dumps(a.get("blocks"))]
    text = json.dumps(posted["blocks"])
    # The request's one rendering: the plan, its predicted effect, the diff.
    assert "Proposed plan" in text and "prediction (capacity planner)" in text and "Revision diff" in text
    assert posted["channel"] == CHANNEL

    # Forged (another secret) and stale (signed, but 6 minutes old) callbacks: refused, nothing recorded.
    forged, _, _ = press(world, buttons["Approve"], secret="not-the-signing-secret")
    stale, _, _ = press(world, buttons["Approve"], ts=int(time.time()) - 360)
    assert forged.status_code == 401 and stale.status_code == 401
    assert decisions(world, thread) == []

    ok, body, headers = press(world, buttons["Approve"])
    assert ok.status_code == 200, ok.text
    replay = httpx.post(
        world.url + "/slack/interactions", content=body, headers=headers, timeout=30, verify=tls_context()
    )
    assert replay.status_code == 409
    inv = world.wait_status(thread, "fixed", "rolled_back", "failed", "already_decided")
    assert inv["status"] == "fixed", inv

    (rec,) = decisions(world, thread)
    assert rec.decision == "approve" and rec.principal == "slack:U0ALICE42" and rec.note == "alice"
    approvals = [e for e in audit.read(world.state) if e.thread_id == thread and e.event == "approval"]
    assert len(approvals) == 1 and approvals[0].actor == "slack:U0ALICE42"
    assert len(world.mutations(service)) == 1  # one change sent
    wait_until(
        lambda: any(a.get("ts") for a in world.slack.of("chat.update") if thread in json.dumps(a)),
        lambda: f"the message updated: {world.slack.calls}",
        timeout_s=30,
        every_s=0.1,
    )
    assert all(auth == f"Bearer {BOT}" for _, _, auth in world.slack.calls)

    # The alerts close after the fix: verification evidence, on the investigation and in the report.
    c1 = world.post("/alerts/cloud-monitoring", cloud_monitoring(world.sb, service, "0.first", "closed"))
    (closed,) = c1.json()["accepted"]
    assert closed["action"] == "closed" and closed["verification_evidence"] is True
    # One that says it ended before the change was applied is recorded, but is no evidence of it.
    early = cloud_monitoring(world.sb, service, "0.second", "closed", ended_at=int(time.time()) - 3600)
    (c2,) = world.post("/alerts/cloud-monitoring", early).json()["accepted"]
    assert c2["verification_evidence"] is False and "before the fix" in c2["note"]
    inv = world.investigation(thread)
    assert inv["closed_at"] and inv["open_alerts"] == 0
    assert [a["evidence"] for a in inv["alerts"] if a["state"] == "closed"] == [True, False]
    from graph.runner import thread_result

    report = thread_result(thread, state_dir=world.state).report
    doc = json.loads(Path(report["json"]).read_text())
    assert [e["alert_id"] for e in doc["alert_verification"]] == ["0.first"]
    assert "Alert closed after the fix" in Path(report["markdown"]).read_text()
    # A new incident later: a new investigation, not the closed one.
    again = world.post("/alerts/cloud-monitoring", cloud_monitoring(world.sb, service, "0.third", "open"))
    (third,) = again.json()["accepted"]
    assert third["action"] == "started" and third["thread_id"] != thread


def test_slack_chooses_another_option_or_rejects_through_the_same_path(world: World) -> None:
    from graph.runner import thread_result

    threads = {}
    for service in ("cm-option", "cm-reject"):
        world.deploy_broken(service)
        r = world.post(
            "/alerts/cloud-monitoring", cloud_monitoring(world.sb, service, f"0.{service}", "open")
        )
        threads[service] = r.json()["accepted"][0]["thread_id"]
    for t in threads.values():
        world.wait_status(t, "awaiting_approval")
    opt = buttons_for(world, threads["cm-option"])
    (label,) = [k for k in opt if k.startswith("Approve option ")]
    rank = int(label.rsplit(" ", 1)[1])
    assert press(world, opt[label])[0].status_code == 200
    assert press(world, buttons_for(world, threads["cm-reject"])["Reject"])[0].status_code == 200
    world.wait_status(threads["cm-option"], "fixed", "rolled_back", "failed")
    world.wait_status(threads["cm-reject"], "rejected")
    approval = thread_result(threads["cm-option"], state_dir=world.state).values["approval"]
    assert approval["option"] == rank and approval["approver"] == "slack:U0ALICE42"
    (rej,) = decisions(world, threads["cm-reject"])
    assert rej.decision == "reject" and rej.principal == "slack:U0ALICE42"
    assert world.mutations("cm-reject") == [] and len(world.mutations("cm-option")) == 1


def test_alertmanager_group_joins_one_thread_and_unknown_services_are_noted(world: World) -> None:
    service = "am-healthy"
    world.deploy_healthy(service)
    r = world.post("/alerts/alertmanager", alertmanager(world.sb, service, "firing"))
    assert r.status_code == 202, r.text
    (first,) = r.json()["accepted"]
    assert first["action"] == "started"
    # Alertmanager re-sends the group while it fires: the same thread (an annotation with a secret in
    # it is kept redacted).
    leaky = alertmanager(world.sb, service, "firing")
    leaky["alerts"][0]["annotations"]["summary"] = (
        "queue backed up; HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz123456"
    )
    (again,) = world.post("/alerts/alertmanager", leaky).json()["accepted"]
    assert again["action"] == "joined" and again["thread_id"] == first["thread_id"]
    stored = json.dumps(world.investigation(first["thread_id"]))
    assert "queue backed up" in stored and "hf_abcdefghij" not in stored
    assert all(b"hf_abcdefghij" not in f.read_bytes() for f in (world.state / "serve").iterdir())
    world.wait_status(first["thread_id"], "healthy", "diagnosed", "no_action", "awaiting_approval")
    assert len(world.investigations_of(service)) == 1
    (resolved,) = world.post("/alerts/alertmanager", alertmanager(world.sb, service, "resolved")).json()[
        "accepted"
    ]
    assert resolved["action"] == "closed" and resolved["verification_evidence"] is False  # nothing was fixed
    assert "not evidence" in resolved["note"]
    assert world.mutations(service) == []

    other = world.post(
        "/alerts/alertmanager", alertmanager(world.sb, service, "firing", project="someone-else")
    )
    assert other.status_code == 202
    (note,) = other.json()["ignored"]
    assert "someone-else" in note["note"]
    wrong = world.post("/alerts/alertmanager", {**alertmanager(world.sb, service, "firing"), "version": "3"})
    assert wrong.status_code == 400 and "version 4" in wrong.json()["error"]


def test_slack_callback_for_a_thread_that_is_not_ours_records_nothing(world: World) -> None:
    button = {
        "action_id": "gemma_sre_decide:approve:0",
        "value": json.dumps({"thread": "no-such-thread-1", "decision": "approve"}),
    }
    r, _, _ = press(world, button)
    assert r.status_code == 200  # Slack is answered; the outcome is told in Slack
    assert decisions(world, "no-such-thread-1") == []
    odd = {"action_id": "someone_elses_button", "value": "{}"}
    r2, _, _ = press(world, odd)
    assert r2.status_code == 400


def test_an_oversized_body_is_413_and_read_no_further_than_the_limit(world: World) -> None:
    from agent.serve.app import MAX_BODY

    auth = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    big = b'{"pad": "' + b"x" * MAX_BODY + b'"}'
    r = httpx.post(
        world.url + "/alerts/cloud-monitoring", content=big, headers=auth, timeout=30, verify=tls_context()
    )
    assert r.status_code == 413 and str(MAX_BODY) in r.json()["error"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the server counts what it reads
        for _ in range(64):
            yield b"x" * 65_536

    r = httpx.post(
        world.url + "/alerts/alertmanager", content=chunks(), headers=auth, timeout=30, verify=tls_context()
    )
    assert r.status_code == 413
    body = "payload=" + "x" * MAX_BODY
    r = httpx.post(
        world.url + "/slack/interactions",
        content=body,
        headers=signed(body),
        timeout=30,
        verify=tls_context(),
    )
    assert r.status_code == 413
    ok = world.post("/alerts/alertmanager", {"version": "4"})  # the server still answers
    assert ok.status_code == 400


def test_serve_without_a_token_is_one_clear_error(cli: Any) -> None:
    res = cli("serve")
    assert res.returncode == 2 and "GEMMA_SRE_SERVE_TOKEN" in res.stderr and "Traceback" not in res.stderr


def test_it_says_where_it_listens_and_how_to_authenticate_never_a_secret(tmp_path: Path) -> None:
    import re

    port = free_port()
    env = server_env(
        {
            "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
            "GEMMA_SRE_SERVE_TOKEN": TOKEN,
            "GEMMA_SRE_SLACK_SIGNING_SECRET": SECRET,
            "GEMMA_SRE_SLACK_BOT_TOKEN": BOT,
            "GEMMA_SRE_SLACK_CHANNEL": CHANNEL,
        },
        tmp_path,
    )
    cmd = [sys.executable, "-m", "agent.cli", "serve", "--port", str(port)]
    with announcing(cmd, env=env, until="Slack interactivity") as (p, text):
        url = re.search(r"listening on (http://\S+)", text)
        assert url and url.group(1) == f"http://127.0.0.1:{port}", text
        assert "Authorization: Bearer <token>" in text and "GEMMA_SRE_SERVE_TOKEN" in text
        assert "GEMMA_SRE_SLACK_SIGNING_SECRET" in text
        assert TOKEN not in text and SECRET not in text and BOT not in text
        r = httpx.get(
            url.group(1) + "/investigations",
            headers={"authorization": f"Bearer {TOKEN}"},
            verify=tls_context(),
        )
        assert r.status_code == 200 and r.json()["investigations"] == []  # the printed URL works
    assert p.stdout is not None and p.stdout.read() == ""  # nothing on stdout


def test_an_alert_that_ended_in_the_second_of_the_fix_is_not_before_it() -> None:
    """Cloud Monitoring's ``ended_at`` is whole seconds; the fix's time has microseconds."""
    from agent.serve.app import _before

    assert not _before("2026-12-01T15:00:00+00:00", "2026-12-01T15:00:00.730000+00:00")
    assert _before("2026-12-01T14:59:59+00:00", "2026-12-01T15:00:00.730000+00:00")
    assert _before("2026-12-01T15:00:00.100000+00:00", "2026-12-01T15:00:00.730000+00:00")
