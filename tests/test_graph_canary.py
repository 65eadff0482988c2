"""The canary through the whole loop on the sandbox, with the official clients, judged by end state.

A fix to a service that serves is deployed as a tagged revision with no traffic, checked on its tag's
URL, then given traffic in steps with the SLOs watched. The sandbox's journal (every mutating call,
with its body) shows how much traffic the fix ever had; its router shows who serves now.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from graph import audit
from graph.checkpoint import open_ledger
from graph.config import Configuration
from graph.policy import apply_key
from graph.runner import resume_cycle, run_cycle, thread_result
from mcp_tools.remediation import RemediationPlan
from mcp_tools.settings import get_settings
from sandbox.scenarios import SLOW_FIX_FACTOR
from sandbox.testing import run_clients, sandbox_env, sandbox_factory  # noqa: F401  (fixture)
from tests.conftest import CliResult
from tests.loop_support import ERRORS_ONLY
from tests.loop_support import config_for as loop_config
from tests.waiting import wait_until

pytestmark = pytest.mark.slow  # the loop end to end, with real benchmarks of the simulated servers

SERVICE = "gemma-4-12b"


#: What these tests judge is the canary's steps and the fix against the serving revision, both measured
#: on this machine at the same time; an absolute TTFT target is the machine's speed here (a busy 2-core
#: machine put a good fix's p95 at 2.07 s against the default 2 s), so it is set out of reach.
MACHINE_INDEPENDENT = {"slo_ttft_p95_ms": 60_000.0, "slo_itl_p95_ms": 60_000.0}


def config_for(sb: Any, **overrides: Any) -> Configuration:
    return loop_config(sb, SERVICE, **{"verify_deadline_s": 60.0, **MACHINE_INDEPENDENT, **overrides})


def serving(sb: Any) -> dict[str, int]:
    """Who gets traffic now, as the sandbox's router sends it."""
    [svc] = sb.state()["services"].values()
    return dict(svc["serving"])


def fix_shares(sb: Any, revision: str) -> list[int]:
    """The fix's share in every traffic change the sandbox accepted, in order (0 when only tagged)."""
    out = []
    for e in sb.journal.entries():
        if e.method != "PATCH" or e.status >= 400 or not e.body:
            continue
        for t in e.body.get("traffic") or []:
            if t.get("revision") == revision:
                out.append(int(t.get("percent", 0)))
    return out


def official_traffic(sb: Any) -> list[tuple[str, int]]:
    services, _ = run_clients(sb)
    svc = services.get_service(name=sb.service_name(SERVICE))
    return [(t.revision, t.percent) for t in svc.traffic_statuses if t.percent]


def test_a_good_fix_goes_through_every_step_and_stays(sandbox_factory: Any) -> None:  # noqa: F811
    sb = sandbox_factory(scenario="canary-fix", zero_latency=False)
    # The fix is as fast as the serving revision: on a busy machine their ~80 ms medians drift apart by
    # tens of ms (127 against 82 in one run), noise the slow-fix test below does not depend on (its
    # difference is the injected x2 on a 250 ms prefill).
    first = run_cycle(config_for(sb, canary_chart=True, canary_min_delta_ms=250.0))
    assert first.values["diagnosis"]["category"] == "engine_hung"
    baseline = first.values["observation_summary"]["latest_ready_revision"]
    done = resume_cycle(first.thread_id, decision="approve", approver="alice")
    assert done.status == "fixed", done.summary
    fix = done.values["applied"]["revision"]
    assert done.values["applied"]["canary"] and fix != baseline

    assert fix_shares(sb, fix) == [0, 10, 50, 100]  # deployed with none, then each step once
    assert serving(sb) == {fix: 100}
    assert official_traffic(sb) == [(fix, 100)]  # as the Cloud Run client reads it
    canary = done.values["verification"]["canary"]
    assert canary["promoted"] and [s["percent"] for s in canary["steps"]] == [10, 50, 100]
    assert (
        canary["kv_ok"] is True and canary["kv_cache_tokens"]
    )  # vLLM's own line, within the planner's range
    assert canary["baseline"]["ttft_p50_ms"] and canary["before"]["ttft_p50_ms"]
    events = [e.event for e in audit.read(get_settings().state_dir)]
    assert events == ["approval", "mutation", "mutation", "mutation", "mutation"]

    md = Path(done.report["markdown"]).read_text()
    assert "## Canary" in md and "promoted" in md and f"`{baseline}`" in md
    chart = Path(canary["chart"])
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"]({chart.name})" in md


