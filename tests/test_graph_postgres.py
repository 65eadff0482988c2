"""The Postgres checkpointer (``GEMMA_SRE_CHECKPOINT_URL=postgresql://...``): a thread stopped at the
approval in one connection is decided through another. Runs against a throw-away local Postgres
cluster; skipped when the server binaries or the optional extra are not installed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from mcp_tools.settings import get_settings
from tests.concurrency import at_once
from tests.postgres import postgres_cluster, postgres_url  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow  # end to end: a throw-away PostgreSQL cluster is created and started


def test_postgres_checkpoints_resume_a_thread(
    postgres_url: str,  # noqa: F811
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
    from langgraph.checkpoint.postgres import PostgresSaver

    from agent.readouts import pending_threads

    with monkeypatch.context() as m:
        m.setattr(PostgresSaver, "list", lambda *_a, **_k: pytest.fail("threads read through list()"))
        assert [p.thread_id for p in pending_threads()] == [first.thread_id]  # one aggregate query
    t = time.monotonic()
    done = resume_cycle(first.thread_id, decision="approve", approver="dana")
    assert done.status == "fixed", done.summary
    assert time.monotonic() - t < 60


from sandbox.testing import sandbox_factory  # noqa: E402,F401  (fixture)


def test_postgres_threads_come_from_one_query(
    postgres_url: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from graph.checkpoint import open_checkpointer
    from tests.test_graph_threads import check_query_path

    with open_checkpointer(postgres_url, tmp_path) as saver:
        check_query_path(saver, monkeypatch)


def test_postgres_threads_of_a_pooled_saver_come_from_one_query(
    postgres_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ``PostgresSaver`` on a connection pool (as an application builds one): the same query, on a
    connection borrowed from the pool."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    from tests.test_graph_threads import check_query_path

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with ConnectionPool(postgres_url, min_size=1, max_size=2, kwargs=kwargs, open=True) as pool:
        saver = PostgresSaver(pool)
        saver.setup()
        check_query_path(saver, monkeypatch)


def test_postgres_one_decision_per_plan(
    postgres_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    sandbox_factory: Any,  # noqa: F811
    cli_workers: list[Any],
) -> None:
    """The decisions table and the thread lease on Postgres: connections claiming at once get one
    winner, and approve/reject processes racing on a thread record one decision, apply at most once."""
    from graph.checkpoint import DecisionRecord, open_decisions, thread_lease
    from tests.test_graph_decisions import (
        answer,
        broken_services,
        check_round,
        cli_env,
        decision_args,
        pending,
    )

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
        pair = list(zip(("approve", "reject"), cli_workers, strict=True))
        for d, w in pair:
            w.start(*decision_args(d, thread), env=cli_env(sb))
        check_round(sb, service, thread, [(d, *answer(w.result())) for d, w in pair])
    assert not (state / "checkpoints.sqlite").exists()  # decisions went to Postgres too


def connections(url: str) -> dict[str, int]:
    """The other sessions on ``url``'s database, by ``application_name`` (gemma-sre names its own)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT application_name, count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() GROUP BY application_name"
        ).fetchall()
    return {str(name): int(n) for name, n in rows}


def test_postgres_no_ledger_connection_is_open_while_apply_waits_on_cloud_run(
    postgres_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    sandbox_factory: Any,  # noqa: F811
    cli_on: Any,
) -> None:
    """``gemma-sre approve`` as a process: while the sandbox holds the deploy's operation open (minutes on
    the real API), the process keeps its checkpointer and its thread lease, and no ledger connection;
    killed there, the next approve applies exactly once."""
    from graph.checkpoint import open_ledger
    from tests.test_graph_resume import finish_and_check, kill_while, mutations, start_pending

    monkeypatch.setenv("GEMMA_SRE_CHECKPOINT_URL", postgres_url)
    get_settings.cache_clear()
    with open_ledger(get_settings().state_dir):  # a ledger's connection is seen, by its name
        assert connections(postgres_url).get("gemma-sre ledger") == 1
    sb = sandbox_factory(scenario="reference-weights-oom")
    thread = start_pending(sb, cli_on)
    seen: list[dict[str, int]] = []

    def waiting() -> bool:  # the PATCH was sent and its operation is held: apply is in the wait
        seen.append(connections(postgres_url))
        return len(mutations(sb)) == 1 and seen[-1].get("gemma-sre lease") == 1

    kill_while(sb, thread, "run:operation", waiting)
    assert seen[-1] == {"gemma-sre checkpoints": 1, "gemma-sre lease": 1}  # held for the run; no ledger
    finish_and_check(sb, thread, cli_on)


def test_langgraph_server_keeps_its_ledger_in_postgres(
    postgres_url: str,  # noqa: F811
    tmp_path: Path,
    sandbox_factory: Any,  # noqa: F811
) -> None:
    """Under LangGraph Server (its checkpointer, not ours) with GEMMA_SRE_LEDGER_URL on Postgres and a
    state directory of the server's own: decisions, applies and the audit's approvals are in Postgres,
    where another replica finds them; one apply, a replayed run sends nothing, a second decision is
    refused."""
    from tests.test_graph_server import langgraph_dev, one_cycle  # skips when LangGraph Server is absent

    sb = sandbox_factory(scenario="kv-starvation")
    server_state = tmp_path / "server-state"
    with langgraph_dev(
        tmp_path / "server", GEMMA_SRE_LEDGER_URL=postgres_url, GEMMA_SRE_STATE_DIR=str(server_state)
    ) as url:
        one_cycle(url, sb, ledger_url=postgres_url, state_dir=tmp_path / "elsewhere")
    assert not (server_state / "checkpoints.sqlite").exists()  # nothing of the ledger went to SQLite
