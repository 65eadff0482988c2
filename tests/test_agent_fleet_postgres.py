"""Three ``gemma-sre watch --fleet`` replicas share one Postgres; one is killed (SIGKILL) mid-cycle.

What must hold: no service's cycle of a period finishes twice (the ledger has one row per service
and period, and the cycle numbers the replicas print, from the shared watch state, never repeat), the
cycle the dead replica was running is taken over within a lease, and every service is watched in
every round from the kill on."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from graph.leases import open_leases
from sandbox.testing import sandbox_factory  # noqa: F401  (fixture)
from tests.mcp_client import ROOT, server_env
from tests.postgres import postgres_cluster, postgres_url  # noqa: F401  (fixtures)
from tests.test_agent_fleet import check_lease_rules, deploy_services, write_fleet
from tests.waiting import wait_until

pytestmark = pytest.mark.slow  # real processes, a real Postgres, a kill

INTERVAL_S = 15.0
LEASE_S = 3.0
ROUNDS = 4
SLACK_S = 3.0  # a loaded 2-core machine: the survivors' poll, a process' stall
#: Workers per replica: the two survivors together have a free one for every service, so the dead
#: replica's cycle waits only for its lease, never for another service's cycle to end.
WORKERS = 3

_CYCLE = re.compile(r"^(\S+)/(\S+)/(\S+): cycle (\d+): .*thread (\S+)\)$")


def test_lease_rules_on_postgres(postgres_url: str, tmp_path: Path) -> None:  # noqa: F811
    with open_leases(postgres_url, tmp_path) as store:
        check_lease_rules(store)


def test_serve_and_two_replicas_on_postgres(
    postgres_url: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli: Any,
) -> None:
    """The walk-through (tests/test_agent_serve_fleet.py) with the leases, the ledger, the watch state
    and the checkpoints in Postgres."""
    from tests.test_agent_serve_fleet import flow

    monkeypatch.setenv("GEMMA_SRE_CHECKPOINT_URL", postgres_url)
    flow(tmp_path, monkeypatch, cli)


def test_replicas_share_the_fleet_and_survive_a_kill(
    postgres_url: str,  # noqa: F811
    tmp_path: Path,
    sandbox_factory: Any,  # noqa: F811
) -> None:
    sb = sandbox_factory(scenario="healthy")
    services = deploy_services(sb, healthy=4, broken=1)
    path = write_fleet(
        tmp_path / "fleet.toml",
        sb,
        services,
        workers=WORKERS,
        interval=f"{INTERVAL_S:g}s",
        lease=f"{LEASE_S:g}s",
    )
    procs = []
    for i in range(3):
        env = server_env(  # nothing shared but the database
            {"GEMMA_SRE_CHECKPOINT_URL": postgres_url, "PYTHONUNBUFFERED": "1"}, tmp_path / f"state-{i}"
        )
        cmd = [sys.executable, "-m", "agent.cli", "watch", "--fleet", str(path), "--max-cycles", str(ROUNDS)]
        out = (tmp_path / f"replica-{i}.out").open("w")
        procs.append((subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT), out))
    victim = procs[0][0]
    prefix = f"{socket.gethostname()}-{victim.pid}-"
    try:
        with open_leases(postgres_url, tmp_path) as store:
            killed_at, killed_rows = _kill_mid_cycle(store, victim, prefix)
            for i, (p, _out) in enumerate(procs[1:], start=1):
                assert p.wait(timeout=ROUNDS * INTERVAL_S + 60) == 0, (
                    tmp_path / f"replica-{i}.out"
                ).read_text()
            runs = store.runs()
    finally:
        for p, out in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            out.close()
    texts = [(tmp_path / f"replica-{i}.out").read_text() for i in range(3)]
    if os.environ.get("FLEET_TEST_SHOW"):
        print(*texts, *runs, sep="\n")

    # The ledger: each service and period once; the dead replica's cycle finished by another, once.
    by_service: dict[str, list[Any]] = defaultdict(list)
    for r in runs:
        by_service[r.service_key].append(r)
    assert len(by_service) == len(services)
    taken = [r for r in runs if r.previous_holder and r.previous_holder.startswith(prefix)]
    assert killed_rows and {(r.service_key, r.period) for r in taken} == killed_rows
    for r in taken:
        assert r.status == "done" and r.attempts == 2 and not r.holder.startswith(prefix)
        assert r.started_at - killed_at <= LEASE_S + SLACK_S, "a dead replica's cycle waited past its lease"
    assert not [r for r in runs if r.status == "running" and not r.holder.startswith(prefix)]

    # The cycles the replicas say they finished: every one in the ledger, none twice.
    printed: dict[str, list[int]] = defaultdict(list)
    threads: list[str] = []
    for text in texts:
        for line in text.splitlines():
            m = _CYCLE.match(line.strip())
            if m:
                printed[m.group(3)].append(int(m.group(4)))
                threads.append(m.group(5))
    assert len(threads) == len(set(threads))
    for key, rows in by_service.items():
        service = _service_of(key, services)
        done = [r for r in rows if r.status == "done"]
        assert sorted(printed[service]) == list(range(1, len(done) + 1)), (service, printed[service])
        # Watched in every round from the kill on (the first may skip: every replica starts cold).
        kill_period = min(p for _, p in killed_rows)
        last = max(r.period for r in runs)
        assert {r.period for r in done} >= set(range(kill_period, last + 1)), (service, rows)
    # The replicas shared the rounds; nothing was applied without an approval.
    assert len({r.holder for r in runs if r.status == "done"}) >= 2
    assert not [e for e in sb.journal.entries() if e.method != "GET"]


def _service_of(key: str, services: list[str]) -> str:
    (name,) = [s for s in services if f"_{s}-" in key or key.endswith(f"_{s}")]
    return name


def _kill_mid_cycle(store: Any, victim: subprocess.Popen[bytes], prefix: str) -> tuple[float, set[Any]]:
    """SIGKILL ``victim`` while it is running a cycle, after its first round, early enough in the
    round that its lease expires before the round's deadline; (when, its rows)."""
    first_period = None

    def in_a_cycle_to_kill() -> bool:
        nonlocal first_period
        assert victim.poll() is None, "the replica to kill ended on its own"
        runs = store.runs()
        if first_period is None and runs:
            first_period = min(r.period for r in runs)
        now = store.now()
        mine = {
            (r.service_key, r.period)
            for r in runs
            if r.status == "running"
            and r.holder.startswith(prefix)
            and first_period is not None
            and r.period == int(now // INTERVAL_S) > first_period
        }
        return bool(mine) and now % INTERVAL_S <= INTERVAL_S - LEASE_S - 1 - SLACK_S - 1

    # the replica's whole life, a slow start included
    wait_until(
        in_a_cycle_to_kill,
        "a cycle of the replica to kill it in",
        timeout_s=ROUNDS * INTERVAL_S + 60,
        every_s=0.05,
    )
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    at = store.now()
    rows = {
        (r.service_key, r.period)
        for r in store.runs()
        if r.status == "running" and r.holder.startswith(prefix)
    }
    return at, rows
