"""One decision per plan: the first decision recorded wins, every later one is told which won and by
whom, and only the winner's process applies.

The store is the checkpoint database itself (``graph.checkpoint.Decisions``); the races are real
``gemma-sre approve`` / ``reject`` processes (and MCP ``approve_remediation`` through the official
client) started together at the same waiting thread, against the sandbox, whose journal says what
was sent. The audit log's torn tail and the approver's identity are here too.
"""

from __future__ import annotations

import getpass
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client.stdio import stdio_client

from graph import audit
from graph.checkpoint import DecisionRecord, open_decisions, open_ledger
from graph.config import Configuration
from graph.runner import resume_cycle, run_cycle
from mcp_tools.settings import get_settings
from sandbox.scenarios import scenario_specs
from sandbox.testing import sandbox_env, sandbox_factory  # noqa: F401  (fixture)
from tests.concurrency import at_once
from tests.conftest import CliResult
from tests.loop_support import config_for
from tests.mcp_client import SessionThread, server_env, stdio_params, text_of
from tests.processes import CliWorker

ROUNDS = int(os.environ.get("GEMMA_SRE_TEST_RACE_ROUNDS", "20"))
MIN_ROUNDS = 8
#: each pair's rounds stop after this many seconds (bounded in time), once ``MIN_ROUNDS`` have run
#: (``GEMMA_SRE_TEST_RACE_BUDGET_S=120`` soaks)
ROUND_BUDGET_S = float(os.environ.get("GEMMA_SRE_TEST_RACE_BUDGET_S", "0"))


def broken_services(sb: Any, n: int) -> Iterator[str]:
    """``n`` services that each fail the same way (weights OOM), one per round, in one sandbox."""
    spec = scenario_specs("reference-weights-oom")[0][0]
    for i in range(n):
        name = f"race-{i}"
        sb.deploy(spec.model_copy(update={"name": name}), wait=True)
        yield name


def pending(sb: Any, service: str) -> str:
    res = run_cycle(config_for(sb, service))
    assert res.status == "awaiting_approval", res.summary
    return res.thread_id


def decisions(thread: str) -> list[DecisionRecord]:
    s = get_settings()
    with open_decisions(s.checkpoint_url, s.state_dir) as store:
        return store.for_thread(thread)


def mutations_of(sb: Any, service: str) -> list[Any]:
    return [
        e
        for e in sb.journal.entries()
        if e.method in ("POST", "PATCH", "PUT", "DELETE") and e.resource.endswith(f"/services/{service}")
    ]


def check_round(
    sb: Any, service: str, thread: str, answers: list[tuple[str, int | None, dict[str, Any]]]
) -> DecisionRecord:
    """One decision recorded, at most one mutation (exactly one if approved), every answer truthful."""
    recs = decisions(thread)
    assert len(recs) == 1, recs
    rec = recs[0]
    muts = mutations_of(sb, service)
    assert len(muts) == (1 if rec.decision == "approve" else 0), [m.model_dump() for m in muts]
    assert all(m.approval == rec.approval_id for m in muts)
    events = [e for e in audit.read(get_settings().state_dir) if e.thread_id == thread]
    assert [e.event for e in events if e.event in ("approval", "rejection")] == [
        "approval" if rec.decision == "approve" else "rejection"
    ]
    winners = [a for a in answers if a[2]["status"] not in ("already_decided", "busy")]
    assert len(winners) == 1, answers  # exactly one process carried the decision out
    wanted, code, doc = winners[0]
    assert wanted == rec.decision
    assert doc["status"] == ("rejected" if rec.decision == "reject" else "fixed"), doc
    if code is not None:
        assert code == 0
    for wanted, code, doc in answers:
        if doc is winners[0][2]:
            continue
        verb = "approved" if rec.decision == "approve" else "rejected"
        if doc["status"] == "already_decided":
            assert doc["decided"]["claim"] == rec.claim and doc["decided"]["principal"] == rec.principal
            assert f"already {verb} by {rec.principal}" in doc["summary"], doc["summary"]
        else:  # busy: the winner held the thread before it recorded its decision
            assert "another process" in doc["summary"] and "nothing was done here" in doc["summary"]
        if rec.decision == "approve":
            assert "nothing applied" not in doc["summary"], doc["summary"]
        if code is not None:  # the CLI: a decision that lost to a different one is not a success
            assert code == (0 if wanted == rec.decision and doc["status"] == "already_decided" else 1)
    return rec


def decision_args(d: str, thread: str, *more: str) -> list[str]:
    return [d, thread, *(["--reason", "race"] if d == "reject" else []), *more, "--json"]


def answer(r: CliResult) -> tuple[int, dict[str, Any]]:
    assert r.stdout.strip(), r.stderr
    return r.returncode, json.loads(r.stdout)


