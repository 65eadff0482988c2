"""``gemma-sre watch --fleet``: the fleet file, the lease store's rules, and rounds of a fleet against a
sandbox holding several services (SQLite here; several replicas on Postgres: test_agent_fleet_postgres)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from graph.leases import LeaseLost, open_leases
from mcp_tools.settings import get_settings
from sandbox.scenarios import scenario_specs
from sandbox.testing import sandbox_factory  # noqa: F401  (fixture)
from tests.waiting import wait_until


def deploy_services(sb: Any, healthy: int, broken: int = 0) -> list[str]:
    """``healthy`` Ready services and ``broken`` ones failing with a weights OOM, in one sandbox."""
    good = scenario_specs("healthy")[0][0]
    bad = scenario_specs("reference-weights-oom")[0][0]
    names = []
    for i in range(healthy):
        names.append(f"svc-{i}")
        sb.deploy(good.model_copy(update={"name": names[-1]}))
    for i in range(broken):
        names.append(f"broken-{i}")
        sb.deploy(bad.model_copy(update={"name": names[-1]}))
    sb.settle()
    return names


def write_fleet(path: Path, sb: Any, services: list[str], **fleet: Any) -> Path:
    """A fleet file for ``services`` of the sandbox ``sb`` (analyzers only, policy approve)."""
    opts = "".join(f"{k} = {v!r}\n" if isinstance(v, str) else f"{k} = {v}\n" for k, v in fleet.items())
    path.write_text(
        f"[fleet]\n{opts}\n"
        "[defaults]\n"
        f'project = "{sb.project}"\nregion = "{sb.location}"\n'
        f'run_api_endpoint = "{sb.url}"\nlogging_api_endpoint = "{sb.url}"\n'
        'anonymous_credentials = true\nuse_model = false\npolicy = "approve"\n\n'
        + "".join(f'[[services]]\nservice = "{s}"\nslo = {{ availability = 0.999 }}\n' for s in services),
        encoding="utf-8",
    )
    return path


def test_leases_one_holder_expiry_takeover_and_fencing(tmp_path: Path) -> None:
    with open_leases(None, tmp_path) as store:
        check_lease_rules(store)


def wait_until_expired(store: Any, key: str, timeout_s: float = 30.0) -> None:
    """Until the store itself no longer counts ``key``'s lease as live (its own clock, not a sleep)."""
    wait_until(
        lambda: key not in store.live_leases(), f"the lease on {key!r} still live", timeout_s=timeout_s
    )


