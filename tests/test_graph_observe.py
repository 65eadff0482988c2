"""A blind observation never leads to a fix: the whole loop on the sandbox, the official clients over
REST, with the sandbox's Logging / Cloud Run / endpoint fault injection (503, 429, dropped, hanging).

What could not be read is recorded with why; without the logs the diagnosis is ``unknown`` (an
escalation naming what to read by hand) unless a condition or the metrics prove the cause on their
own; ``auto`` never applies from a degraded observation; a hung dependency ends the cycle at its
deadline; the report says exactly what was not read.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from graph.diagnosis import diagnose
from graph.observation import Observation, Unread
from graph.runner import run_cycle
from mcp_tools.remediation import RemediationKind
from sandbox.testing import sandbox_factory  # noqa: F401  (fixture)
from tests.loop_support import config_for, mutations, queue_filled

#: The most permissive configuration there is: auto, with every mutating kind listed as safe.
AUTO_ALL: dict[str, Any] = dict(
    policy="auto", auto_kinds=[k.value for k in RemediationKind if k is not RemediationKind.ESCALATE]
)

LOGGING_FAULTS: dict[str, dict[str, Any]] = {
    "503": dict(kind="status", status=503),
    "429": dict(kind="status", status=429),
    "drop": dict(kind="drop"),
}


def _report(r: Any) -> tuple[str, dict[str, Any]]:
    return Path(r.report["markdown"]).read_text(), json.loads(Path(r.report["json"]).read_text())


@pytest.mark.parametrize("fault", sorted(LOGGING_FAULTS))
def test_unreadable_logs_give_an_escalation_never_a_fix(sandbox_factory: Any, fault: str) -> None:  # noqa: F811
    """Was: 0 lines, startup_timeout citing "line 0", and under auto a probe change applied."""
    sb = sandbox_factory(scenario="reference-weights-oom")  # the real cause: weights OOM
    sb.faults.inject("logging", count=None, **LOGGING_FAULTS[fault])
    r = run_cycle(config_for(sb, **AUTO_ALL))
    sb.faults.clear()
    assert mutations(sb) == []
    blind = r.values["observation_summary"]["blind"]
    assert [b["source"] for b in blind] == ["logs"] and blind[0]["reason"] == "error"
    assert "Cloud Logging" in blind[0]["why"]
    d = r.values["diagnosis"]
    assert d["category"] == "unknown", d["summary"]
    assert "logs could not be read" in d["summary"] and "startup_timeout" in d["summary"]  # seen, not trusted
    [step] = r.values["plan"]["steps"]
    assert step["kind"] == "escalate"
    assert "Cloud Logging entries of Cloud Run service" in step["change"]["human_action"]
    assert step["change"]["not_read"] == r.values["observation_summary"]["unread"]
    assert r.status == "no_action"
    md, doc = _report(r)
    assert "### Not read" in md and "the Cloud Logging entries of the service from" in md
    assert "Without the logs the diagnosis is `unknown`" in md
    assert "the diagnosis worked without it" not in md
    assert doc["observation"]["blind"] == blind


def test_hung_logging_ends_the_cycle_at_its_deadline(sandbox_factory: Any) -> None:  # noqa: F811
    """Was: three 30 s attempts (92 s without a model, 551 s with one); now the cycle's deadline."""
    sb = sandbox_factory(scenario="reference-weights-oom")
    sb.faults.inject("logging", kind="hang", count=None)
    started = time.monotonic()
    r = run_cycle(config_for(sb, cycle_deadline_s=4.0, **AUTO_ALL))
    took = time.monotonic() - started
    sb.faults.clear()
    # Well under one hung 30 s attempt (a busy machine adds to the 4 s; the deadline cuts the attempt).
    assert took < 4.0 + 12.0, f"the cycle took {took:.1f} s with a 4 s deadline"
    assert mutations(sb) == []
    blind = {b["source"]: b for b in r.values["observation_summary"]["blind"]}
    assert blind["logs"]["reason"] == "deadline" and "deadline of 4 s ran out" in blind["logs"]["why"]
    assert blind["health"]["reason"] == "deadline"  # not tried: no time was left
    assert r.values["diagnosis"]["category"] == "unknown"
    assert r.values["plan"]["steps"][0]["kind"] == "escalate" and r.status == "no_action"
    md, _ = _report(r)
    assert "the cycle's deadline ran out" in md


def test_metrics_prove_overload_without_logs_but_auto_asks_a_person(sandbox_factory: Any) -> None:  # noqa: F811
    sb = sandbox_factory(scenario="overload", zero_latency=False)
    queue_filled(sb)  # the scenario's steady load fills the queue
    sb.faults.inject("logging", status=503, count=None)
    r = run_cycle(config_for(sb, **AUTO_ALL))
    sb.faults.clear()
    d = r.values["diagnosis"]
    assert d["category"] == "overload", d["summary"]
    assert "metrics" in d["summary"] and "proves the cause on its own" in d["summary"]
    assert r.status == "awaiting_approval"  # not applied by the policy: a person decides
    assert mutations(sb) == []
    assert any("auto policy: not applied without a person" in n for n in r.values["preflight"]["notes"])


def test_an_unreadable_service_spec_is_never_acted_on_by_auto(sandbox_factory: Any) -> None:  # noqa: F811
    sb = sandbox_factory(scenario="weights-oom-with-good-revision")
    sb.faults.inject("run", status=503, count=None)
    r = run_cycle(config_for(sb, **AUTO_ALL))
    sb.faults.clear()
    assert mutations(sb) == []
    sources = [b["source"] for b in r.values["observation_summary"]["blind"]]
    assert sources == ["service", "health"]
    md, _ = _report(r)
    assert "service spec, revisions and their conditions" in md and "/health of the vLLM endpoint" in md


# --- the diagnose step's rule, on observations made by hand ----------------------------------------

LOGS_UNREAD = Unread(source="logs", why="Cloud Logging (list entries): unavailable after 3 attempts")


def _failed(message: str) -> dict[str, Any]:
    scope = "revision/svc-00002-abc"
    return {"scope": scope, "type": "Ready", "state": "CONDITION_FAILED", "message": message}


def test_a_condition_an_analyzer_explains_proves_the_cause_without_logs() -> None:
    obs = Observation(
        id="svc",
        conditions=[_failed("Image 'us-docker.pkg.dev/p/r/vllm:nope' not found.")],
        unread=[LOGS_UNREAD],
    )
    d = diagnose(obs)
    assert d.category == "image_pull"
    assert "proves the cause on its own" in d.summary
    assert any(n.startswith("not read: logs:") for n in d.notes)


def test_a_symptom_or_a_quiet_service_is_unknown_without_logs() -> None:
    probe = _failed("The user-provided container failed to start and listen on the port within the timeout.")
    d = diagnose(Observation(id="svc", conditions=[probe], unread=[LOGS_UNREAD], window=("A", "B")))
    assert d.category == "unknown" and "startup_timeout (a symptom, not a cause)" in d.summary
    assert "from A to B" in d.summary
    metrics = "vllm:num_requests_running 0\n"
    up = diagnose(Observation(id="svc", health=True, metrics=metrics, unread=[LOGS_UNREAD]))
    assert up.category == "unknown" and "'healthy' is not earned" in up.summary
    # The same observations with their logs read (and empty) are what they were.
    assert diagnose(Observation(id="svc", conditions=[probe])).category == "startup_timeout"
