"""Watch mode against the sandbox: an incident starts, is reported once (webhook included), waits for
approval without blocking observation, survives a restart, is fixed after approval, and resolves."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agent.commands.repl import sandbox_configuration
from agent.incidents_tracker import TrackerStore
from agent.watch import Watcher, parse_interval
from graph.runner import resume_cycle
from mcp_tools.errors import UserError
from sandbox.serve import start_in_thread
from sandbox.testing import sandbox_factory  # noqa: F401  (fixture)
from tests.loop_support import LoopOn, loop_on  # noqa: F401  (fixture)
from tests.mcp_client import server_env


@pytest.fixture
def receiver() -> Iterator[tuple[list[dict[str, Any]], str]]:
    got: list[dict[str, Any]] = []

    async def hook(request: Request) -> JSONResponse:
        got.append(json.loads(await request.body()))
        return JSONResponse({"ok": True})

    base, stop = start_in_thread(Starlette(routes=[Route("/hook/secret", hook, methods=["POST"])]))
    try:
        yield got, f"{base}/hook/secret"
    finally:
        stop()


def test_parse_interval() -> None:
    assert parse_interval("60s") == 60 and parse_interval("5m") == 300 and parse_interval("2") == 2
    for bad in ("soon", "0.5s", ""):
        with pytest.raises(UserError):
            parse_interval(bad)


def test_incident_start_approval_fix_resolution_with_restart_and_webhook(
    loop_on: LoopOn,  # noqa: F811
    receiver: tuple[list[dict[str, Any]], str],
) -> None:
    got, url = receiver
    sb, cfg = loop_on("reference-weights-oom")
    w = Watcher(cfg, webhook=url)
    store = w.store

    c1 = w.cycle()  # the incident starts: reported once, a plan waits for a decision
    assert [(e.kind, e.incident.category) for e in c1.events] == [("new", "weights_oom")]
    assert c1.status == "awaiting_approval" and c1.pending_thread == c1.thread_id
    assert c1.events[0].incident.thread_id == c1.thread_id
    assert len(got) == 1 and got[0]["text"].startswith("New incident: weights_oom on gemma-4-12b")
    assert f"gemma-sre approve {c1.thread_id}" in json.dumps(got[0]["blocks"])
    assert sb.journal.entries() == []

    c2 = w.cycle()  # still broken, still waiting: observed, not reported again, no second plan
    assert c2.events == [] and c2.pending_thread == c1.thread_id and c2.status == "diagnosed"
    assert len(got) == 1 and sb.journal.entries() == []

    # Restart: a new watcher reads the tracker from disk and the threads from the checkpointer.
    w2 = Watcher(cfg, webhook=url)
    assert w2.state.pending_thread == c1.thread_id and w2.state.cycle == 2
    c3 = w2.cycle()
    assert c3.events == [] and len(got) == 1

    # A person approves (another process would do the same through the checkpointer).
    done = resume_cycle(c1.thread_id, decision="approve", approver="oncall", live=cfg)
    assert done.status == "fixed", done.summary
    writes = sb.journal.entries()
    assert len(writes) == 1 and writes[0].approval

    c4 = w2.cycle()  # healthy now: the incident resolves, with the remediation's outcome
    assert c4.finished_thread == c1.thread_id and c4.finished_status == "fixed"
    assert c4.healthy is True and c4.pending_thread is None
    assert [(e.kind, e.incident.category) for e in c4.events] == [("resolved", "weights_oom")]
    assert "fixed" in c4.events[0].reason
    assert len(got) == 2 and got[1]["text"].startswith("Incident resolved: weights_oom")

    c5 = w2.cycle()  # nothing new: silence, and nothing else applied
    assert c5.events == [] and len(got) == 2 and len(sb.journal.entries()) == 1
    saved = store.load()
    assert saved.cycle == 5 and saved.open_incidents() == []
    [inc] = saved.incidents.values()
    assert inc.status == "resolved" and inc.outcome == "fixed" and inc.thread_id == c1.thread_id
    assert saved.since is not None


def test_a_read_only_watch_runs_one_cycle_and_reports_the_incident_from_it(
    sandbox_factory: Callable[..., Any],  # noqa: F811
) -> None:
    from graph.runner import compiled_graph
    from mcp_tools.settings import Policy

    def threads() -> set[str]:
        with compiled_graph(cfg.state_path) as g:
            return {t.config["configurable"]["thread_id"] for t in g.checkpointer.list(None)}

    def reports() -> set[Path]:
        return set((cfg.state_path / "reports").glob("*.json"))

    sb = sandbox_factory(scenario="reference-weights-oom")
    cfg = sandbox_configuration(sb, service=None, policy=Policy.READ_ONLY)
    threads_before, reports_before = threads(), reports()
    w = Watcher(cfg)
    c1 = w.cycle()
    assert [(e.kind, e.incident.category) for e in c1.events] == [("new", "weights_oom")]
    assert c1.status == "diagnosed" and c1.pending_thread is None
    assert c1.events[0].incident.thread_id == c1.thread_id
    assert threads() - threads_before == {c1.thread_id}  # one run: the look is the incident's thread
    (report,) = reports() - reports_before
    doc = json.loads(report.read_text())
    assert doc["thread_id"] == c1.thread_id and doc["diagnosis"]["category"] == "weights_oom"
    assert doc["outcome"]["status"] == "diagnosed"
    from graph.runner import thread_result

    found = thread_result(c1.thread_id, state_dir=cfg.state_path)  # as get_incident_report reads it
    assert found.status == "diagnosed" and Path(found.report["json"]) == report
    assert Path(found.report["markdown"]).read_text().strip()
    c2 = w.cycle()  # still broken: observed, no second report
    assert c2.events == [] and reports() - reports_before == {report}
    assert sb.journal.entries() == []


@pytest.mark.slow  # several real cycles on a sandbox
def test_run_loop_counts_cycles_degrades_and_survives_a_failing_cycle(
    tmp_path: Path,
    loop_on: LoopOn,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    sb, cfg = loop_on("healthy")
    cfg = cfg.model_copy(update={"retries": 1})
    w = Watcher(cfg)
    seen: list[Any] = []
    sleeps: list[float] = []
    n = w.run(interval_s=0.5, max_cycles=2, on_cycle=seen.append, sleep=sleeps.append)
    assert n == 2 and [s.cycle for s in seen] == [1, 2] and len(sleeps) == 1
    assert all(s.events == [] and s.healthy for s in seen)
    sb.stop()  # nothing answers now: a degraded observation (health unknown), not a crash or an incident
    seen.clear()
    assert w.run(interval_s=0.01, max_cycles=1, on_cycle=seen.append, sleep=lambda s: None) == 1
    assert [(s.healthy, s.events) for s in seen] == [(None, [])]
    # A cycle that raises (its state file cannot be written) is logged, and the loop goes on.
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    broken = Watcher(cfg, store=TrackerStore(blocker / "w.json"))
    seen.clear()
    with caplog.at_level("WARNING"):
        assert broken.run(interval_s=0.01, max_cycles=2, on_cycle=seen.append, sleep=lambda s: None) == 2
    assert seen == [] and caplog.text.count("watch cycle failed") == 2


def ctrl_c_watch(state: Path, once: str, wait_s: float = 180) -> tuple[int, str]:
    """``gemma-sre watch --sandbox`` as a process, sent SIGINT once a line starting with ``once`` is
    out: (exit code, everything it printed). Every wait is bounded and says what it saw."""
    exe = Path(sys.executable).parent / "gemma-sre"
    p = subprocess.Popen(
        [str(exe), "watch", "--sandbox", "--interval", "1s"],
        env=server_env({}, state),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()  # its output, read by a thread: waits stay bounded

    def pump() -> None:
        for line in p.stdout or []:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    said: list[str] = []
    try:
        deadline = time.monotonic() + wait_s
        while not any(x.startswith(once) for x in said):
            left = deadline - time.monotonic()
            assert left > 0, f"no line starting {once!r} within {wait_s:g} s:\n" + "".join(said)
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                ended = p.wait(timeout=30)
                raise AssertionError(f"the watch ended (exit {ended}) before {once!r}:\n" + "".join(said))
            said.append(line)
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            while not lines.empty():
                said.append(lines.get_nowait() or "")
            raise AssertionError("Ctrl-C did not stop the watch within 60 s:\n" + "".join(said)) from None
        while (line := lines.get(timeout=30)) is not None:
            said.append(line)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, "".join(said)


def test_ctrl_c_inside_an_asyncio_run_whose_call_absorbs_the_cancellation_still_stops() -> None:
    """``asyncio.run`` turns SIGINT into a cancellation of its task; a call that finishes anyway loses the
    interrupt (the watch would go on to its next cycle). Under ``ctrl_c_raises`` it raises where it lands.
    The signal is sent from inside the running loop, so it always finds asyncio's handler or ours."""
    import asyncio
    import os

    from agent.interrupts import ctrl_c_raises

    async def call_that_finishes_anyway() -> str:
        os.kill(os.getpid(), signal.SIGINT)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return "absorbed"
        return "slept"

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own, as a CLI has it
    try:
        assert asyncio.run(call_that_finishes_anyway()) == "absorbed"  # the interrupt is lost
        with pytest.raises(KeyboardInterrupt), ctrl_c_raises():
            asyncio.run(call_that_finishes_anyway())
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back as it was
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.slow  # end to end: the watch process, stopped by a signal
def test_cli_watch_in_the_sandbox_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    # Ctrl-C once the second cycle is reported (a stop during start-up is the next test's).
    code, out = ctrl_c_watch(tmp_path / "state", once="cycle 2:")
    assert code == 0, out
    assert out.count("NEW weights_oom") == 1, out
    assert "waiting for a decision: gemma-sre approve gemma-4-12b-" in out
    assert "stopped (cycle" in out and "Traceback" not in out, out
    assert (
        len(list((tmp_path / "state" / "watch").glob("sandbox-project_sandbox-region1_gemma-4-12b-*.json")))
        == 1
    )


@pytest.mark.slow  # end to end: the watch process, stopped by a signal
def test_cli_watch_stopped_while_it_starts_says_so(tmp_path: Path) -> None:
    """Ctrl-C while the sandbox has just started (before or during the first cycle): the same clean
    stop, not typer's silent exit 130."""
    code, out = ctrl_c_watch(tmp_path / "state", once="sandbox: decide")
    assert code == 0, out
    assert "stopped before the first cycle" in out or "stopped (cycle" in out, out
    assert "Traceback" not in out, out
