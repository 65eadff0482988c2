"""Median time and size of compressing 50,000 realistic vLLM log lines (noise + a buried OOM traceback).

Run: .venv/bin/python benchmarks/bench_compress.py [--lines N] [--runs R] [--budget TOKENS]
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

from mcp_tools.incident import LogLine  # noqa: E402
from mcp_tools.logs import compress_logs  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lines", type=int, default=50_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--budget", type=int, default=3000)
    a = ap.parse_args()
    raw, oom = noisy_oom_log(a.lines)
    logs = [LogLine(severity="DEFAULT", text=t) for t in raw]
    times = []
    result = None
    for _ in range(a.runs):
        t0 = time.perf_counter()
        result = compress_logs(logs, budget_tokens=a.budget)
        times.append(time.perf_counter() - t0)
    assert result is not None
    print(f"lines:             {a.lines:,}")
    print(f"runs:              {a.runs}")
    print(f"median seconds:    {statistics.median(times):.3f}  (min {min(times):.3f}, max {max(times):.3f})")
    print(f"context tokens:    {result.tokens:,} (budget {a.budget:,}; estimated by count_tokens)")
    print(f"templates:         {len(result.templates)}")
    print(f"raw lines kept:    {len(result.kept_line_numbers)}")
    print(f"root cause kept:   {oom in result.kept_line_numbers} (line {oom})")


if __name__ == "__main__":
    main()
