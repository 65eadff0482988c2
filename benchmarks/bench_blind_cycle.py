"""Blind observations: a fault matrix over the sandbox's Cloud Run, Logging and vLLM endpoints.

    .venv/bin/python benchmarks/bench_blind_cycle.py [--only logging:hang] [--scenario NAME ...]

Each case starts a sandbox on a scenario, arms one fault that fires on every matching request
(``sandbox.faults``: HTTP 503, HTTP 429, a dropped connection, a hang), and runs one whole cycle
(``graph.runner.run_cycle``, the official clients over REST, no model) under ``--policy auto`` with
every mutating kind listed as safe: the most permissive configuration there is. It prints, per case,
what the observation could not read, the diagnosis, the outcome, the mutations the sandbox journal
received and the cycle's wall time; at the end, how many degraded-observation cycles mutated
(goal 0) and the slowest cycle. ``--deadline S`` sets the cycle deadline (``cycle_deadline_s``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGETS = ("logging", "run", "endpoint")
FAULTS: dict[str, dict[str, Any]] = {
    "503": {"kind": "status", "status": 503},
    "429": {"kind": "status", "status": 429},
    "drop": {"kind": "drop"},
    "hang": {"kind": "hang"},
}
SCENARIOS = ("reference-weights-oom", "startup-timeout", "weights-oom-with-good-revision", "healthy")


def _case(scenario: str, target: str, fault: str, deadline: float | None) -> dict[str, Any]:
    from graph.config import Configuration
    from graph.runner import run_cycle
    from mcp_tools.remediation import RemediationKind
    from mcp_tools.settings import get_settings
    from sandbox.server import start_sandbox

    os.environ["GEMMA_SRE_STATE_DIR"] = tempfile.mkdtemp(prefix="gemma-sre-blind-")
    get_settings.cache_clear()
    sb = start_sandbox(scenario=scenario, time_scale=1000.0, zero_latency=True)
    try:
        service = str(next(iter(sb.state()["services"])).rsplit("/", 1)[1])
        fields: dict[str, Any] = dict(
            service=service,
            **sb.settings_fields(),
            use_model=False,
            verify_deadline_s=30.0,
            verify_poll_s=0.05,
            policy="auto",
            auto_kinds=[k.value for k in RemediationKind if k is not RemediationKind.ESCALATE],
        )
        if deadline is not None:
            fields["cycle_deadline_s"] = deadline
        known = {k: v for k, v in fields.items() if k in Configuration.model_fields}
        cfg = Configuration.from_settings(**known)
        sb.faults.inject(target, count=None, **FAULTS[fault])
        t0 = time.perf_counter()
        r = run_cycle(cfg)
        seconds = time.perf_counter() - t0
        sb.faults.clear()
        mutations = [e for e in sb.journal.entries() if e.method in ("POST", "PATCH", "PUT", "DELETE")]
        summary = r.values.get("observation_summary") or {}
        return {
            "case": f"{scenario} {target}:{fault}",
            "unread": list(summary.get("unread") or []),
            "category": (r.values.get("diagnosis") or {}).get("category"),
            "status": r.status,
            "mutations": len(mutations),
            "seconds": seconds,
        }
    finally:
        sb.faults.clear()
        sb.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", default=[], help="TARGET:FAULT, e.g. logging:hang")
    ap.add_argument("--scenario", action="append", default=[], choices=SCENARIOS)
    ap.add_argument("--deadline", type=float, default=None, help="cycle_deadline_s (default: the setting)")
    args = ap.parse_args()
    import logging

    logging.basicConfig(level=logging.ERROR)
    pairs = [tuple(o.split(":", 1)) for o in args.only] or [(t, f) for t in TARGETS for f in FAULTS]
    rows = []
    for scenario in args.scenario or SCENARIOS:
        for target, fault in pairs:
            row = _case(scenario, target, fault, args.deadline)
            rows.append(row)
            blind = "; ".join(u[:70] for u in row["unread"]) or "-"
            print(
                f"{row['case']:<48} {row['seconds']:7.1f} s  {row['category'] or '-':<16} "
                f"{row['status']:<18} mutations={row['mutations']}  unread: {blind}",
                flush=True,
            )
    degraded = [r for r in rows if r["unread"]]
    mutated = [r for r in degraded if r["mutations"]]
    slowest = max(rows, key=lambda r: r["seconds"])
    print(
        f"\n{len(rows)} cycles, {len(degraded)} with a degraded observation, {len(mutated)} of them mutated; "
        f"slowest {slowest['seconds']:.1f} s ({slowest['case']})"
    )
    return 1 if mutated else 0


if __name__ == "__main__":
    raise SystemExit(main())
