"""The Postgres checkpointer (``GEMMA_SRE_CHECKPOINT_URL=postgresql://...``): a thread stopped at the
approval in one connection is decided through another. Runs against a throw-away local Postgres
cluster; skipped when the server binaries or the optional extra are not installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_tools.settings import get_settings
from tests.concurrency import at_once
from tests.scripted_openai import free_port

pytestmark = pytest.mark.slow  # end to end: a throw-away PostgreSQL cluster is created and started
pytest.importorskip("langgraph.checkpoint.postgres")
if not (shutil.which("initdb") and shutil.which("pg_ctl")):
    pytest.skip("no local PostgreSQL server binaries", allow_module_level=True)


@pytest.fixture(scope="module")
def postgres_cluster() -> Iterator[str]:
    """One throw-away cluster for the module (initdb and a start cost seconds); each test gets its
    own database in it (``postgres_url``)."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="gemma-sre-pg-"))  # not under pytest's 0700 root directory
    data = base / "pg"
    port = free_port()
    env = {**os.environ, "LC_ALL": "C"}
    run_as: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run the cluster as nobody in a directory it owns
        shutil.chown(base, "nobody")
        run_as = ["runuser", "-u", "nobody", "--"]
    subprocess.run(
        [*run_as, "initdb", "-D", str(data), "-U", "gemma", "--auth=trust", "--encoding=UTF8", "--locale=C"],
        check=True,
        capture_output=True,
        env=env,
    )
    # The server outlives pg_ctl: give it a log file, not our pipes (or run() waits for it forever).
    subprocess.run(
        [
            *run_as,
            "pg_ctl",
            "-D",
            str(data),
            "-l",
            str(base / "server.log"),
            "-w",
            "-t",
            "30",
            "-o",
            f"-p {port} -k {base} -h 127.0.0.1",
            "start",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        timeout=60,
    )
    try:
        yield f"postgresql://gemma@127.0.0.1:{port}"
    finally:
        subprocess.run(
            [*run_as, "pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
        )
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_cluster: str, request: pytest.FixtureRequest) -> str:
    """A fresh database of its own for each test, in the module's cluster."""
    import psycopg

    name = "t_" + "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:40]
    with psycopg.connect(f"{postgres_cluster}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{postgres_cluster}/{name}"


def test_postgres_checkpoints_resume_a_thread(
    postgres_url: str,
    monkeypatch: pytest.MonkeyPatch,
    sandbox_factory: Any,  # noqa: F811
) -> None:
    from graph.config import Configuration
    from graph.runner import resume_cycle, run_cycle

    monkeypatch.setenv("GEMMA_SRE_CHECKPOINT_URL", postgres_url)
    get_settings.cache_clear()
    sb = sandbox_factory(scenario="kv-starvation")
    cfg = Configuration.from_settings(
        service="llama-3-8b",
        **sb.settings_fields(),
        use_model=False,
        verify_poll_s=0.05,
    )
    first = run_cycle(cfg)
    assert first.status == "awaiting_approval"
    assert not (get_settings().state_dir / "checkpoints.sqlite").exists()  # nothing went to SQLite
    t = time.monotonic()
    done = resume_cycle(first.thread_id, decision="approve", approver="dana")
    assert done.status == "fixed", done.summary
    assert time.monotonic() - t < 60


from sandbox.testing import sandbox_factory  # noqa: E402,F401  (fixture)


def test_postgres_one_decision_per_plan(
    postgres_url: str,
    monkeypatch: pytest.MonkeyPatch,
    sandbox_factory: Any,  # noqa: F811
) -> None:
    """The decisions table and the thread lease on Postgres: connections claiming at once get one
    winner, and approve/reject processes racing on a thread record one decision, apply at most once."""
    from graph.checkpoint import DecisionRecord, open_decisions, thread_lease
    from tests.test_graph_decisions import broken_services, check_round, finish, pending, spawn

    monkeypatch.setenv("GEMMA_SRE_CHECKPOINT_URL", postgres_url)
    get_settings.cache_clear()
    state = get_settings().state_dir

    def claim(i: int) -> bool:
        with open_decisions(postgres_url, state) as store:
            rec = DecisionRecord(
                thread_id="t", plan_key="k", decision="approve", principal=f"p{i}", approval_id="a", at="1"
            )
            return store.claim(rec)[0]

    assert sorted(at_once(claim)) == [False] * 7 + [True]
    with thread_lease(postgres_url, state, "t") as first, thread_lease(postgres_url, state, "t") as second:
        assert first and not second
    with thread_lease(postgres_url, state, "t") as again:
        assert again  # released with its connection

    sb = sandbox_factory(scenario="healthy")
    for service in broken_services(sb, 4):
        thread = pending(sb, service)
        procs = [
            (d, spawn(sb, d, thread, *(["--reason", "race"] if d == "reject" else [])))
            for d in ("approve", "reject")
        ]
        answers = []
        for d, p in procs:
            code, doc, _ = finish(p)
            answers.append((d, code, doc))
        check_round(sb, service, thread, answers)
    assert not (state / "checkpoints.sqlite").exists()  # decisions went to Postgres too


def test_langgraph_server_keeps_its_ledger_in_postgres(
    postgres_url: str,
    tmp_path: Path,
    sandbox_factory: Any,  # noqa: F811
) -> None:
    """Under LangGraph Server (its checkpointer, not ours) with GEMMA_SRE_LEDGER_URL on Postgres and a
    state directory of the server's own: decisions, applies and the audit's approvals are in Postgres,
    where another replica finds them; one apply, a replayed run sends nothing, a second decision is
    refused."""
    pytest.importorskip("langgraph_api")
    from tests.test_graph_server import langgraph_dev, one_cycle

    sb = sandbox_factory(scenario="kv-starvation")
    server_state = tmp_path / "server-state"
    with langgraph_dev(
        tmp_path / "server", GEMMA_SRE_LEDGER_URL=postgres_url, GEMMA_SRE_STATE_DIR=str(server_state)
    ) as url:
        one_cycle(url, sb, ledger_url=postgres_url, state_dir=tmp_path / "elsewhere")
    assert not (server_state / "checkpoints.sqlite").exists()  # nothing of the ledger went to SQLite
