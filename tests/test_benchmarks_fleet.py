"""benchmarks/bench_fleet.py on a real local Postgres: every run measures its own ledger (a fresh schema,
dropped afterwards), so a second run never counts the first one's cycles."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from tests.postgres import postgres_cluster, postgres_url  # noqa: F401  (fixtures)

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_fleet.py"


@pytest.mark.slow  # two benchmark runs: a sandbox process and a watcher replica each
def test_each_run_counts_only_its_own_cycles(
    postgres_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import psycopg

    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # the script imports its _support module
    bench = runpy.run_path(str(SCRIPT))
    first = bench["one_run"](2, 2, 30, postgres_url)
    second = bench["one_run"](2, 2, 30, postgres_url)
    assert (first["cycles"], second["cycles"]) == (2, 2)
    assert first["failed"] == second["failed"] == 0
    with psycopg.connect(postgres_url) as conn:
        left = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'bench_fleet_%'").fetchall()
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
    assert left == [] and tables == []  # the runs' schemas are gone; nothing was written beside them
