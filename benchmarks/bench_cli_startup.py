"""Wall time of ``gemma-sre --help``, from spawn to exit, side by side with a bare ``python -c pass``.

Each run spawns the installed console script (next to this interpreter) and waits for it; the bare
interpreter is run alternately, so machine noise falls on both. Prints every run and the medians.

    .venv/bin/python benchmarks/bench_cli_startup.py [--runs 15] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _support import count

GOAL_S = 0.15


def one_run(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=count, default=15)
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    a = p.parse_args()
    script = Path(sys.executable).with_name("gemma-sre")
    ours = [str(script), "--help"] if script.exists() else [sys.executable, "-m", "agent.cli", "--help"]
    bare = [sys.executable, "-c", "pass"]
    one_run(ours)  # warm-up: file caches, byte code
    ours_s, bare_s = [], []
    for i in range(a.runs):
        t, b = one_run(ours), one_run(bare)
        ours_s.append(t)
        bare_s.append(b)
        if not a.json:
            print(f"run {i + 1}: gemma-sre --help {t * 1000:.0f} ms, python -c pass {b * 1000:.0f} ms")
    med, bare_med = statistics.median(ours_s), statistics.median(bare_s)
    out = {
        "runs": a.runs,
        "help_median_ms": round(med * 1000),
        "bare_python_median_ms": round(bare_med * 1000),
        "goal_ms": round(GOAL_S * 1000),
        "within_goal": med <= GOAL_S,
    }
    if a.json:
        print(json.dumps(out))
        return
    print(
        f"gemma-sre --help: median {out['help_median_ms']} ms (goal {out['goal_ms']} ms); "
        f"bare python: median {out['bare_python_median_ms']} ms; over {a.runs} runs"
    )


if __name__ == "__main__":
    main()
