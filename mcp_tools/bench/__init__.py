"""Serving benchmarks that tell the truth: TTFT, ITL, TPOT, goodput, sweeps, charts.

Entry point: :func:`run_benchmark` (used by ``gemma-sre bench`` and the MCP tool ``run_benchmark``).
"""

from __future__ import annotations

from mcp_tools.bench.config import SLO, BenchConfig, parse_slo
from mcp_tools.bench.engine import BenchResult, ProgressEvent, TokenProvider, run_benchmark
from mcp_tools.bench.output import Comparison, compare_runs, load_run
from mcp_tools.bench.stats import PointSummary, Sample

__all__ = [
    "SLO",
    "BenchConfig",
    "BenchResult",
    "Comparison",
    "PointSummary",
    "ProgressEvent",
    "Sample",
    "TokenProvider",
    "compare_runs",
    "load_run",
    "parse_slo",
    "run_benchmark",
]
