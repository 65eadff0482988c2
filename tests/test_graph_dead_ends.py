"""Issue 14's dead ends in the loop, each reproduced against the sandbox (the official clients over
REST, the real graph and checkpointer) or on the observation the loop builds."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.commands.repl import sandbox_configuration
from graph import audit
from graph.observation import Observation
from graph.preflight import plan_text
from graph.remedies.rollback import rollback
from graph.runner import run_cycle, thread_result
from mcp_tools.remediation import RemediationPlan
from mcp_tools.settings import get_settings
from sandbox.testing import sandbox_factory  # noqa: F401  (fixture)
from tests.conftest import ROOT, CliResult
from tests.loop_support import LoopOn, loop_on, mutations  # noqa: F401  (fixture)

# --- a fix that is not a fix -----------------------------------------------------------------------


def test_a_failed_rollout_that_never_took_the_traffic_is_history_not_a_rollback(loop_on: LoopOn) -> None:  # noqa: F811
    sb, cfg = loop_on("weights-oom-with-good-revision")
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
    assert mutations(sb) == []


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


Pending = tuple[Any, Any, Any]


@pytest.fixture
def pending(loop_on: LoopOn) -> Pending:  # noqa: F811
    """The reference weights-OOM sandbox after one cycle that waits for approval: (sandbox,
    configuration, the cycle's result)."""
    sb, cfg = loop_on("reference-weights-oom")
    res = run_cycle(cfg)
    assert res.waiting and res.pending is not None
    return sb, cfg, res


def _decisions(thread_id: str) -> list[Any]:
    from graph.checkpoint import open_decisions

    s = get_settings()
    with open_decisions(s.checkpoint_url, s.state_dir) as store:
        return store.for_thread(thread_id)


def _approvals() -> list[Any]:
    return [e for e in audit.read(get_settings().state_dir) if e.event == "approval"]


def test_approve_option_n_applies_that_option_and_refuses_one_that_failed_preflight(
    pending: Pending, cli: Callable[..., CliResult]
) -> None:
    sb, _, first = pending
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
    assert _decisions(first.thread_id) == [] and _approvals() == [] and mutations(sb) == []

    r = cli("approve", first.thread_id, "--option", str(other.rank), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["status"] == "fixed", doc
    done = thread_result(first.thread_id)
    assert done.values["approval"]["option"] == other.rank
    assert done.values["preflight"]["option"] == other.rank
    plan = RemediationPlan.model_validate(done.values["plan"])
    assert plan_text(plan) == other.steps
    (write,) = mutations(sb)
    assert write.model_dump().get("approval") in audit.approved_ids(get_settings().state_dir)
    live = sb.state()["services"]
    assert any(other.steps.split("gpu_type=")[-1].split()[0] in json.dumps(s) for s in live.values())
    # One decision for the plan that was offered; it names the option approved.
    (rec,) = _decisions(first.thread_id)
    assert rec.plan_key == first.pending.plan_key
    assert rec.approval_id == done.values["approval"]["approval_id"]
    again = cli("approve", first.thread_id, "--option", str(offered.rank), "--json")
    assert json.loads(again.stdout)["status"] == "already_decided" and len(mutations(sb)) == 1


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
    pending: Pending, cli: Callable[..., CliResult]
) -> None:
    sb, _, first = pending
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


# --- watch state outlives what it watched ------------------------------------------------------------


def test_watch_state_is_per_world_and_every_status_line_matches_the_thread(
    tmp_path: Path,
    sandbox_factory: Callable[..., Any],  # noqa: F811
) -> None:
    from agent.watch import Watcher, status_line
    from graph.runner import resume_cycle

    sb = sandbox_factory(scenario="reference-weights-oom")
    # A state directory of the watcher's own (not the settings' one): threads are looked up there.
    cfg = sandbox_configuration(sb, service=None).model_copy(update={"state_dir": str(tmp_path / "own")})
    w = Watcher(cfg, instance="first")
    c1 = w.cycle()
    assert c1.status == "awaiting_approval" and c1.pending_thread == c1.thread_id
    line = status_line(c1)
    assert line.startswith("cycle 1: weights_oom, 1 finding(s)") and "healthy" not in line
    assert f"a plan waits for a decision on thread {c1.thread_id}" in line

    # Another sandbox with the same project, region and service is another world: a fresh state.
    other = sandbox_factory(scenario="reference-weights-oom")
    cfg2 = sandbox_configuration(other, service=None).model_copy(update={"state_dir": cfg.state_dir})
    w2 = Watcher(cfg2, instance="second")
    assert w2.store.path != w.store.path and w2.state.cycle == 0 and w2.state.pending_thread is None
    assert Watcher(cfg, instance="first").state.cycle == 1  # the same world resumes

    done = resume_cycle(c1.thread_id, decision="approve", approver="oncall", live=cfg)
    assert done.status == "fixed", done.summary
    c2 = w.cycle()
    assert c2.finished_thread == c1.thread_id and c2.finished_status == "fixed"
    (resolved,) = c2.events
    assert resolved.kind == "resolved" and "remediation outcome: fixed" in resolved.reason
    assert "unknown" not in resolved.reason
    assert status_line(c2).startswith("cycle 2: healthy; nothing to do")


def test_a_thread_being_carried_out_is_not_finished(sandbox_factory: Callable[..., Any]) -> None:  # noqa: F811
    from agent.incidents_tracker import TrackerState
    from agent.watch import open_thread, thread_now
    from graph.runner import stream_cycle

    sb = sandbox_factory(scenario="reference-weights-oom")
    run = stream_cycle(sandbox_configuration(sb, service=None))
    steps = iter(run)
    assert next(steps).node == "observe"  # checkpointed; the thread runs on
    now = thread_now(run.thread_id)
    assert now is not None and not now.finished
    assert open_thread(TrackerState(pending_thread=run.thread_id)) == run.thread_id
    for _ in steps:
        pass
    now = thread_now(run.thread_id)
    assert now is not None and now.waiting and not now.finished  # waiting for a decision
    assert thread_now("no-such-thread") is None  # never an invented "unknown" outcome
    assert open_thread(TrackerState(pending_thread="no-such-thread")) is None


def test_status_lines_never_contradict_themselves() -> None:
    from agent.watch import CycleSummary, status_line

    def line(**kw: Any) -> str:
        return status_line(CycleSummary(cycle=3, thread_id="t1", **kw))

    assert line(status="healthy", category="healthy", healthy=True) == (
        "cycle 3: healthy; nothing to do (0.0s, thread t1)"
    )
    waiting = line(status="awaiting_approval", category="weights_oom", healthy=False, findings=1)
    assert waiting.startswith("cycle 3: weights_oom, 1 finding(s) (/health failing); a plan waits")
    observed = line(status="diagnosed", category="weights_oom", healthy=True, findings=1, pending_thread="t0")
    assert (
        "weights_oom, 1 finding(s) (/health answers); a plan already waits for a decision on thread t0"
        in (observed)
    )
    assert line(status="diagnosed", category="unknown", healthy=None).startswith(
        "cycle 3: no diagnosis (health unknown); observed"
    )


# --- the demo disagrees with itself (the demo's own test: tests/test_agent_cli.py) ---------------------


def test_diagnose_shows_why_each_option_fails_preflight(cli: Callable[..., CliResult]) -> None:
    r = cli("diagnose", "--incident", str(ROOT / "evals/incidents/l4-gemma4-12b-bf16-weights-oom.yaml"))
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())
    assert "(fails preflight)" not in out
    assert "(fails preflight: HF_HUB_OFFLINE=1:" in out and "(passes preflight)" in out
    assert "{'" not in out  # steps in words, not Python reprs


