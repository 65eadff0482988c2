"""How long replay of the whole incident library takes without a model (target: under 10 s).

    python benchmarks/eval_replay.py [--runs 5] [--split all|composed|dev|blind|real] [--incidents DIR]

Prints the median and the spread of whole runs (load every file, diagnose, score) and of loading alone,
and each split's figures (the composed library, the real corpus's dev and blind splits).
Uses the real diagnosis (graph.pipeline.assess_incident); with --diagnose MODULE:FUNCTION another one.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from pathlib import Path

from _support import count

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evals.harness import load_diagnose, load_library, run_eval, split_dirs  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=count, default=5)
    ap.add_argument("--incidents", type=Path, default=None, help="one directory instead of the library")
    ap.add_argument("--split", default="all", help="the library's part: all, composed, dev, blind, real")
    ap.add_argument("--diagnose", default=None, help="MODULE:FUNCTION (default: graph.diagnosis)")
    args = ap.parse_args()
    if args.diagnose:
        mod, _, fn = args.diagnose.partition(":")
        diagnose = getattr(importlib.import_module(mod), fn)
    else:
        diagnose = load_diagnose()

    loads, runs = [], []
    for _ in range(args.runs):
        t = time.perf_counter()
        dirs = [args.incidents] if args.incidents else [d for _, d in split_dirs(args.split) if d.is_dir()]
        good, bad = [], []
        for d in dirs:
            g, b = load_library(d)
            good += g
            bad += b
        loads.append(time.perf_counter() - t)
        t = time.perf_counter()
        result = run_eval(args.incidents, diagnose=diagnose, split=args.split)
        runs.append(time.perf_counter() - t)
    lines = sum(len(i.logs) for i in good)
    s = result.summary
    print(f"incidents: {len(good)} files ({len(bad)} bad), {lines:,} log lines")
    print(f"load only : median {statistics.median(loads):.3f} s (min {min(loads):.3f}, max {max(loads):.3f})")
    print(f"full replay: median {statistics.median(runs):.3f} s (min {min(runs):.3f}, max {max(runs):.3f})")
    slowest = sorted(result.cases, key=lambda c: c.seconds, reverse=True)[:3]
    print("slowest cases: " + ", ".join(f"{c.id} {c.seconds:.3f} s" for c in slowest))
    print(f"passed {s['passed']}/{s['cases']}, category accuracy {s['category_accuracy']:.2f}")
    for name, part in result.splits.items():
        print(
            f"  {name:8} {part['passed']:3}/{part['cases']:<3} category {part['category_accuracy']:.1%}  "
            f"remediation {part['remediation_accuracy']:.1%}  evidence {part['evidence_accuracy']:.1%}  "
            f"failures called healthy {part['failures_called_healthy']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
