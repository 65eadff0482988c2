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
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from log_samples import noisy_oom_log  # noqa: E402


def _t(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=50_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--skip-fetch", action="store_true", help="only measurement 1")
    args = ap.parse_args()

    state = tempfile.mkdtemp(prefix="gemma-sre-bench-")
    os.environ["GEMMA_SRE_STATE_DIR"] = state
    from graph.config import Configuration
    from graph.diagnosis import build_context
    from graph.observation import Observation
    from graph.runner import resume_cycle, run_cycle
    from mcp_tools.incident import Incident, LogLine
    from mcp_tools.logs import count_tokens
    from sandbox.scenarios import l4_spec
    from sandbox.server import start_sandbox

    raw, _oom_line = noisy_oom_log(args.lines)
    incident = Incident(
        id="bench-weights-oom",
        title="benchmark: Gemma 4 12B bf16 on one L4",
        service=l4_spec(
            "gemma-4-12b", ["--model=/mnt/models/gemma-4-12B-it", "--max-model-len=16384"], env={}
        ),
        logs=[LogLine(severity="ERROR" if "Error" in t else "INFO", text=t) for t in raw],
    )
    med = statistics.median
    # 1. from the observation to the approval interrupt
    from graph.runner import compiled_graph

    cfg0 = Configuration.from_settings(service="gemma-4-12b", use_model=False)
    obs = Observation(id=incident.id, title=incident.title, service=incident.service, logs=incident.logs)
    proc: list[float] = []
    tokens: list[int] = []
    cited_ok = False
    category = ""
    for i in range(args.runs):
        config = {"configurable": {"thread_id": f"bench-{i}", **cfg0.persisted()}}
        obs_json = obs.model_dump(mode="json", by_alias=True)
        with compiled_graph() as g:
            g.update_state(
                config,
                {
                    "meta": {"thread_id": f"bench-{i}", "config": cfg0.persisted()},
                    "observation": obs_json,
                    "observation_summary": {"service": "gemma-4-12b", "log_lines": len(obs.logs)},
                    "cycle": 1,
                },
                as_node="observe",
            )
            t0 = time.perf_counter()
            for _ in g.stream(None, config, stream_mode="updates", durability="sync"):
                pass
            proc.append(time.perf_counter() - t0)
            values = g.get_state(config).values
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
    sb = start_sandbox(incident=incident, time_scale=1000.0, zero_latency=True)
    print(f"sandbox with {args.lines:,} log lines started in {time.perf_counter() - t:.2f} s")
    cycles: list[float] = []
    steps: dict[str, list[float]] = {}
    read: list[int] = []
    try:
        cfg = Configuration.from_settings(
            service="gemma-4-12b",
            **sb.settings_fields(),
            use_model=False,
            log_limit=args.lines,
        )
        for _ in range(args.runs):
            t0 = time.perf_counter()
            r = run_cycle(cfg)
            cycles.append(time.perf_counter() - t0)
            assert r.status == "awaiting_approval", r.status
            tl = r.values["timeline"]
            prev = _t(r.values["meta"]["started_at"])
            for e in tl:
                steps.setdefault(e["node"], []).append(_t(e["at"]) - prev)
                prev = _t(e["at"])
            read.append(r.values["observation_summary"]["log_lines"])
            resume_cycle(r.thread_id, decision="reject", approver="bench", reason="benchmark")
    finally:
        sb.stop()
    print(
        f"2. whole cycle against the sandbox (observe reads {med(read):,.0f} lines): median "
        f"{med(cycles):.2f} s (min {min(cycles):.2f}, max {max(cycles):.2f})"
    )
    for node, vals in steps.items():
        print(f"   {node:<10} median {med(vals):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
