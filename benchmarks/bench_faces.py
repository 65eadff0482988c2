"""Median latencies of the faces against the local sandbox (time-scale 1000, zero-latency endpoints):

- a quiet watch cycle (healthy service: one read-only loop run, nothing reported),
- the first watch cycle on the reference incident (read-only run + planning run to the approval),
- REPL commands: /status, /capacity (the planner), /metrics.

Run: .venv/bin/python benchmarks/bench_faces.py [--runs R]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from _support import count, private_state_dir, timed


def _median_ms(fn: Callable[[], object], runs: int) -> float:
    return statistics.median(timed(fn, runs)[0]) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=count, default=5)
    a = ap.parse_args()
    state = private_state_dir()

    from agent.commands.repl import sandbox_configuration
    from agent.repl.commands import ReplCommands
    from agent.watch import Watcher
    from sandbox.server import start_sandbox

    rows: list[tuple[str, float]] = []
    with start_sandbox(scenario="healthy", time_scale=1000, zero_latency=True) as sb:
        cfg = sandbox_configuration(sb, service=None)
        w = Watcher(cfg)
        w.cycle()  # warm-up (imports, first checkpoint)
        rows.append(("watch cycle, healthy (quiet)", _median_ms(w.cycle, a.runs)))
        c = ReplCommands(cfg)
        for cmd in ("/status", "/capacity", "/metrics"):
            rows.append((f"repl {cmd}", _median_ms(lambda cmd=cmd: c.dispatch(cmd), a.runs)))
    from pathlib import Path

    from agent.incidents_tracker import TrackerStore

    first: list[float] = []
    for i in range(a.runs):
        with start_sandbox(scenario="reference-weights-oom", time_scale=1000, zero_latency=True) as sb:
            cfg = sandbox_configuration(sb, service=None)
            fresh = TrackerStore(Path(state) / f"watch-run-{i}.json")
            w = Watcher(cfg, store=fresh)  # a fresh tracker: the incident is new each run
            t0 = time.perf_counter()
            s = w.cycle()
            first.append((time.perf_counter() - t0) * 1000)
            assert s.status == "awaiting_approval", s.status
    rows.append(("watch cycle, new incident (diagnose + plan)", statistics.median(first)))
    width = max(len(n) for n, _ in rows)
    print(f"median of {a.runs} runs (sandbox, time-scale 1000, zero-latency)")
    for name, ms in rows:
        print(f"  {name:<{width}}  {ms:8.1f} ms")


if __name__ == "__main__":
    main()