def cli_env(sb: Any) -> dict[str, str]:
    """The environment of a ``gemma-sre`` process this test starts, pointed at the sandbox ``sb``."""
    return {**os.environ, **sandbox_env(sb)}


def race_cli_pair(sb: Any, workers: list[CliWorker], first: str, second: str) -> int:
    """Rounds of two ``gemma-sre`` processes handed one waiting thread together (each checked)."""
    t0 = time.monotonic()
    rounds = 0
    for service in broken_services(sb, ROUNDS):
        thread = pending(sb, service)
        pair = list(zip((first, second), workers, strict=True))
        for d, w in pair:
            w.start(*decision_args(d, thread, "--approver", f"typed-{d}"), env=cli_env(sb))
        check_round(sb, service, thread, [(d, *answer(w.result())) for d, w in pair])
        rounds += 1
        if rounds >= MIN_ROUNDS and time.monotonic() - t0 > ROUND_BUDGET_S:
            break
    return rounds


# The races share the session's two CLI worker processes (the first round races them cold, importing
# as they go; the later ones warm): they run one after another on one xdist worker.


@pytest.mark.slow
@pytest.mark.parametrize("pair", [("approve", "approve"), ("approve", "reject")], ids="-vs-".join)
def test_cli_races_cli_and_one_wins(
    pair: tuple[str, str],
    sandbox_factory: Any,  # noqa: F811
    cli_workers: list[CliWorker],
    capsys: pytest.CaptureFixture[str],
) -> None:
    rounds = race_cli_pair(sandbox_factory(scenario="healthy"), cli_workers, *pair)
    assert rounds >= MIN_ROUNDS
    with capsys.disabled():
        print(f"\n{pair[0]} vs {pair[1]}: {rounds} races, 0 contradicting decisions")


@pytest.mark.slow
def test_mcp_approve_races_cli_reject_and_one_wins(
    sandbox_factory: Any,  # noqa: F811
    cli_workers: list[CliWorker],
    capsys: pytest.CaptureFixture[str],
) -> None:
    mcp_race(sandbox_factory(scenario="healthy"), cli_workers[0], capsys)


def mcp_race(sb: Any, worker: CliWorker, capsys: pytest.CaptureFixture[str]) -> None:
    """MCP ``approve_remediation`` (official client, stdio) against ``gemma-sre reject``."""
    env = {
        **server_env(sandbox_env(sb), get_settings().state_dir),
        "GEMMA_SRE_MCP_PRINCIPAL": "mcp-oncall",
    }
    st = SessionThread(lambda: stdio_client(stdio_params(env)))
    t0 = time.monotonic()
    rounds = 0
    try:
        for service in broken_services(sb, ROUNDS):
            thread = pending(sb, service)
            got: dict[str, Any] = {}

            def via_mcp(tid: str = thread, got: dict[str, Any] = got) -> None:
                got["res"] = st.call(
                    "approve_remediation", {"thread_id": tid, "approver": "typed"}, timeout=180
                )

            t = threading.Thread(target=via_mcp)
            t.start()
            worker.start(*decision_args("reject", thread), env=cli_env(sb))
            code, doc = answer(worker.result())
            t.join(timeout=180)
            res = got["res"]
            assert not res.isError, text_of(res)
            mcp_doc = dict(res.structuredContent)
            rec = check_round(sb, service, thread, [("approve", None, mcp_doc), ("reject", code, doc)])
            assert rec.principal in ("mcp-oncall", getpass.getuser())
            rounds += 1
            if rounds >= MIN_ROUNDS and time.monotonic() - t0 > ROUND_BUDGET_S:
                break
    finally:
        st.close()
    with capsys.disabled():
        print(f"\nMCP approve vs CLI reject: {rounds} races, 0 contradicting decisions")


def test_in_process_decisions_race_one_wins(sandbox_factory: Any) -> None:  # noqa: F811
    """Threads deciding at once (the REPL and MCP faces run decisions in threads): one decision."""
    sb = sandbox_factory(scenario="healthy")
    for i, service in enumerate(broken_services(sb, 4)):
        thread = pending(sb, service)
        order = ("approve", "reject") if i % 2 else ("reject", "approve")

        def decide(
            i: int, tid: str = thread, order: tuple[str, str] = order
        ) -> tuple[str, None, dict[str, Any]]:
            d = order[i]
            res = resume_cycle(
                tid, decision=d, approver=f"user-{d}", reason="race" if d == "reject" else None
            )
            return d, None, {"status": res.status, "summary": res.summary, "decided": res.decided}

        answers: list[tuple[str, int | None, dict[str, Any]]] = list(at_once(decide, 2))
        assert len(answers) == 2
        check_round(sb, service, thread, answers)


