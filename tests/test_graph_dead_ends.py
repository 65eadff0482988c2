"""Issue 14's dead ends in the loop, each reproduced against the sandbox (the official clients over
REST, the real graph and checkpointer) or on the observation the loop builds."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from agent.commands.repl import sandbox_configuration
from graph import audit
from graph.observation import Observation
from graph.preflight import plan_text
from graph.remedies.rollback import rollback
from graph.runner import run_cycle, thread_result
from mcp_tools.remediation import RemediationPlan
from mcp_tools.settings import get_settings
from sandbox.testing import sandbox_factory  # noqa: F401  (fixture)
from tests.conftest import CliResult


def _mutations(sb: Any) -> list[Any]:
    return [e for e in sb.journal.entries() if e.method in ("POST", "PATCH", "DELETE", "PUT")]


# --- a fix that is not a fix -----------------------------------------------------------------------


def test_a_failed_rollout_that_never_took_the_traffic_is_history_not_a_rollback(
    sandbox_factory: Callable[..., Any],  # noqa: F811
) -> None:
    sb = sandbox_factory(scenario="weights-oom-with-good-revision")
    cfg = sandbox_configuration(sb, service=None)
    first = run_cycle(cfg)
    summary = first.values["observation_summary"]
    failed, serving = summary["latest_created_revision"], summary["latest_ready_revision"]
    d = first.values["diagnosis"]
    assert first.status == "healthy", (d["category"], d["summary"])
    assert not first.values.get("options") and not (first.values.get("plan") or {}).get("steps")
    # The diagnosis says what happened: the failed deploy, who serves, and what to do about the config.
    assert f"revision {failed}, failed to start and takes no traffic" in d["summary"]
    assert f"{serving} serves all of it" in d["summary"] and "update your deploy config" in d["summary"]

    second = run_cycle(cfg)  # the next cycle: the same, nothing proposed, nothing changed
    assert second.status == "healthy" and not second.values.get("options")
    assert _mutations(sb) == []


def test_a_rollback_to_the_revision_that_already_serves_is_never_proposed() -> None:
    obs = Observation(
        id="svc",
        latest_created_revision="svc-00002-bad",
        latest_ready_revision="svc-00001-good",
        serving_revision="svc-00001-good",
        revisions=["svc-00002-bad", "svc-00001-good"],
        ready_revisions=["svc-00001-good"],
    )
    assert obs.failed_rollout == "svc-00002-bad"
    assert rollback(obs, "engine_crash") is None  # traffic is on svc-00001-good already
    moved = obs.model_copy(update={"serving_revision": "svc-00003-other", "ready_revisions": []})
    assert moved.failed_rollout is None
    plan = rollback(moved, "engine_crash")
    assert plan is not None and plan.steps[0].change == {"revision": "svc-00001-good"}


# --- choosing another option -------------------------------------------------------------------------


def _pending(sb: Any) -> Any:
    res = run_cycle(sandbox_configuration(sb, service=None))
    assert res.waiting and res.pending is not None
    return res


def _decisions(thread_id: str) -> list[Any]:
    from graph.checkpoint import open_decisions

    s = get_settings()
    with open_decisions(s.checkpoint_url, s.state_dir) as store:
        return store.for_thread(thread_id)


def _approvals() -> list[Any]:
    return [e for e in audit.read(get_settings().state_dir) if e.event == "approval"]


def test_approve_option_n_applies_that_option_and_refuses_one_that_failed_preflight(
    sandbox_factory: Callable[..., Any],  # noqa: F811
    cli: Callable[..., CliResult],
) -> None:
    sb = sandbox_factory(scenario="reference-weights-oom")
    first = _pending(sb)
    options = first.pending.options
    offered = next(o for o in options if o.offered)
    failed = next(o for o in options if not o.ok)
    other = next(o for o in options if o.ok and not o.offered)
    # The request lists every option with preflight's verdict, the failing ones with their reason.
    assert offered.rank == first.values["preflight"]["option"]
    assert failed.reasons and "HF_HUB_OFFLINE" in failed.line
    from agent.display import request_text

    text = request_text(first.pending, width=200)
    assert "approve another with --option N" in text and failed.line in text

    for bad, why in ((failed.rank, "failed preflight"), (len(options) + 1, "no such option")):
        r = cli("approve", first.thread_id, "--option", str(bad))
        assert r.returncode == 2, r
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and why in lines[0] and "Traceback" not in r.stderr
    assert _decisions(first.thread_id) == [] and _approvals() == [] and _mutations(sb) == []

    r = cli("approve", first.thread_id, "--option", str(other.rank), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["status"] == "fixed", doc
    done = thread_result(first.thread_id)
    assert done.values["approval"]["option"] == other.rank
    assert done.values["preflight"]["option"] == other.rank
    plan = RemediationPlan.model_validate(done.values["plan"])
    assert plan_text(plan) == other.steps
    (write,) = _mutations(sb)
    assert write.model_dump().get("approval") in audit.approved_ids(get_settings().state_dir)
    live = sb.state()["services"]
    assert any(other.steps.split("gpu_type=")[-1].split()[0] in json.dumps(s) for s in live.values())
    # One decision for the plan that was offered; it names the option approved.
    (rec,) = _decisions(first.thread_id)
    assert rec.plan_key == first.pending.plan_key
    assert rec.approval_id == done.values["approval"]["approval_id"]
    again = cli("approve", first.thread_id, "--option", str(offered.rank), "--json")
    assert json.loads(again.stdout)["status"] == "already_decided" and len(_mutations(sb)) == 1


def test_the_repl_approves_another_option(sandbox_factory: Callable[..., Any]) -> None:  # noqa: F811
    from agent.repl.commands import ReplCommands

    sb = sandbox_factory(scenario="reference-weights-oom")
    session = ReplCommands(sandbox_configuration(sb, service=None), approver="tester")
    reply = session.cmd_plan([])
    assert reply.pending is not None
    other = next(o for o in reply.pending.options if o.ok and not o.offered)
    assert "N is an option's number" in session.dispatch("/approve --option x").text()
    out = session.dispatch(f"/approve --option {other.rank}").text()
    assert f"option {other.rank} chosen instead of option" in out and "fixed" in out


# --- approving into the void -------------------------------------------------------------------------


def test_approve_refuses_a_service_that_cannot_be_reached_and_records_nothing(
    sandbox_factory: Callable[..., Any],  # noqa: F811
    cli: Callable[..., CliResult],
) -> None:
    sb = sandbox_factory(scenario="reference-weights-oom")
    first = _pending(sb)
    sb.stop()  # the sandbox is gone: its API endpoint refuses connections
    t0 = time.monotonic()
    r = cli("approve", first.thread_id)
    took = time.monotonic() - t0
    assert r.returncode == 2, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "cannot be reached" in lines[0] and "nothing was recorded" in lines[0]
    assert took < 15
    assert _decisions(first.thread_id) == [] and _approvals() == []
    assert not (get_settings().state_dir / "reports").exists() or not list(
        (get_settings().state_dir / "reports").glob(f"*{first.thread_id}*")
    )
    assert thread_result(first.thread_id).waiting  # still waiting: it can be approved later
