"""The cost of Cloud Monitoring in a cycle: one observe's series read, and the cycle without a model on
50,000 log lines plus the series (target: under 2 s).

    .venv/bin/python benchmarks/bench_observe_metrics.py [--lines 50000] [--runs 5] [--scenario load-ramp]

Medians of --runs:

1. one read of every catalog series (17 metric families: Cloud Run's per revision, vLLM's per
   instance) over the loop's window (30 min, aligned to 60 s) through the official
   ``google-cloud-monitoring`` client (gRPC) against a sandbox running the scenario: calls, series,
   points read, seconds; and the compression (``summaries``) of what was read.
2. the cycle from the observation to the approval interrupt (diagnose, propose, preflight, every
   checkpoint write) on an observation holding 50,000 log lines (the weights-OOM traceback buried in
   serving noise, tests/log_samples.py) AND the series of measurement 1: what the loop costs with
   both; the same observation without the series, interleaved, for what the series add. Also the
   size of the model's context and of its series block.
3. (unless --skip-fetch) the whole cycle against a sandbox loaded with the same lines, observe
   included: spec, every log line, the series and /health through the official clients.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime

from _support import count, cycle_from_observation, oom_incident, private_state_dir, sandbox_cycles

from sandbox.scenarios import SCENARIOS


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=count, default=50_000)
    ap.add_argument("--runs", type=count, default=5)
    ap.add_argument("--scenario", default="load-ramp", choices=SCENARIOS)
    ap.add_argument("--skip-fetch", action="store_true", help="measurements 1 and 2 only")
    args = ap.parse_args()

    private_state_dir()
    from graph.diagnosis import _series_block, build_context
    from graph.observation import Observation
    from mcp_tools.logs import count_tokens
    from mcp_tools.monitoring import CloudMonitoring, summaries
    from mcp_tools.settings import Settings
    from sandbox.server import start_sandbox

    med = statistics.median
    # 1. one read of the series
    sb = start_sandbox(scenario=args.scenario, time_scale=1000.0, zero_latency=True, drive_load=False)
    try:
        mon = CloudMonitoring(Settings(**sb.settings_fields()))
        mon.read(sb.service or "", keys=["kv_usage"])  # the client's channel, once
        reads: list[float] = []
        comp: list[float] = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            series = mon.read(sb.service or "", end=datetime.now(UTC))
            reads.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            summ = summaries(series)
            comp.append(time.perf_counter() - t0)
        mon.close()
    finally:
        sb.stop()
    print(f"scenario: {args.scenario}; runs: {args.runs}")
    print(
        f"1. one observe's Cloud Monitoring read: median {med(reads) * 1000:.0f} ms "
        f"(min {min(reads) * 1000:.0f}, max {max(reads) * 1000:.0f}); {series.calls} calls, "
        f"{len(series.series)} series, {series.points_read} points read "
        f"({series.period_s:g} s alignment over {series.start} .. {series.end})"
    )
    print(f"   compression to {len(summ)} summaries: median {med(comp) * 1000:.1f} ms")

    # 2. the cycle on 50,000 lines plus the series
    incident, _ = oom_incident(args.lines)
    obs = Observation(
        id=incident.id, title=incident.title, service=incident.service, logs=incident.logs, series=series
    )
    bare = obs.model_copy(update={"series": None})
    timings: dict[bool, list[float]] = {True: [], False: []}
    category = ""
    # with and without the series, interleaved, so a busy machine weighs on both alike
    for i in range(args.runs):
        for with_series in (True, False):
            seconds, values = cycle_from_observation(
                obs if with_series else bare, f"bench-{i}-{int(with_series)}"
            )
            timings[with_series].append(seconds)
            category = values["diagnosis"]["category"]
    proc, without = timings[True], timings[False]
    context = build_context(obs)
    block = "\n".join(_series_block(obs))
    print(
        f"2. observation ({args.lines:,} lines + {len(series.series)} series) -> approval interrupt: "
        f"median {med(proc):.2f} s (min {min(proc):.2f}, max {max(proc):.2f}); diagnosis {category}; "
        f"goal < 2 s: {'met' if med(proc) < 2 else 'NOT met'}"
    )
    print(
        f"   the same without the series: median {med(without):.2f} s; the series cost "
        f"{med(p - q for p, q in zip(proc, without, strict=True)) * 1000:+.0f} ms a cycle (median of pairs)"
    )
    print(
        f"   context a model would be sent: {count_tokens(context):,} tokens, of which the series "
        f"block {count_tokens(block):,} ({len(series.series)} lines, no raw points)"
    )
    if args.skip_fetch:
        return 0

    # 3. the whole cycle against a sandbox, observe included
    cycles: list[float] = []
    points: list[int] = []
    with sandbox_cycles(incident) as one:
        for _ in range(args.runs):
            seconds, r = one()
            cycles.append(seconds)
            points.append(int(r.values["observation_summary"].get("series_points") or 0))
    print(
        f"3. whole cycle against the sandbox ({args.lines:,} lines read, {med(points):,.0f} series points): "
        f"median {med(cycles):.2f} s (min {min(cycles):.2f}, max {max(cycles):.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