def test_first_decision_wins_and_later_ones_read_it(tmp_path: Path) -> None:
    with open_decisions(None, tmp_path) as store:
        a = DecisionRecord(
            thread_id="t", plan_key="k", decision="approve", principal="alice", approval_id="apr-1", at="1"
        )
        b = a.model_copy(update={"decision": "reject", "principal": "bob", "claim": "other"})
        assert store.claim(a) == (True, a)
        won, standing = store.claim(b)
        assert not won and standing == a
        assert store.for_thread("t") == [a] and store.get("t", "nope") is None

    # Many connections claiming at once (as many processes would): exactly one wins.
    def claim(i: int) -> bool:
        with open_decisions(None, tmp_path) as store:
            rec = a.model_copy(update={"plan_key": "k2", "principal": f"p{i}", "claim": f"c{i}"})
            return store.claim(rec)[0]

    assert sorted(at_once(claim)) == [False] * 7 + [True]


def test_a_resume_that_did_not_win_applies_nothing(sandbox_factory: Any) -> None:  # noqa: F811
    """A process that resumes the graph itself (LangGraph Studio, an old client), not through the
    runner, with a decision that is not the one recorded: the recorded one stands, nothing is sent."""
    from langgraph.types import Command

    from graph.nodes.approve import DecisionConflict
    from graph.runner import _runnable_config, compiled_graph

    sb = sandbox_factory(scenario="healthy")
    s = get_settings()
    for recorded in ("reject", "approve"):
        service = next(broken_services(sb, 1)) if recorded == "reject" else "race-b"
        if recorded == "approve":
            sb.deploy(
                scenario_specs("reference-weights-oom")[0][0].model_copy(update={"name": service}), wait=True
            )
        thread = pending(sb, service)
        key = run_state_plan_key(thread)
        with open_decisions(s.checkpoint_url, s.state_dir) as store:  # another process decided first
            store.claim(
                DecisionRecord(
                    thread_id=thread,
                    plan_key=key,
                    decision=recorded,  # type: ignore[arg-type]
                    principal="erin",
                    approval_id="apr-x",
                    at="2026-01-01T00:00:00Z",
                )
            )
        stray = Command(resume={"decision": "approve", "approver": "mallory", "plan_key": key})
        config = _runnable_config(thread, config_for(sb, service))
        with compiled_graph() as g:
            if recorded == "reject":  # carried out as the rejection it is
                list(g.stream(stray, config, stream_mode="updates"))
                assert g.get_state(config).values["approval"]["approver"] == "erin"
            else:
                with pytest.raises(DecisionConflict, match="already approved by erin"):
                    list(g.stream(stray, config, stream_mode="updates"))
        assert mutations_of(sb, service) == []
        if recorded == "approve":
            res = resume_cycle(thread, decision="approve", approver="frank")
            assert res.status == "already_decided" and "already approved by erin" in res.summary
            assert mutations_of(sb, service) == []


def run_state_plan_key(thread: str) -> str:
    from graph.runner import thread_result

    res = thread_result(thread)
    assert res.pending is not None
    return res.pending.plan_key


def test_apply_refuses_an_approval_another_resume_won(tmp_path: Path) -> None:
    from graph.nodes.apply import NotApproved, _check_approval
    from graph.policy import apply_key, approval_id_for
    from graph.state import Approval
    from mcp_tools.remediation import RemediationPlan

    plan = RemediationPlan.model_validate(
        {"steps": [{"kind": "set_vllm_args", "change": {"--max-model-len": 8192}, "why": "fit"}]}
    )
    key = apply_key("t1", plan)
    apr = approval_id_for("t1", key)
    cfg = Configuration.from_settings(service="svc")
    audit.append(
        audit.AuditEvent(event="approval", thread_id="t1", service="svc", actor="a", approval_id=apr),
        state_dir=cfg.state_path,
    )
    s = get_settings()
    with open_decisions(s.checkpoint_url, s.state_dir) as store:
        store.claim(
            DecisionRecord(
                thread_id="t1",
                plan_key=key,
                decision="approve",
                principal="a",
                approval_id=apr,
                at="1",
                claim="c1",
            )
        )
    mine = Approval(decision="approve", approver="a", approval_id=apr, claim="c1")
    state: dict[str, Any] = {"approval": mine.model_dump(), "plan": plan.model_dump(mode="json")}
    with open_ledger(cfg.state_path) as ledger:
        assert _check_approval(state, cfg, "t1", plan, ledger).claim == "c1"  # type: ignore[arg-type]
        state["approval"] = mine.model_copy(update={"claim": "c2"}).model_dump()
        with pytest.raises(NotApproved, match="another process"):
            _check_approval(state, cfg, "t1", plan, ledger)  # type: ignore[arg-type]
        state["approval"] = mine.model_copy(update={"claim": None}).model_dump()
        with pytest.raises(NotApproved):
            _check_approval(state, cfg, "t1", plan, ledger)  # type: ignore[arg-type]