def test_a_fix_that_doubles_ttft_never_gets_traffic(sandbox_factory: Any) -> None:  # noqa: F811
    sb = sandbox_factory(scenario="canary-slow-fix", zero_latency=False)
    # x1.3 rather than the default x1.5, and prompts of 512 tokens (a prefill of some 250 ms rather
    # than 25): a starved CPU adds the same delay to both revisions' figures, which matters less the
    # longer the true TTFT is.
    first = run_cycle(config_for(sb, canary_max_ratio=1.3, canary_prompt_tokens=512))
    baseline = first.values["observation_summary"]["latest_ready_revision"]
    done = resume_cycle(first.thread_id, decision="approve", approver="alice")
    assert done.status == "rolled_back", done.summary
    fix = done.values["applied"]["revision"]
    v = done.values["verification"]
    assert v["health"] and v["smoke"]  # it passes /health and answers: only the canary sees it is slow
    assert "median TTFT" in " ".join(v["reasons"])
    canary = v["canary"]
    assert canary["breached_at"] == 0 and canary["steps"] == []
    # The fault makes it x2 (the injected truth, read back below); the measured ratio must show more
    # than the x1.3 the decision needed. No upper bound: a stall during the canary's own measurement
    # (a busy machine) can only push it up, and the injected factor is checked from the notes.
    ratio = canary["before"]["ttft_p50_ms"] / canary["baseline"]["ttft_p50_ms"]
    assert ratio > 1.3, ratio
    assert (
        sb.state()["services"][f"{sb.project}/{sb.location}/{SERVICE}"]["revisions"][fix]["notes"][
            "ttft_factor"
        ]
        == SLOW_FIX_FACTOR
    )
    assert max(fix_shares(sb, fix)) == 0
    assert serving(sb) == {baseline: 100}
    md = Path(done.report["markdown"]).read_text()
    assert "failed its checks before it was given any traffic" in md
    assert f"{canary['before']['ttft_p50_ms']:.0f}" in md and f"{canary['baseline']['ttft_p50_ms']:.0f}" in md


def test_a_fix_that_fails_under_traffic_is_rolled_back_at_the_first_step(sandbox_factory: Any) -> None:  # noqa: F811
    sb = sandbox_factory(scenario="canary-fix")
    # Zero-latency servers: only errors are judged here (latencies of ~0 ms are noise).
    first = run_cycle(config_for(sb, canary_hold_s=3.0, **ERRORS_ONLY))
    baseline = first.values["observation_summary"]["latest_ready_revision"]

    def fail_once_it_has_traffic() -> None:  # the fix starts answering 503 once it serves users
        def serving_fix() -> str | None:
            return next((rev for rev in _tagged(sb) if max(fix_shares(sb, rev)) > 0), None)

        rev = wait_until(serving_fix, "traffic on the fix", every_s=0.02)
        sb.faults.inject(rev, "status", status=503, count=None)

    watcher = threading.Thread(target=fail_once_it_has_traffic, daemon=True)
    watcher.start()
    done = resume_cycle(first.thread_id, decision="approve", approver="alice")
    watcher.join(timeout=5)
    sb.faults.clear()
    assert done.status == "rolled_back", done.summary
    fix = done.values["applied"]["revision"]
    canary = done.values["verification"]["canary"]
    assert canary["breached_at"] == 10, done.values["verification"]["reasons"]
    assert "error rate" in " ".join(canary["steps"][-1]["breaches"])
    assert fix_shares(sb, fix) == [
        0,
        10,
    ]  # never more than the first step; the rollback names only the baseline
    assert serving(sb) == {baseline: 100}
    assert done.values["rollback"]["to_revision"] == baseline
    events = [e.event for e in audit.read(get_settings().state_dir)]
    assert events == ["approval", "mutation", "mutation", "rollback"]


CLI = [sys.executable, "-m", "agent.cli"]


