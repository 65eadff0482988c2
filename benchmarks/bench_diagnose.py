"""Median time of one diagnosis without a model on 50,000 realistic log lines, and the context size.

The observation is the reference failure (Gemma 4 12B bf16 on one L4) buried in serving noise:
analyzers, root-cause choice, the planner-ranked plan and preflight, plus (separately) the context
a model would be sent.

Run: .venv/bin/python benchmarks/bench_diagnose.py [--lines N] [--runs R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the realistic log samples live with the tests

from log_samples import noisy_oom_log  # noqa: E402

from graph.diagnosis import build_context  # noqa: E402
from graph.observation import Observation  # noqa: E402
from graph.pipeline import assess  # noqa: E402
from mcp_tools.incident import LogLine, ServiceSpec  # noqa: E402
from mcp_tools.logs import count_tokens  # noqa: E402

SPEC = ServiceSpec(
    name="gemma-12b",
    gpu_type="nvidia-l4",
    cpu=8,
    memory="32Gi",
    args=["--model=/mnt/models/gemma-4-12B-it", "--max-model-len=16384"],
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lines", type=int, default=50_000)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    raw, oom = noisy_oom_log(a.lines)
    logs = [LogLine(severity="DEFAULT", text=t) for t in raw]
    diag_times, ctx_times = [], []
    d = None
    ctx = ""
    for _ in range(a.runs):
        obs = Observation(id="bench", service=SPEC, logs=logs)  # a fresh observation: no cached views
        t0 = time.perf_counter()
        d = assess(obs, policy="approve")
        diag_times.append(time.perf_counter() - t0)
        obs = Observation(id="bench", service=SPEC, logs=logs)
        t0 = time.perf_counter()
        ctx = build_context(obs)
        ctx_times.append(time.perf_counter() - t0)
    assert d is not None
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
