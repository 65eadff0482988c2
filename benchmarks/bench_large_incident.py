"""Load and diagnose (no model) a 1,000,000-line incident, as YAML and as JSON Lines: time and peak RSS.

The incident is the reference failure (Gemma 4 12B bf16 on one L4) buried in realistic serving noise,
written to a temporary directory in both formats. Each run is a fresh process (so the peak RSS is that
run's own): ``load_incident`` then ``assess_incident`` without a model, as ``gemma-sre diagnose`` does.
Medians of ``--runs`` runs are printed.

Run: .venv/bin/python benchmarks/bench_large_incident.py [--lines N] [--runs R]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _support import count

ROOT = Path(__file__).resolve().parent.parent

HEADER = {
    "id": "bench-large",
    "title": "12B bf16 on one L4, buried in serving noise",
    "service": {
        "name": "gemma-12b",
        "gpu_type": "nvidia-l4",
        "gpu_count": 1,
        "cpu": 8,
        "memory": "32Gi",
        "args": ["--model=/mnt/models/gemma-4-12B-it", "--max-model-len=16384"],
    },
}


def write_incidents(directory: Path, n: int) -> tuple[Path, Path]:
    from log_samples import noisy_oom_log

    lines, _ = noisy_oom_log(n)
    yml, jsonl = directory / "large.yaml", directory / "large.jsonl"
    with yml.open("w", encoding="utf-8") as f:
        f.write(
            f"id: {HEADER['id']}\ntitle: {json.dumps(HEADER['title'])}\n"
            f"service: {json.dumps(HEADER['service'])}\n"
        )
        f.write("logs:\n")
        for t in lines:
            f.write(f"  - {{severity: DEFAULT, text: {json.dumps(t)}}}\n")
    with jsonl.open("w", encoding="utf-8") as f:
        f.write(json.dumps(HEADER) + "\n")
        for t in lines:
            f.write(json.dumps({"severity": "DEFAULT", "text": t}) + "\n")
    return yml, jsonl


def one_run(path: str) -> None:
    """In a child process: load + diagnose, print one JSON line of figures."""
    sys.path.insert(0, str(ROOT))
    from graph.pipeline import assess_incident
    from mcp_tools.incident import load_incident

    t0 = time.perf_counter()
    inc = load_incident(path)
    t1 = time.perf_counter()
    d = assess_incident(inc, model=None, policy="approve")
    t2 = time.perf_counter()
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    doc = {"load_s": t1 - t0, "diagnose_s": t2 - t1, "rss_mib": rss_mib, "lines": len(inc.logs)}
    doc["category"] = d.category
    print(json.dumps(doc))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lines", type=count, default=1_000_000)
    ap.add_argument("--runs", type=count, default=3)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        one_run(a.one)
        return
    with tempfile.TemporaryDirectory(prefix="gemma-sre-bench-") as tmp:
        t0 = time.perf_counter()
        paths = write_incidents(Path(tmp), a.lines)
        print(f"lines: {a.lines:,} (runs: {a.runs}); written in {time.perf_counter() - t0:.1f} s")
        for p in paths:
            runs = []
            for _ in range(a.runs):
                out = subprocess.run(
                    [sys.executable, __file__, "--one", str(p)], capture_output=True, text=True, check=True
                )
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            med = {k: statistics.median(r[k] for r in runs) for k in ("load_s", "diagnose_s", "rss_mib")}
            size = p.stat().st_size / 2**20
            print(
                f"{p.suffix:7} {size:6.0f} MiB  load {med['load_s']:6.2f} s  "
                f"diagnose {med['diagnose_s']:6.2f} s  "
                f"total {med['load_s'] + med['diagnose_s']:6.2f} s  peak RSS {med['rss_mib']:6.0f} MiB  "
                f"({runs[0]['category']})"
            )


if __name__ == "__main__":
    main()