def test_killed_during_a_traffic_step_resumes_without_sending_a_step_twice(
    sandbox_factory: Any,  # noqa: F811
    cli_on: Callable[..., CliResult],
) -> None:
    sb = sandbox_factory(scenario="canary-fix")
    # Persisted with the thread (the CLI resumes it); zero-latency servers: only errors are judged.
    first = run_cycle(config_for(sb, canary_hold_s=4.0, **ERRORS_ONLY))
    assert first.status == "awaiting_approval"
    env = {**os.environ, **sandbox_env(sb)}
    p = subprocess.Popen(
        [*CLI, "approve", first.thread_id, "--approver", "carol"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:  # killed while it watches the 50% step (the step was made; the checkpoint does not know it)
        wait_until(
            lambda: any(s == 50 for rev in _tagged(sb) for s in fix_shares(sb, rev)) or p.poll() is not None,
            "the 50% step",
            timeout_s=90,
            every_s=0.02,
        )
        assert p.poll() is None, f"the process finished before it could be killed: {_outcome(first)}"
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
    [fix] = _tagged(sb)
    assert serving(sb)[fix] == 50

    doc = approve_again(cli_on, sb, first.thread_id)
    assert doc["status"] == "fixed", doc
    assert fix_shares(sb, fix) == [0, 10, 50, 100]  # the revision made once, no step sent twice
    revisions = sb.state()["services"][f"{sb.project}/{sb.location}/{SERVICE}"]["revisions"]
    assert len(revisions) == 2  # the one that served, and the fix
    assert serving(sb) == {fix: 100}
    events = [e for e in audit.read(get_settings().state_dir)]
    assert [e.event for e in events] == ["approval", "mutation", "mutation", "mutation", "mutation"]


#: ``gemma-sre`` that SIGKILLs itself when apply is about to audit the change it made: after the ledger
#: recorded the apply and before the state is checkpointed (the window a resumed run must carry on from).
DIES_AFTER_THE_LEDGER = (
    "import os, runpy, signal, sys\n"
    "from graph import audit\n"
    "real = audit.append\n"
    "def append(event, **kw):\n"
    "    if event.event == 'mutation' and event.details.get('apply_key'):\n"
    "        os.kill(os.getpid(), signal.SIGKILL)\n"
    "    return real(event, **kw)\n"
    "audit.append = append\n"
    "sys.argv = ['gemma-sre', *sys.argv[1:]]\n"
    "runpy.run_module('agent.cli', run_name='__main__')\n"
)


def killed_after_the_ledger(sandbox_factory: Any, **overrides: Any) -> tuple[Any, Any, str, str]:  # noqa: F811
    """A canary fix (the canary-fix scenario) approved in a process killed once the ledger recorded the
    apply (the fix deployed with no traffic): the sandbox, the first cycle's result, the serving
    revision, the fix."""
    sb = sandbox_factory(scenario="canary-fix")
    first = run_cycle(config_for(sb, canary_hold_s=0.0, **{**ERRORS_ONLY, **overrides}))
    assert first.status == "awaiting_approval"
    baseline = first.values["observation_summary"]["latest_ready_revision"]
    env = {**os.environ, **sandbox_env(sb)}
    killed = subprocess.run(
        [sys.executable, "-c", DIES_AFTER_THE_LEDGER, "approve", first.thread_id, "--approver", "carol"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    [fix] = _tagged(sb)
    assert fix_shares(sb, fix) == [0] and serving(sb) == {baseline: 100}  # deployed with no traffic
    plan = RemediationPlan.model_validate(first.values["plan"])
    with open_ledger(get_settings().state_dir) as store:
        made = store.applied(first.thread_id, apply_key(first.thread_id, plan))
    assert made is not None
    assert made.revision == fix  # the ledger has it; the checkpoint does not
    assert [e.event for e in audit.read(get_settings().state_dir)] == ["approval"]
    return sb, first, baseline, fix


def test_killed_after_the_ledger_records_the_apply_resumes_as_a_canary(
    sandbox_factory: Any,  # noqa: F811
    cli_on: Callable[..., CliResult],
) -> None:
    sb, first, baseline, fix = killed_after_the_ledger(sandbox_factory)
    assert_carried_on_and_promoted(sb, approve_again(cli_on, sb, first.thread_id), first, baseline, fix)


def test_a_failed_read_on_resume_is_no_verdict_verify_reads_again(
    sandbox_factory: Any,  # noqa: F811
    cli_on: Callable[..., CliResult],
) -> None:
    sb, first, baseline, fix = killed_after_the_ledger(sandbox_factory)
    # The resumed approve's reachability probe passes; apply's read of the service is refused (403: not
    # retried); verify's own reads work: the canary is carried on and promoted, nothing rolled back.
    sb.faults.inject("run:service", "hang", count=1, seconds=0.01)
    refused = sb.faults.inject("run:service", "status", status=403, count=1)
    doc = approve_again(cli_on, sb, first.thread_id)
    assert refused.fired == 1
    applied = thread_result(first.thread_id).values["applied"]
    assert_carried_on_and_promoted(sb, doc, first, baseline, fix)
    assert applied["error"] is None


def test_a_service_never_read_on_resume_is_undetermined_not_rolled_back(
    sandbox_factory: Any,  # noqa: F811
    cli_on: Callable[..., CliResult],
) -> None:
    sb, first, baseline, fix = killed_after_the_ledger(sandbox_factory, verify_deadline_s=3.0)
    sb.faults.inject("run:service", "hang", count=1, seconds=0.01)  # the reachability probe passes
    refused = sb.faults.inject("run:service", "status", status=403, count=None)
    r = cli_on(sb, "approve", first.thread_id, "--approver", "carol", "--json")
    sb.faults.clear()
    assert refused.fired >= 2  # apply's read and verify's
    assert r.returncode == 1, r.stderr  # a person must act
    doc = json.loads(r.stdout)
    assert doc["status"] == "undetermined", doc
    v = thread_result(first.thread_id).values["verification"]
    assert v["undetermined"] and not v["ok"]
    assert any("undetermined; nothing was rolled back" in why for why in v["reasons"]), v
    assert thread_result(first.thread_id).values.get("rollback") is None
    # Traffic untouched: the fix as deployed (tagged, no traffic), the serving revision still serving.
    assert fix_shares(sb, fix) == [0] and serving(sb) == {baseline: 100}
    events = [e.event for e in audit.read(get_settings().state_dir)]
    assert "rollback" not in events and events.count("mutation") == 1, events


def assert_carried_on_and_promoted(sb: Any, doc: dict[str, Any], first: Any, baseline: str, fix: str) -> None:
    assert doc["status"] == "fixed", doc
    done = thread_result(first.thread_id)
    applied = done.values["applied"]
    assert applied["already_applied"] and applied["canary"] and applied["tag"]
    assert applied["previous_ready_revision"] == baseline
    canary = done.values["verification"]["canary"]
    # Judged as a canary against the serving revision's baseline, then given every step, each once.
    assert canary["baseline_revision"] == baseline and canary["baseline"]["requests"] > 0
    assert canary["before"] is not None and [s["percent"] for s in canary["steps"]] == [10, 50, 100]
    assert canary["promoted"] and fix_shares(sb, fix) == [0, 10, 50, 100]
    assert serving(sb) == {fix: 100}
    events = [e.event for e in audit.read(get_settings().state_dir)]
    assert events == ["approval", "mutation", "mutation", "mutation", "mutation"]


def approve_again(cli_on: Callable[..., CliResult], sb: Any, thread_id: str) -> dict[str, Any]:
    """``gemma-sre approve THREAD --json`` after the killed one, in the test's own process (another
    process than the one killed, reading what it left on disk): its result."""
    r = cli_on(sb, "approve", thread_id, "--approver", "carol", "--json")
    assert r.returncode == 0, r.stderr
    return dict(json.loads(r.stdout))


def _tagged(sb: Any) -> list[str]:
    """The revisions the sandbox's journal shows deployed under a tag."""
    out: list[str] = []
    for e in sb.journal.entries():
        for t in (e.body or {}).get("traffic") or []:
            if t.get("tag") and t["revision"] not in out:
                out.append(t["revision"])
    return out


def _outcome(first: Any) -> str:
    """How a thread ended (for a failure message)."""
    done = thread_result(first.thread_id)
    return f"{done.status}: {done.summary}"
