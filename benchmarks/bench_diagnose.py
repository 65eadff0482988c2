"""Median time of one diagnosis without a model on 50,000 realistic log lines, and the context size.

The observation is the reference failure (Gemma 4 12B bf16 on one L4) buried in serving noise:
analyzers, root-cause choice, the planner-ranked plan and preflight, plus (separately) the context
a model would be sent.

Run: .venv/bin/python benchmarks/bench_diagnose.py [--lines N] [--runs R]
"""

from __future__ import annotations

import argparse
import statistics

from _support import count, reference_spec, timed
from log_samples import noisy_oom_log

from graph.diagnosis import build_context
from graph.observation import Observation
from graph.pipeline import assess
from mcp_tools.incident import LogLine
from mcp_tools.logs import count_tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lines", type=count, default=50_000)
    ap.add_argument("--runs", type=count, default=5)
    a = ap.parse_args()
    raw, oom = noisy_oom_log(a.lines)
    logs = [LogLine(severity="DEFAULT", text=t) for t in raw]
    spec = reference_spec()

    def fresh() -> Observation:  # a fresh observation each run: no cached views
        return Observation(id="bench", service=spec, logs=logs)

    diag_times, d = timed(lambda obs: assess(obs, policy="approve"), a.runs, setup=fresh)
    ctx_times, ctx = timed(build_context, a.runs, setup=fresh)
    print(f"lines:                  {a.lines:,} (runs: {a.runs})")
    print(f"diagnose (no model):    median {statistics.median(diag_times):.3f} s (min {min(diag_times):.3f})")
    print(f"build_context:          median {statistics.median(ctx_times):.3f} s (min {min(ctx_times):.3f})")
    print(f"context tokens:         {count_tokens(ctx):,} (estimated by count_tokens)")
    print(
        f"category:               {d.category} (evidence lines {[e.line for e in d.evidence]}, OOM at {oom})"
    )
    print(f"plan:                   {[(s.kind.value, s.change) for s in d.plan.steps]}")
    print(f"preflight ok:           {d.plan.preflight.ok}")


if __name__ == "__main__":
    main()
