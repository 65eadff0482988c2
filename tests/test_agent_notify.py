"""Webhook delivery against a real Starlette receiver on loopback (no HTTP mocking)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from agent.incidents_tracker import IncidentTracker, TrackedFinding
from agent.notify import send_webhook, slack_payload
from sandbox.serve import start_in_thread


class Receiver:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.fail_first = 0  # answer 503 to this many requests first
        self.status = 200

    async def hook(self, request: Request) -> Any:
        body = json.loads(await request.body())
        self.bodies.append(body)
        if self.fail_first > 0:
            self.fail_first -= 1
            return PlainTextResponse("busy", status_code=503, headers={"Retry-After": "0"})
        if self.status != 200:
            return PlainTextResponse("no", status_code=self.status)
        return JSONResponse({"ok": True})


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    rec = Receiver()
    app = Starlette(routes=[Route("/services/T000/B000/secret", rec.hook, methods=["POST"])])
    base, stop = start_in_thread(app)
    try:
        yield rec, f"{base}/services/T000/B000/secret"
    finally:
        stop()


def _event(kind: str = "new") -> Any:
    tr = IncidentTracker(quiet_cycles=1)
    f = TrackedFinding(
        category="weights_oom",
        service="gemma",
        confidence=0.9,
        summary="Weights (23.9 GiB) do not fit <the> L4 & its 22 GiB",
        evidence=["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"],
    )
    [new] = tr.update([f], service="gemma")
    if kind == "new":
        return new
    [resolved] = tr.update([], service="gemma", healthy=True)
    return resolved


def test_payload_is_slack_blocks_with_fallback_text_and_escaped_mrkdwn() -> None:
    p = slack_payload(_event("new"), approve_hint="gemma-sre approve T1")
    assert p["text"].startswith("New incident: weights_oom on gemma")
    types = [b["type"] for b in p["blocks"]]
    assert types[0] == "header" and types[-1] == "context" and "section" in types
    section = p["blocks"][1]["text"]["text"]
    assert "&lt;the&gt;" in section and "&amp;" in section
    assert any("CUDA out of memory" in b.get("text", {}).get("text", "") for b in p["blocks"])
    assert "gemma-sre approve T1" in p["blocks"][-1]["elements"][0]["text"]
    r = slack_payload(_event("resolved"))
    assert r["text"].startswith("Incident resolved")
    assert not any("CUDA out of memory" in b.get("text", {}).get("text", "") for b in r["blocks"])


def test_delivery_succeeds_and_the_receiver_gets_the_json(receiver: tuple[Receiver, str]) -> None:
    rec, url = receiver
    payload = slack_payload(_event())
    res = send_webhook(url, payload, timeout_s=5)
    assert res.ok and res.attempts == 1 and res.status == 200
    assert rec.bodies == [payload]


def test_delivery_retries_on_503_then_succeeds(receiver: tuple[Receiver, str]) -> None:
    rec, url = receiver
    rec.fail_first = 2
    res = send_webhook(url, slack_payload(_event()), retries=3, backoff_s=0.01)
    assert res.ok and res.attempts == 3
    assert len(rec.bodies) == 3


def test_client_error_is_not_retried_and_not_raised(receiver: tuple[Receiver, str]) -> None:
    rec, url = receiver
    rec.status = 404
    res = send_webhook(url, slack_payload(_event()), retries=3, backoff_s=0.01)
    assert not res.ok and res.attempts == 1 and res.status == 404


def test_unreachable_receiver_gives_up_after_retries_and_hides_the_secret(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    url = f"http://127.0.0.1:{port}/services/T000/B000/topsecret"
    with caplog.at_level("INFO"):
        res = send_webhook(url, {"text": "x"}, retries=2, backoff_s=0.01, timeout_s=1)
    assert not res.ok and res.attempts == 3 and res.status is None and res.error
    assert "topsecret" not in caplog.text and f"127.0.0.1:{port}" in caplog.text
    assert not send_webhook("ftp://x", {"text": "x"}).ok