def check_lease_rules(store: Any) -> None:
    """The lease store's rules, on SQLite here and on Postgres in test_agent_fleet_postgres."""
    # Held for 30 s: a loaded machine's stalls between these statements cannot expire it.
    a = store.acquire("svc", "a", ttl_s=30)
    assert a is not None and store.acquire("svc", "b", ttl_s=30) is None  # held
    run = store.claim_run(a, period=7)
    assert run is not None and run.attempts == 1 and run.status == "running"
    assert store.renew(a, ttl_s=0.5)  # a's last renewal: it now expires half a second from here
    wait_until_expired(store, "svc")  # a stops renewing (killed): the lease expires
    assert not store.renew(a, ttl_s=0.5)
    b = store.acquire("svc", "b", ttl_s=30)
    assert b is not None and b.token > a.token
    taken = store.claim_run(b, period=7)  # a's cycle never finished: b runs it
    assert taken is not None and taken.attempts == 2 and taken.previous_holder == "a"
    with pytest.raises(LeaseLost):
        store.finish_run(a, 7, "done", state='{"cycle": 1}')  # a's late write is fenced off
    assert store.load_state("svc") is None  # ... the state too (one transaction)
    store.finish_run(b, 7, "done", state='{"cycle": 1}')
    assert store.claim_run(b, period=7) is None  # a settled period is never run again
    assert not store.skip("svc", 7, "c", "late")  # ... nor marked skipped
    assert store.skip("svc", 8, "c", "nobody reached it")
    store.release(b)
    c = store.acquire("svc", "c", ttl_s=30)
    assert c is not None and c.token == b.token + 1  # released: free at once
    assert [(r.period, r.status, r.holder) for r in store.runs("svc")] == [
        (7, "done", "b"),
        (8, "skipped", "c"),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[fleet]\nworkers = 0\n[[services]]\nservice = 'a'\n", "bad value for 'fleet.workers'"),
        ("[[services]]\nservice = 'Bad_Name'\n", "bad value for 'services[0].service'"),
        ("[[services]]\nservice = 'a'\npolicy = 'yolo'\n", "'yolo' is not one of read-only"),
        ("[[services]]\nservice = 'a'\nmodel_url = 'ftp://x'\n", "bad value for 'services[0].model_url'"),
        ("[fleet]\ninterval = 'soon'\n[[services]]\nservice = 'a'\n", "not a duration like 30s"),
        ("[fleet]\ninterval = '10s'\ndeadline = '20s'\n[[services]]\nservice = 'a'\n", "longer than"),
        ("[[services]]\nservice = 'a'\n[[services]]\nservice = 'a'\n", "listed twice"),
        ("[[services]]\nservice = 'a'\ncolour = 'red'\n", "unknown key 'services[0].colour'"),
        ("[fleet]\nworkers = 2\n", "missing required key 'services'"),
        (
            "[[services]]\nservice = 'a'\nslo = { availabilty = 0.99 }\n",
            "unknown key 'services[0].slo.availabilty'",
        ),
        (
            "[[services]]\nservice = 'a'\nslo = { availability = 2 }\n",
            "bad value for 'services[0].slo.availability'",
        ),
        ("[fleet\n", "not valid TOML"),
    ],
)
def test_bad_fleet_file_is_one_line_exit_2(cli: Any, tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "fleet.toml"
    path.write_text(text, encoding="utf-8")
    res = cli("watch", "--fleet", str(path))
    assert res.returncode == 2
    assert message in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_fleet_flags_that_belong_in_the_file(cli: Any, tmp_path: Path) -> None:
    res = cli("watch", "--fleet", str(tmp_path / "none.toml"))
    assert res.returncode == 2 and "no such file" in res.stderr
    path = tmp_path / "fleet.toml"
    path.write_text("[[services]]\nservice = 'a'\n", encoding="utf-8")
    res = cli("watch", "--fleet", str(path), "--service", "b")
    assert res.returncode == 2 and "--service is set per service in the fleet file" in res.stderr


@pytest.mark.slow
def test_fleet_rounds_carry_each_service_on(cli: Any, tmp_path: Path, sandbox_factory: Any) -> None:  # noqa: F811
    """Two rounds of four services (one broken) with two workers: each service's cycle once a round,
    the broken one's plan waiting for a decision and not planned again, the ledger saying so.

    Rounds of 20 s: a round may start with half its time left, and on a busy machine a cycle takes 5 s
    or more (two per worker)."""
    sb = sandbox_factory(scenario="healthy")
    services = deploy_services(sb, healthy=3, broken=1)
    path = write_fleet(tmp_path / "fleet.toml", sb, services, workers=2, interval="20s", lease="3s")
    res = cli("watch", "--fleet", str(path), "--max-cycles", "2")
    assert res.returncode == 0, res.stderr
    assert "4 service(s) every 20s with 2 worker(s)" in res.stdout
    assert res.stdout.count("4 cycle(s) here") == 2, res.stdout
    assert f"NEW weights_oom on {sb.project}/{sb.location}/broken-0" in res.stdout
    assert "a plan already waits for a decision" in res.stdout  # round 2 carried round 1's state
    s = get_settings()
    with open_leases(s.checkpoint_url, s.state_dir) as store:
        runs = store.runs()
    assert len(runs) == 8 and {r.status for r in runs} == {"done"}
    assert sorted(r.detail for r in runs) == ["cycle 1"] * 4 + ["cycle 2"] * 4
    assert {len({r.period for r in runs if r.service_key == k}) for k in {r.service_key for r in runs}} == {2}
    assert not [e for e in sb.journal.entries() if e.method != "GET"]  # nothing applied unapproved


def test_services_not_reached_by_the_deadline_are_skipped(
    tmp_path: Path,
    sandbox_factory: Any,  # noqa: F811
) -> None:
    """One worker, a round of 6 s, and a service whose Cloud Run reads hang (its cycle runs to the
    round's deadline): the services after it are reported and recorded as skipped, not silently
    dropped. (A round of 2 s could end before a busy machine started even the first cycle.)"""
    from agent.fleet import FleetWatcher, load_fleet

    sb = sandbox_factory(scenario="healthy")
    services = deploy_services(sb, healthy=3)
    path = write_fleet(tmp_path / "fleet.toml", sb, services, workers=1, interval="6s", lease="3s")
    sb.faults.inject(target="svc-0", kind="hang", count=None, seconds=30)  # longer than the round
    s = get_settings()
    reports = []
    with open_leases(s.checkpoint_url, s.state_dir) as store:
        fw = FleetWatcher(load_fleet(path), store)
        fw.configs = dict(sorted(fw.configs.items(), key=lambda kv: kv[1].service))
        fw.shuffle = False
        fw.run(max_rounds=1, on_round=reports.append)
        runs = store.runs()
    (report,) = reports
    skipped = [r.service for r in report.services if r.status == "skipped"]
    assert skipped and all(not name.endswith("svc-0") for name in skipped)
    assert "skipped (not reached before the deadline)" in report.line()
    assert {r.service_key for r in runs if r.status == "skipped"} == {
        k for k, c in fw.configs.items() if c.service in {n.rsplit("/", 1)[1] for n in skipped}
    }


def test_each_service_gets_its_own_policy_endpoint_and_region(tmp_path: Path) -> None:
    from agent.fleet import load_fleet
    from mcp_tools.settings import Policy

    path = tmp_path / "fleet.toml"
    path.write_text(
        '[defaults]\npolicy = "suggest"\nmodel_url = "http://10.0.0.5:8000/v1"\nproject = "team-a"\n'
        "slo = { ttft_p95_s = 1.5 }\n"
        '[[services]]\nservice = "gemma"\nregion = "us-central1"\nslo = { availability = 0.99 }\n'
        '[[services]]\nservice = "gemma"\nregion = "europe-west4"\npolicy = "auto"\n'
        'auto_kinds = ["restart"]\nmodel_url = "http://10.0.0.6:8000/v1"\ncycle_deadline = "2m"\n'
        '[[services]]\nservice = "llama"\nproject = "team-b"\nregion = "us-east4"\nuse_model = false\n',
        encoding="utf-8",
    )
    a, b, c = load_fleet(path).configurations()
    assert (a.project, a.location, a.policy, a.model_url) == (
        "team-a",
        "us-central1",
        Policy.SUGGEST,
        "http://10.0.0.5:8000/v1",
    )
    assert (b.location, b.policy, b.auto_kinds, b.model_url, b.cycle_deadline_s) == (
        "europe-west4",
        Policy.AUTO,
        ["restart"],
        "http://10.0.0.6:8000/v1",
        120.0,
    )
    assert (c.project, c.service, c.use_model) == ("team-b", "llama", False)
    assert (a.slo.availability, a.slo.ttft_p95_s) == (0.99, 1.5)  # its own, then [defaults]'
    assert (b.slo.availability, b.slo.ttft_p95_s) == (0.999, 1.5)  # [defaults]', then SloConfig's
