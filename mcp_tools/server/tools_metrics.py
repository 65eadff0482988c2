"""The service's series over time from Cloud Monitoring (Cloud Run's built-in metrics and vLLM's own,
as Managed Service for Prometheus stores them): read-only, bounded, compressed by default."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from mcp.server.fastmcp import FastMCP
from mcp.types import CallToolResult
from pydantic import Field

from mcp_tools.server.core import READ_ONLY, ResultModel, check_range, result, tool
from mcp_tools.server.state import ServerState

MAX_WINDOW_MIN = 24 * 60


class MetricsSeriesResult(ResultModel):
    service: str
    start: str
    end: str
    period_s: float
    points_read: int
    summaries: list[dict[str, Any]] = Field(default_factory=list)  # level, trend, peak, change per series
    series: list[dict[str, Any]] | None = None  # the aligned points, only when asked for
    missing: list[str] = Field(default_factory=list)
    truncated: bool = False


def register(mcp: FastMCP, state: ServerState) -> None:
    s = state

    @tool(mcp, READ_ONLY)
    async def metrics_series(
        service_name: str | None = None,
        series: Annotated[
            list[str] | None,
            Field(description="series keys to read, e.g. ['kv_usage', 'requests_waiting']; default: all"),
        ] = None,
        window_minutes: Annotated[
            int, Field(description="minutes of history ending now, 1 to 1440, e.g. 30")
        ] = 30,
        period_seconds: Annotated[
            int, Field(description="alignment period (one point per period), 60 to 3600 seconds, e.g. 60")
        ] = 60,
        include_points: Annotated[
            bool,
            Field(
                description="also return the aligned points (at most 240 per series); default: summaries only"
            ),
        ] = False,
    ) -> Annotated[CallToolResult, MetricsSeriesResult]:
        """A service's metrics over time from Cloud Monitoring, aligned server-side: Cloud Run's
        (request_rate by response class, request_latency_p95, instance_count, max_concurrency, cpu /
        memory / gpu / gpu_memory utilization, startup_latency; per revision) and vLLM's
        (requests_running, requests_waiting, kv_usage, preemptions_rate, generation_tokens_rate,
        ttft_p95, itl_p95, e2e_p95; per instance). Each series comes back as a few numbers (now, was,
        trend per minute, peak and when, when it changed); include_points adds the aligned points
        (at most 240 per series). 'series' picks keys (default: all)."""
        from mcp_tools.monitoring import parse_keys, read_series, summarize

        check_range("window_minutes", window_minutes, 1, MAX_WINDOW_MIN)
        check_range("period_seconds", period_seconds, 60, 3600)
        keys = [m.key for m in parse_keys(series)] if series else None
        name = s.service_name(service_name)
        got = await asyncio.to_thread(
            read_series, name, settings=s.settings, keys=keys, window_s=window_minutes * 60.0,
            period_s=float(period_seconds),
        )  # fmt: skip
        summ = [x for x in (summarize(t) for t in got.series) if x is not None]
        out = MetricsSeriesResult(
            service=name,
            start=got.start,
            end=got.end,
            period_s=got.period_s,
            points_read=got.points_read,
            summaries=[x.model_dump(mode="json") for x in summ],
            series=[t.model_dump(mode="json") for t in got.series] if include_points else None,
            missing=got.missing,
            truncated=got.truncated,
        )
        head = f"{len(summ)} series of {name}, {got.start} .. {got.end} ({got.points_read} points read)"
        lines = [x.line() for x in summ]
        if got.missing:
            lines.append(f"no data: {', '.join(got.missing)}")
        return result(out, "\n".join([head, *lines]))
