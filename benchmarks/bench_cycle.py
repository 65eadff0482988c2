"""One cycle of the loop without a model on 50,000 log lines (target: under 2 s), and the context size.

    .venv/bin/python benchmarks/bench_cycle.py [--lines 50000] [--runs 5] [--skip-fetch]

The reference service (Gemma 4 12B bf16 on one L4) with N lines of realistic serving noise and the
weights-OOM traceback buried inside (tests/log_samples.py). Two measurements, medians of --runs:

1. the cycle from the observation to the approval interrupt (diagnose, propose, preflight, and every
   SQLite checkpoint write): the observation is written into a thread as the observe step's output
   (``update_state(..., as_node="observe")``) and the real graph runs on from there. This is what the
   2 s target is about: what the loop itself costs on 50,000 lines.
2. the whole cycle against a sandbox loaded with the same lines, observe included: the official Cloud
   Run and Logging clients over REST read the spec, all N lines (5,000 per call) and /health. Its
   observe time is dominated by the Logging client and the sandbox's paging (reported apart).

Also prints the number of tokens a model would be sent (``graph.diagnosis.build_context``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import datetime

from _support import count, cycle_from_observation, oom_incident, private_state_dir, sandbox_cycles


def _t(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=count, default=50_000)
    ap.add_argument("--runs", type=count, default=5)
    ap.add_argument("--skip-fetch", action="store_true", help="only measurement 1")
    args = ap.parse_args()

    private_state_dir()
    from graph.diagnosis import build_context
    from graph.observation import Observation
    from mcp_tools.logs import count_tokens

    incident, _oom_line = oom_incident(args.lines)
    med = statistics.median
    # 1. from the observation to the approval interrupt
    obs = Observation(id=incident.id, title=incident.title, service=incident.service, logs=incident.logs)
    proc: list[float] = []
    tokens: list[int] = []
    cited_ok = False
    category = ""
    for i in range(args.runs):
        seconds, values = cycle_from_observation(obs, f"bench-{i}")
        proc.append(seconds)
        category = values["diagnosis"]["category"]
        cited_ok = any("OutOfMemoryError" in ev["text"] for ev in values["diagnosis"]["evidence"])
        tokens.append(count_tokens(build_context(obs)))
    print(f"lines: {args.lines:,}; runs: {args.runs}")
    print(
        f"1. observation -> approval interrupt: median {med(proc):.2f} s "
        f"(min {min(proc):.2f}, max {max(proc):.2f}); diagnosis {category}; OOM line cited: {cited_ok}"
    )
    print(f"   context a model would be sent: {med(tokens):,.0f} tokens (count_tokens estimate)")
    if args.skip_fetch:
        return 0

    t = time.perf_counter()
    cycles: list[float] = []
    steps: dict[str, list[float]] = {}
    read: list[int] = []
    with sandbox_cycles(incident) as one:
        print(f"sandbox with {args.lines:,} log lines started in {time.perf_counter() - t:.2f} s")
        for _ in range(args.runs):
            seconds, r = one()
            cycles.append(seconds)
            prev = _t(r.values["meta"]["started_at"])
            for e in r.values["timeline"]:
                steps.setdefault(e["node"], []).append(_t(e["at"]) - prev)
                prev = _t(e["at"])
            read.append(r.values["observation_summary"]["log_lines"])
    print(
        f"2. whole cycle against the sandbox (observe reads {med(read):,.0f} lines): median "
        f"{med(cycles):.2f} s (min {min(cycles):.2f}, max {max(cycles):.2f})"
    )
    for node, vals in steps.items():
        print(f"   {node:<10} median {med(vals):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
