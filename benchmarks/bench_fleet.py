"""A fleet replica's throughput and memory for 10, 100 and 500 sandbox services (analyzers only).

    .venv/bin/python benchmarks/bench_fleet.py [--sizes 10,100,500] [--runs 3] [--workers 4]
        [--round-s 30] [--checkpoint-url postgresql://...]

For each size: one sandbox process serving N Ready services (the "healthy" scenario's spec under N
names, time-scale 1000, zero-latency endpoints), and one ``gemma-sre watch --fleet`` replica process
running one round of them (``workers`` at once, interval = deadline = ``--round-s``; use_model off,
policy approve). Measured per run:

- cycles per minute: the ledger's finished cycles over the time from the first one's start to the last
  one's end (a round cut short by its deadline still counts what it ran; the rest are skipped);
- the replica's peak RSS (``wait4``'s ``ru_maxrss``) and the sandbox process's.

Medians of ``--runs`` per size (the largest size runs once unless ``--runs-largest``). Every run has a
store of its own: the SQLite file under a fresh state directory, or, with ``--checkpoint-url`` naming a
Postgres database, a fresh schema in it (first on the run's search path, dropped after the run), so
no run counts another's cycles.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from _support import count

ROOT = Path(__file__).resolve().parent.parent


def serve(n: int) -> None:
    """The sandbox with ``n`` services, until stdin closes (run as a child of this script)."""
    from sandbox.scenarios import scenario_specs
    from sandbox.server import start_sandbox

    sb = start_sandbox(scenario="healthy", time_scale=1000, zero_latency=True)
    spec = scenario_specs("healthy")[0][0]
    for i in range(n):
        sb.deploy(spec.model_copy(update={"name": f"svc-{i}"}))
    sb.settle()
    print(sb.url, sb.project, sb.location, flush=True)
    sys.stdin.read()
    sb.stop()


def write_fleet(
    path: Path, url: str, project: str, location: str, n: int, workers: int, round_s: int
) -> None:
    lines = [
        f'[fleet]\nworkers = {workers}\ninterval = "{round_s}s"\nlease = "30s"\n',
        f'[defaults]\nproject = "{project}"\nregion = "{location}"\nrun_api_endpoint = "{url}"\n'
        f'logging_api_endpoint = "{url}"\nanonymous_credentials = true\nuse_model = false\n',
    ]
    lines += [f'[[services]]\nservice = "svc-{i}"\n' for i in range(n)]
    path.write_text("\n".join(lines), encoding="utf-8")


def with_search_path(url: str, schema: str) -> str:
    """``url`` with ``schema`` first on the connection's search path (libpq's ``options``)."""
    from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    query.append(("options", f"-c search_path={schema}"))
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


@contextmanager
def fresh_store(checkpoint_url: str | None) -> Iterator[tuple[Path, str | None]]:
    """(a new state directory, the run's checkpoint URL: a new schema in ``checkpoint_url``'s
    database, or None for the state directory's SQLite file), both removed afterwards."""
    import uuid

    work = Path(tempfile.mkdtemp(prefix="gemma-sre-bench-fleet-"))
    schema = None
    try:
        if checkpoint_url:
            import psycopg
            from psycopg import sql

            schema = f"bench_fleet_{uuid.uuid4().hex[:12]}"
            with psycopg.connect(checkpoint_url, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        yield work, with_search_path(checkpoint_url, schema) if checkpoint_url and schema else None
    finally:
        if checkpoint_url and schema:
            import psycopg
            from psycopg import sql

            with psycopg.connect(checkpoint_url, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        shutil.rmtree(work, ignore_errors=True)


def one_run(n: int, workers: int, round_s: int, checkpoint_url: str | None) -> dict[str, float]:
    with fresh_store(checkpoint_url) as (work, url):
        return _measure(n, workers, round_s, work, url)


def _measure(n: int, workers: int, round_s: int, work: Path, checkpoint_url: str | None) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEMMA_SRE_")}
    env["GEMMA_SRE_STATE_DIR"] = str(work / "state")
    if checkpoint_url:
        env["GEMMA_SRE_CHECKPOINT_URL"] = checkpoint_url
    sb = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve", str(n)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert sb.stdout is not None and sb.stdin is not None
        url, project, location = sb.stdout.readline().split()
        fleet = work / "fleet.toml"
        write_fleet(fleet, url, project, location, n, workers, round_s)
        rep = subprocess.Popen(
            [sys.executable, "-m", "agent.cli", "watch", "--fleet", str(fleet), "--max-cycles", "1"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert rep.stdout is not None
        out = rep.stdout.read()
        _, status, usage = os.wait4(rep.pid, 0)  # before Popen reaps it: this child's own rusage
        rep.returncode = os.waitstatus_to_exitcode(status)
        rss_replica = usage.ru_maxrss / 1024  # KiB on Linux
        if rep.returncode != 0:
            raise SystemExit(f"the replica failed:\n{out[-2000:]}")
        rss_sandbox = _proc_rss(sb.pid)
    finally:
        if sb.stdin:
            sb.stdin.close()
        sb.wait(timeout=30)

    from graph.leases import open_leases

    with open_leases(checkpoint_url, work / "state") as store:  # this run's store, as the replica's
        runs = store.runs()
    ran = [r for r in runs if r.status in ("done", "failed") and r.finished_at is not None]
    skipped = sum(1 for r in runs if r.status == "skipped")
    span = max(r.finished_at or 0 for r in ran) - min(r.started_at for r in ran)
    return {
        "cycles": len(ran),
        "failed": sum(1 for r in ran if r.status == "failed"),
        "skipped": skipped,
        "span_s": span,
        "per_min": len(ran) / span * 60 if span > 0 else float("nan"),
        "rss_replica_mib": rss_replica,
        "rss_sandbox_mib": rss_sandbox,
    }


def _proc_rss(pid: int) -> float:
    """Peak RSS (VmHWM) of a live process in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return float(line.split()[1]) / 1024
    return float("nan")


def size_list(text: str) -> list[int]:
    """An argparse ``type`` for ``--sizes``: comma-separated counts of at least 1."""
    return [count(x.strip()) for x in text.split(",")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--sizes", type=size_list, default="10,100,500", help="service counts, e.g. 10,100,500")
    ap.add_argument("--runs", type=count, default=3)
    ap.add_argument("--runs-largest", type=count, default=1)
    ap.add_argument("--workers", type=count, default=4)
    ap.add_argument("--round-s", type=count, default=30)
    ap.add_argument("--checkpoint-url", default=None, help="a postgresql:// database (default: SQLite)")
    args = ap.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return 0
    if args.checkpoint_url and not args.checkpoint_url.startswith(("postgresql://", "postgres://")):
        ap.error(f"--checkpoint-url: {args.checkpoint_url!r} is not a postgresql:// URL")
    sizes = args.sizes
    print(
        f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.workers} workers"
    )
    print("services  cycles/min  ran  skipped  failed  replica RSS MiB  sandbox RSS MiB  (median of runs)")
    for n in sizes:
        runs = args.runs_largest if n == max(sizes) else args.runs
        got = []
        for _ in range(runs):
            t = time.monotonic()
            got.append(one_run(n, args.workers, args.round_s, args.checkpoint_url))
            got[-1]["wall_s"] = time.monotonic() - t

        def med(key: str, got: list[dict[str, float]] = got) -> float:
            return statistics.median(g[key] for g in got)

        print(
            f"{n:8d}  {med('per_min'):10.0f}  {med('cycles'):3.0f}  {med('skipped'):7.0f}  "
            f"{med('failed'):6.0f}"
            f"  {med('rss_replica_mib'):15.0f}  {med('rss_sandbox_mib'):15.0f}  ({runs} run(s), "
            f"cycles over {med('span_s'):.1f} s)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
