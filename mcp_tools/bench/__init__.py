"""Serving benchmarks that tell the truth: TTFT, ITL, TPOT, goodput, sweeps, charts.

Entry point: :func:`run_benchmark` (used by ``gemma-sre bench`` and the MCP tool ``run_benchmark``).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp_tools.bench.config import SLO, BenchConfig, parse_slo
    from mcp_tools.bench.engine import BenchResult, ProgressEvent, TokenProvider, run_benchmark
    from mcp_tools.bench.output import Comparison, compare_runs, load_run
    from mcp_tools.bench.stats import PointSummary, Sample

#: Imported on first use (PEP 562): the package's modules pull in aiohttp and httpx, and the CLI reads
#: ``mcp_tools.bench.config``'s limits at start-up.
_WHERE = {
    "SLO": "config", "BenchConfig": "config", "parse_slo": "config",
    "BenchResult": "engine", "ProgressEvent": "engine", "TokenProvider": "engine", "run_benchmark": "engine",
    "Comparison": "output", "compare_runs": "output", "load_run": "output",
    "PointSummary": "stats", "Sample": "stats",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(f"mcp_tools.bench.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'mcp_tools.bench' has no attribute {name!r}")


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
