# ruff: noqa: E501  (log lines are written whole, as vLLM prints them)
"""Diagnosis time (no model) on serving logs where an error repeats with every request: does it grow with
the log's length, or with its square?

Two shapes a busy server prints: a request cancelled by its client (a traceback ending in
``CancelledError``, then the request's own error) and a rejected key (an HTTP 401 per request), each
between answered requests, at 5,000, 20,000 and 50,000 lines. For each size the median CPU time of
``assess`` over ``--runs`` runs is printed, and the CPU per 1,000 lines: flat when the work is linear.
(A rule that scans the whole log once per failing line made 20,000 lines take 14 times as long as 5,000.)

Run: .venv/bin/python benchmarks/bench_repeated_errors.py [--runs R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from _support import count

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from log_samples import STARTUP_OK  # noqa: E402

from graph.observation import Observation  # noqa: E402
from graph.pipeline import assess  # noqa: E402
from mcp_tools.incident import ServiceSpec  # noqa: E402

SIZES = (5_000, 20_000, 50_000)


def serving_log(n: int, shape: str) -> list[str]:
    lines = list(STARTUP_OK) + ["(APIServer pid=1) INFO:     Application startup complete."]
    i = 0
    while len(lines) < n:
        i += 1
        lines.append(
            f'(APIServer pid=1) INFO:     10.0.0.{i % 250}:5000 - "POST /v1/completions HTTP/1.1" 200 OK'
        )
        if shape == "cancelled":
            lines += [
                "(APIServer pid=1) ERROR 05-01 10:00:00 [serving_completion.py:120] Error in request",
                "(APIServer pid=1) Traceback (most recent call last):",
                '(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/serving_completion.py", line 120, in create_completion',
                "(APIServer pid=1)     async for res in result_generator:",
                "(APIServer pid=1) asyncio.exceptions.CancelledError",
                f"(APIServer pid=1) ValueError: request cmpl-{i} aborted",
            ]
        else:
            lines.append(
                f'(APIServer pid=1) INFO:     10.0.0.{i % 250}:5000 - "POST /v1/completions HTTP/1.1" 401 Unauthorized'
            )
    return lines[:n]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=count, default=3)
    args = ap.parse_args()
    svc = ServiceSpec(name="g", region="us-east4", gpu_type="nvidia-l4", cpu=8, memory="32Gi")
    for shape in ("cancelled", "rejected"):
        for n in SIZES:
            obs = Observation(id="bench", service=svc, logs=[{"text": t} for t in serving_log(n, shape)])
            times, category = [], ""
            for _ in range(args.runs):
                t = time.process_time()
                category = assess(obs.model_copy(deep=True)).category
                times.append(time.process_time() - t)
            med = statistics.median(times)
            print(
                f"{shape:9} {n:>6,} lines: median {med:.2f} s CPU ({1e6 * med / n:.1f} ms per 1,000 lines), {category}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
