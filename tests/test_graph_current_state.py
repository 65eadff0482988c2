"""After a verified fix, later cycles judge the current state, and quiet cycles write no report.

Against the sandbox (official clients over REST, the real graph): ``reference-weights-oom`` is
diagnosed, the fix is approved and verified, and every later way of running a cycle (``run_cycle``
again, a fresh watcher, the REPL's ``/diagnose``) finds the service healthy with no plan, while the
failed revision's lines stay in the observation as history.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.commands.repl import sandbox_configuration
from agent.repl.commands import ReplCommands
from agent.watch import Watcher
from graph.analyzers import run_analyzers
from graph.diagnosis import build_context
from graph.observation import Observation
from graph.pipeline import assess
from graph.runner import resume_cycle, run_cycle, stream_cycle, thread_result
from mcp_tools.incident import LogLine
from mcp_tools.settings import get_settings
from sandbox.testing import sandbox_factory  # noqa: F401  (fixture)
from tests.loop_support import LoopOn, loop_on  # noqa: F401  (fixture)


def _reports() -> list[str]:
    d = get_settings().state_dir / "reports"
    return sorted(p.name for p in d.glob("*")) if d.exists() else []


def test_after_a_verified_fix_every_later_cycle_is_healthy(loop_on: LoopOn) -> None:  # noqa: F811
    sb, cfg = loop_on("reference-weights-oom")
    first = run_cycle(cfg)
    assert first.waiting and first.values["diagnosis"]["category"] == "weights_oom"
    failed = first.values["observation_summary"]["latest_created_revision"]
    done = resume_cycle(first.thread_id, decision="approve", approver="oncall", live=cfg)
    assert done.status == "fixed", done.summary
    fixed = done.values["applied"]["revision"]
    assert fixed != failed

    # The same log window still holds the failed revision's OOM and probe lines.
    again = run_cycle(cfg)
    d = again.values["diagnosis"]
    assert again.status == "healthy", (d["category"], d["summary"])
    assert d["category"] == "healthy" and d["findings"] == [] and not again.values.get("plan")
    assert again.report == {}
    assert "history" in d["summary"] and failed in d["summary"]
    obs = Observation.model_validate(again.values["observation"])
    assert {ln.revision for ln in obs.logs} >= {failed, fixed}  # kept as context
    history = obs.history_lines()
    assert history and all(obs.logs[n - 1].revision == failed for n in history)
    assert any("CUDA out of memory" in obs.logs[n - 1].message for n in history)
    assert f"revisions {failed} no longer serve" in build_context(obs)
    # The same observation with the revisions unknown (as a recorded incident) still shows the fault.
    blind = obs.model_copy(
        update={"serving_revision": None, "latest_ready_revision": None, "latest_created_revision": None}
    )
    blind._cache.clear()
    assert {f.category for f in run_analyzers(blind)} & {"weights_oom", "startup_timeout"}

    # A fresh watcher (nothing open, whole log window) opens no incident and writes no report.
    before = _reports()
    w = Watcher(cfg)
    c = w.cycle()
    assert c.events == [] and c.healthy is True and c.category == "healthy" and c.status == "healthy"
    assert _reports() == before

    # The REPL's /diagnose says the same.
    session = ReplCommands(cfg, approver="oncall")
    reply = session.cmd_diagnose([])
    assert thread_result(reply.thread_id or "").values["diagnosis"]["category"] == "healthy"
    assert len(sb.journal.entries()) == 1  # the one approved change, nothing else


def test_quiet_watch_cycles_write_no_report_an_incident_does(
    sandbox_factory: Callable[..., Any],  # noqa: F811
) -> None:
    sb = sandbox_factory(scenario="healthy")
    w = Watcher(sandbox_configuration(sb, service=None))
    for _ in range(3):
        c = w.cycle()
        assert c.healthy is True and c.events == [] and c.status == "healthy"
    assert _reports() == []

    bad = sandbox_factory(scenario="reference-weights-oom")
    cfg = sandbox_configuration(bad, service=None)
    w = Watcher(cfg)
    c = w.cycle()
    assert [e.kind for e in c.events] == ["new"] and c.status == "awaiting_approval"
    assert w.cycle().events == []  # still broken: looked at, no second report
    assert _reports() == []  # the incident's report is its thread's, written when it ends
    resume_cycle(c.thread_id, decision="reject", approver="oncall", reason="not now", live=cfg)
    names = _reports()
    assert sorted(n.rsplit(".", 1)[1] for n in names) == ["json", "md"]  # one report
    assert all(c.thread_id in n for n in names)


def test_stream_cycle_yields_each_step_then_the_result(
    sandbox_factory: Callable[..., Any],  # noqa: F811
) -> None:
    sb = sandbox_factory(scenario="reference-weights-oom")
    run = stream_cycle(sandbox_configuration(sb, service=None))
    nodes = [step.node for step in run]
    assert nodes[:3] == ["observe", "diagnose", "propose"] and "preflight" in nodes
    assert run.result is not None and run.result.waiting and run.result.thread_id == run.thread_id
    assert thread_result(run.thread_id).pending == run.result.pending


#: Revision s-00001-a ran out of memory, s-00002-b (its successor) came up.
OOM_THEN_UP = [
    LogLine(text="torch.OutOfMemoryError: CUDA out of memory.", severity="ERROR", revision="s-00001-a"),
    LogLine(text="Application startup complete.", revision="s-00002-b"),
]


def test_superseded_revisions_are_history_unknown_ones_are_not() -> None:
    obs = Observation(
        logs=[*OOM_THEN_UP, LogLine(text="a line with no revision label")],
        conditions=[
            {"scope": "revision/s-00001-a", "type": "Ready", "state": "CONDITION_FAILED", "message": "x"},
            {"scope": "revision/s-00003-c", "type": "Ready", "state": "CONDITION_FAILED", "message": "y"},
            {"scope": "service", "type": "Ready", "state": "CONDITION_SUCCEEDED", "message": "z"},
        ],
        latest_ready_revision="s-00002-b",
        latest_created_revision="s-00003-c",
        revisions=["s-00003-c", "s-00002-b", "s-00001-a"],
        health=True,
    )
    assert obs.history_lines() == {1}
    # The newest revision failing is current: its condition stays evidence.
    assert [c["message"] for c in obs.current_conditions()] == ["y", "z"]
    assert obs.history_revisions() == ["s-00001-a"]
    assert all(1 not in f.cited_lines for f in run_analyzers(obs))
    d = assess(obs)
    assert d.evidence and all(e.line != 1 for e in d.evidence)  # the failing newest revision, not line 1
    # Without the revisions (a recorded incident) nothing is history.
    plain = Observation(logs=obs.logs, conditions=obs.conditions)
    assert plain.history_lines() == set()
    assert any(1 in f.cited_lines for f in run_analyzers(plain))


def test_a_model_citing_only_superseded_lines_does_not_overrule_the_current_state() -> None:
    import json

    from tests.scripted_openai import ScriptedOpenAI

    obs = Observation(
        logs=OOM_THEN_UP,
        latest_ready_revision="s-00002-b",
        latest_created_revision="s-00002-b",
        serving_revision="s-00002-b",
        revisions=["s-00002-b", "s-00001-a"],
        health=True,
    )
    answer = {"category": "runtime_oom", "confidence": 0.9, "summary": "CUDA OOM at line 1", "evidence": [1]}
    server = ScriptedOpenAI([{"content": json.dumps(answer)}]).start()
    try:
        d = assess(obs, model=server.url)
    finally:
        server.stop()
    assert server.requests, "the model was asked"
    sent = json.dumps(server.requests[0])
    assert "superseded revisions" in sent and "s-00001-a" in sent  # told what is history
    assert d.category == "healthy" and not d.plan.steps
    assert any("superseded" in n for n in d.notes)