def test_the_audit_writes_to_the_callers_ledger_without_opening_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import graph.checkpoint

    monkeypatch.setenv("GEMMA_SRE_LEDGER_URL", str(tmp_path / "shared-ledger.sqlite"))
    get_settings.cache_clear()
    state_dir = get_settings().state_dir
    opened: list[Path] = []
    real = graph.checkpoint.open_ledger

    def counted(where: Path) -> Any:
        opened.append(where)
        return real(where)

    monkeypatch.setattr(graph.checkpoint, "open_ledger", counted)
    event = audit.AuditEvent(event="approval", thread_id="t1", service="svc", actor="a", approval_id="apr-1")
    with open_ledger(state_dir) as ledger:
        assert audit.append(event, state_dir=state_dir, ledger=ledger)
        assert "apr-1" in audit.approved_ids(state_dir, ledger=ledger)
        assert ledger.audit_approved_ids() == {"apr-1"}  # the shared copy, written through it
    assert opened == []  # one ledger for the call chain
    assert audit.approved_ids(state_dir) == {"apr-1"} and len(opened) == 1  # without one: opened here


# --- the audit log's torn tail ---------------------------------------------------------------------


def test_a_torn_last_record_is_skipped_reported_once_and_ended(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ev = audit.AuditEvent(event="approval", thread_id="t", service="s", actor="a", approval_id="apr-1")
    assert audit.append(ev, state_dir=tmp_path)
    path = audit.audit_path(tmp_path)
    whole = path.read_bytes()
    torn = audit.AuditEvent(event="approval", thread_id="t2", service="s", actor="b", approval_id="apr-2")
    line = json.dumps(torn.model_dump(mode="json"), sort_keys=True).encode()
    cut = line.index(b'"service"')  # past the event id: a torn record that names it recorded nothing
    path.write_bytes(whole + line[:cut])
    with caplog.at_level("WARNING", logger="graph.audit"):
        assert [e.approval_id for e in audit.read(tmp_path)] == ["apr-1"]
        assert audit.read(tmp_path)  # read again: reported once
    assert len([r for r in caplog.records if "torn" in r.getMessage()]) == 1
    # Writing the torn event again really writes it (the torn copy is not taken for a record) ...
    assert audit.append(torn, state_dir=tmp_path)
    assert audit.approved_ids(tmp_path) == {"apr-1", "apr-2"}
    # ... on a line of its own.
    assert path.read_bytes().startswith(whole + line[:cut] + b"\n")


def test_approve_and_reject_work_after_a_crash_mid_write(
    sandbox_factory: Any,  # noqa: F811
    cli_workers: list[CliWorker],
) -> None:
    """Decisions in a CLI process of their own, which reports on its stderr what it could not read."""
    sb = sandbox_factory(scenario="healthy")
    services = broken_services(sb, 2)
    state_dir = get_settings().state_dir
    worker = cli_workers[0]
    for decision, service in zip(("reject", "approve"), services, strict=True):
        thread = pending(sb, service)
        path = audit.audit_path(state_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as f:  # a crash in the middle of a record
            f.write(b'{"actor": "x", "approval_id": "apr-torn", "event": "appro')
        worker.start(*decision_args(decision, thread), env=cli_env(sb))
        r = worker.result()
        (code, doc), err = answer(r), r.stderr
        assert code == 0, err
        assert doc["status"] == ("fixed" if decision == "approve" else "rejected"), doc
        if decision == "approve":  # apply reads the log (for the approval): reported, not fatal
            torn = [ln for ln in err.splitlines() if "torn or unreadable record" in ln]
            assert len(torn) == 2 and len(set(torn)) == 2, err  # both torn records, each once


# --- who decided ----------------------------------------------------------------------------------


def test_the_recorded_approver_is_the_os_user_and_a_typed_name_a_note(
    sandbox_factory: Any,  # noqa: F811
    cli_on: Callable[..., CliResult],
) -> None:
    sb = sandbox_factory(scenario="healthy")
    service = next(broken_services(sb, 1))
    thread = pending(sb, service)
    code, doc = answer(cli_on(sb, *decision_args("approve", thread, "--approver", "the-ceo")))
    assert code == 0 and doc["status"] == "fixed", doc
    me = getpass.getuser()
    (ev,) = [
        e for e in audit.read(get_settings().state_dir) if e.thread_id == thread and e.event == "approval"
    ]
    assert ev.actor == me and ev.details["note"] == "the-ceo"
    assert decisions(thread)[0].principal == me
    md = Path(doc["report"]["markdown"]).read_text(encoding="utf-8")
    assert f"Approved by **{me}** (note: the-ceo)" in md