# --- the incident report -----------------------------------------------------------------------------


def test_the_report_is_one_an_on_call_engineer_can_hand_on(pending: Pending) -> None:
    from urllib.parse import unquote

    from graph.runner import resume_cycle

    sb, cfg, first = pending
    done = resume_cycle(first.thread_id, decision="approve", approver="oncall", live=cfg)
    assert done.status == "fixed", done.summary
    doc = json.loads(Path(done.report["json"]).read_text())
    inc = doc["incident"]
    assert (inc["project"], inc["region"], inc["service"]) == (sb.project, sb.location, cfg.service)
    assert inc["url"] and inc["url"].endswith(cfg.service)
    imp = inc["impact"]
    first_line = imp["first_failing_line"]
    logs = done.values["observation"]["logs"]
    assert first_line["timestamp"] == logs[first_line["line"] - 1]["timestamp"]
    assert first_line["line"] == min(e["line"] for e in done.values["diagnosis"]["evidence"] if e["line"])
    assert imp["detected_at"] and imp["resolved_at"] and imp["open"] is False and imp["duration_s"] > 0
    logs_link = unquote(inc["links"]["logs"])
    assert logs_link.startswith("https://console.cloud.google.com/logs/query;query=")
    assert (
        f'resource.labels.service_name="{cfg.service}"' in logs_link and f"?project={sb.project}" in logs_link
    )
    assert inc["links"]["revisions"] == (
        f"https://console.cloud.google.com/run/detail/{sb.location}/{cfg.service}/revisions?project={sb.project}"
    )
    alts = inc["alternatives"]
    (chosen,) = [a for a in alts if a["chosen"]]
    assert chosen["rank"] == done.values["preflight"]["option"] and "approved by oncall" in chosen["why"]
    assert all(
        a["why"].startswith("failed preflight: ") and a["preflight_reasons"]
        for a in alts
        if not a["passed_preflight"]
    )
    assert any("ranked below option" in a["why"] for a in alts if a["passed_preflight"] and not a["chosen"])
    assert "fits the GPU" in inc["predicted_effect"] and "GiB" in inc["predicted_effect"]
    ups = " ".join(inc["follow_ups"])
    assert "update your deploy config" in ups.lower() and "the next deploy reverts this" in ups
    assert "Online fp8 quantization changes output quality" in ups
    md = Path(done.report["markdown"]).read_text()
    for heading in (
        "## Incident",
        "### Impact window",
        "### Links",
        "### Alternatives considered",
        "### Predicted effect",
        "### Follow-ups",
    ):
        assert heading in md
    assert "- first failing line: line " in md and "- duration: " in md
    assert "[Cloud Logging query for the observed window](https://console.cloud.google.com/logs/query;" in md


def test_the_report_records_the_option_a_person_chose(pending: Pending) -> None:
    from graph.runner import resume_cycle

    sb, cfg, first = pending
    offered = next(o for o in first.pending.options if o.offered)
    other = next(o for o in first.pending.options if o.ok and not o.offered)
    done = resume_cycle(first.thread_id, decision="approve", approver="oncall", live=cfg, option=other.rank)
    assert done.status == "fixed", done.summary
    alts = {
        a["rank"]: a for a in json.loads(Path(done.report["json"]).read_text())["incident"]["alternatives"]
    }
    assert alts[other.rank]["chosen"]
    assert (
        alts[other.rank]["why"]
        == f"chosen by oncall (approve --option {other.rank}) over the offered option {offered.rank}"
    )
    assert (
        alts[offered.rank]["why"]
        == f"offered first (it passes preflight), but oncall chose option {other.rank}"
    )
    md = Path(done.report["markdown"]).read_text()
    assert f"| {other.rank} | {other.steps} | yes | chosen by oncall" in md
