"""Median time and size of compressing 50,000 realistic vLLM log lines (noise + a buried OOM traceback).

Run: .venv/bin/python benchmarks/bench_compress.py [--lines N] [--runs R] [--budget TOKENS]
"""

from __future__ import annotations

import argparse
import statistics

from _support import count, timed
from log_samples import noisy_oom_log

from mcp_tools.incident import LogLine
from mcp_tools.logs import compress_logs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lines", type=count, default=50_000)
    ap.add_argument("--runs", type=count, default=5)
    ap.add_argument("--budget", type=count, default=3000)
    a = ap.parse_args()
    raw, oom = noisy_oom_log(a.lines)
    logs = [LogLine(severity="DEFAULT", text=t) for t in raw]
    times, result = timed(lambda: compress_logs(logs, budget_tokens=a.budget), a.runs)
    print(f"lines:             {a.lines:,}")
    print(f"runs:              {a.runs}")
    print(f"median seconds:    {statistics.median(times):.3f}  (min {min(times):.3f}, max {max(times):.3f})")
    print(f"context tokens:    {result.tokens:,} (budget {a.budget:,}; estimated by count_tokens)")
    print(f"templates:         {len(result.templates)}")
    print(f"raw lines kept:    {len(result.kept_line_numbers)}")
    print(f"root cause kept:   {oom in result.kept_line_numbers} (line {oom})")


if __name__ == "__main__":
    main()
