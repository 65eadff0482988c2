"""Kill and resume: a process killed after the approval, or in the middle of applying, resumes from
the SQLite checkpoint in another process and the change is applied exactly once.

The approval is a real ``gemma-sre`` process against an in-process sandbox, killed with SIGKILL while
it waits on a Cloud Run call the sandbox holds open (fault injection), so nothing gets to clean up;
the run before it and the approve that resumes after it are the same ``main()`` in the test's own
process (``cli_on``): another process than the one killed, reading only what that one left on disk.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from graph import audit
from mcp_tools.settings import get_settings
from sandbox.testing import sandbox_env, sandbox_factory  # noqa: F401  (fixture)
from tests.conftest import CliResult
from tests.waiting import wait_until

pytestmark = pytest.mark.slow  # end to end: real processes killed and restarted

CLI = [sys.executable, "-m", "agent.cli"]


def env_for(sb: Any) -> dict[str, str]:
    return {**os.environ, **sandbox_env(sb)}


def mutations(sb: Any) -> list[Any]:
    return [e for e in sb.journal.entries() if e.method in ("POST", "PATCH", "DELETE", "PUT")]


def start_pending(sb: Any, cli_on: Callable[..., CliResult]) -> str:
    """``gemma-sre run`` without a terminal: it stops at the approval and says so."""
    svc = next(iter(sb.state()["services"])).rsplit("/", 1)[1]
    r = cli_on(sb, "run", "--service", svc, "--no-model", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["status"] == "awaiting_approval"
    assert f"gemma-sre approve {doc['thread_id']}" in r.stderr
    return str(doc["thread_id"])


def kill_while(sb: Any, thread: str, fault_target: str, ready: Callable[[], bool], *, skip: int = 0) -> None:
    """Approve in a process, hold its next ``fault_target`` call (after ``skip`` of them) open, SIGKILL
    it once ``ready()``."""
    for _ in range(skip):  # answered after a moment: consumed by the calls before the one held
        sb.faults.inject(fault_target, "hang", count=1, seconds=0.01)
    fault = sb.faults.inject(fault_target, "hang", count=1)
    p = subprocess.Popen(
        [*CLI, "approve", thread, "--approver", "carol"],
        env=env_for(sb),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        # Killed only once it is held inside that call (and whatever ``ready`` adds).
        wait_until(lambda: (fault.fired >= 1 and ready()) or p.poll() is not None, f"{fault_target} held")
        assert p.poll() is None, "the process finished before it could be killed"
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
    sb.faults.clear()


def approved_in_audit() -> bool:
    return any(e.event == "approval" for e in audit.read(get_settings().state_dir))


def finish_and_check(sb: Any, thread: str, cli_on: Callable[..., CliResult]) -> None:
    r = cli_on(sb, "approve", thread, "--approver", "carol", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["status"] == "fixed", doc
    muts = mutations(sb)
    assert len(muts) == 1, [m.model_dump() for m in muts]
    granted = audit.approved_ids(get_settings().state_dir)
    assert muts[0].model_dump().get("approval") in granted
    events = [e.event for e in audit.read(get_settings().state_dir)]
    assert events.count("approval") == 1 and events.count("mutation") == 1


# One class each, so that ``--dist loadscope`` runs the two (each a few processes) side by side.


class TestKilledBetweenApprovalAndApply:
    def test_applies_once(self, sandbox_factory: Any, cli_on: Callable[..., CliResult]) -> None:  # noqa: F811
        sb = sandbox_factory(scenario="reference-weights-oom")
        thread = start_pending(sb, cli_on)
        # approve first reads the service (is it reachable?), then apply's first call reads it: hold
        # that one, then kill the process.
        kill_while(sb, thread, "run:service", approved_in_audit, skip=1)
        assert mutations(sb) == []
        finish_and_check(sb, thread, cli_on)


class TestKilledDuringApply:
    def test_applies_once(self, sandbox_factory: Any, cli_on: Callable[..., CliResult]) -> None:  # noqa: F811
        sb = sandbox_factory(scenario="reference-weights-oom")
        thread = start_pending(sb, cli_on)
        # The PATCH is accepted; the wait for its operation is held open; then the process dies.
        kill_while(sb, thread, "run:operation", lambda: len(mutations(sb)) == 1)
        assert len(mutations(sb)) == 1
        finish_and_check(sb, thread, cli_on)
