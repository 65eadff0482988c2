"""Time series of a Cloud Run service from Cloud Monitoring, through the official client.

What is read (``CATALOG``): Cloud Run's built-in metrics of the service's revisions (resource
``cloud_run_revision``) and vLLM's own Prometheus metrics as Google Cloud Managed Service for
Prometheus stores them when its collector sidecar scrapes the container: metric type
``prometheus.googleapis.com/NAME/KIND`` (KIND is ``gauge``, ``counter``, ``histogram``; a counter's
NAME keeps Prometheus' ``_total``), resource ``prometheus_target`` whose ``namespace`` label is the
Cloud Run service and whose ``instance`` label is the instance.

Every window is aligned server-side (``aggregation``: ``alignment_period``, ``per_series_aligner``,
``cross_series_reducer``, ``group_by_fields``), per instance where the metric has an instance label
and per revision (and response code class) for Cloud Run's, and bounded: at most ``MAX_POINTS`` points
per series and ``MAX_SERIES`` series per metric. Filters are built only from validated or quoted
values. The result is typed (``SeriesSet`` of ``Series``); ``summarize`` compresses a series to a
few numbers (level, trend, peak, when it changed) for a model, which never sees raw points.

Transport: ``google-cloud-monitoring`` has gRPC transports only (no REST one, as of 2.32), so the
client is built with ``transport="grpc"`` through ``google_api.build_client``; against the sandbox
(an ``http://`` endpoint) that is an insecure channel, as emulators are reached. Calls go through the
one call wrapper (``google_api.call``): retries, deadline, error map. The library is imported on use.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcp_tools.errors import UserError
from mcp_tools.google_api import ApiReader, CallPolicy, call
from mcp_tools.settings import Settings

log = logging.getLogger(__name__)

#: Bounds on one read.
MAX_WINDOW_S = 24 * 3600.0
MIN_PERIOD_S = 60.0  # Cloud Monitoring's smallest alignment period for most metrics
MAX_POINTS = 240  # per series
MAX_SERIES = 32  # per metric (instances x classes)
PAGE_SIZE = 100
DEFAULT_WINDOW_S = 30 * 60.0
DEFAULT_PERIOD_S = 60.0

Resource = Literal["cloud_run_revision", "prometheus_target"]
RUN: Resource = "cloud_run_revision"
PROM: Resource = "prometheus_target"
PROM_PREFIX = "prometheus.googleapis.com/"

Aligner = Literal[
    "ALIGN_MEAN", "ALIGN_MAX", "ALIGN_RATE", "ALIGN_DELTA", "ALIGN_PERCENTILE_95", "ALIGN_PERCENTILE_99"
]
Reducer = Literal["REDUCE_SUM", "REDUCE_MEAN", "REDUCE_MAX", "REDUCE_PERCENTILE_95", "REDUCE_PERCENTILE_99"]


class MetricDef(BaseModel):
    """One series family the observer reads: the metric type(s) and how the window is aligned."""

    key: str  # our short name ("kv_usage")
    types: list[str]  # metric types, first preferred (an older vLLM's name after it)
    resource: Resource
    aligner: Aligner
    reducer: Reducer
    group_by: list[str]
    unit: str  # of the aligned values
    scale: float = 1.0  # aligned values are multiplied by this (a per-second rate -> per minute)
    about: str = ""


def prom(name: str, kind: str) -> str:
    """A Prometheus metric's type as Managed Service for Prometheus stores it."""
    return f"{PROM_PREFIX}{name}/{kind}"


_REV = "resource.label.revision_name"
_INST = "resource.label.instance"

CATALOG: tuple[MetricDef, ...] = (
    # Cloud Run's built-in metrics (per revision).
    MetricDef(key="request_rate", types=["run.googleapis.com/request_count"], resource=RUN,
              aligner="ALIGN_RATE", reducer="REDUCE_SUM",
              group_by=[_REV, "metric.label.response_code_class"], unit="req/s",
              about="requests reaching the revision, by response code class"),
    MetricDef(key="request_latency_p95", types=["run.googleapis.com/request_latencies"], resource=RUN,
              aligner="ALIGN_PERCENTILE_95", reducer="REDUCE_MAX", group_by=[_REV], unit="ms",
              about="95th percentile request latency at Cloud Run's front end"),
    MetricDef(key="instance_count", types=["run.googleapis.com/container/instance_count"], resource=RUN,
              aligner="ALIGN_MAX", reducer="REDUCE_SUM", group_by=[_REV], unit="instances"),
    MetricDef(key="max_concurrency", types=["run.googleapis.com/container/max_request_concurrencies"],
              resource=RUN, aligner="ALIGN_PERCENTILE_95", reducer="REDUCE_MAX", group_by=[_REV],
              unit="requests", about="concurrent requests per instance (p95 of the per-minute maximum)"),
    MetricDef(key="cpu_util", types=["run.googleapis.com/container/cpu/utilizations"], resource=RUN,
              aligner="ALIGN_PERCENTILE_95", reducer="REDUCE_MAX", group_by=[_REV], unit="ratio"),
    MetricDef(key="memory_util", types=["run.googleapis.com/container/memory/utilizations"], resource=RUN,
              aligner="ALIGN_PERCENTILE_95", reducer="REDUCE_MAX", group_by=[_REV], unit="ratio"),
    MetricDef(key="gpu_util", types=["run.googleapis.com/container/gpu/utilizations"], resource=RUN,
              aligner="ALIGN_PERCENTILE_95", reducer="REDUCE_MAX", group_by=[_REV], unit="ratio"),
    MetricDef(key="gpu_memory_util", types=["run.googleapis.com/container/gpu/memory_utilizations"],
              resource=RUN, aligner="ALIGN_PERCENTILE_95", reducer="REDUCE_MAX", group_by=[_REV],
              unit="ratio"),
    MetricDef(key="startup_latency", types=["run.googleapis.com/container/startup_latencies"], resource=RUN,
              aligner="ALIGN_PERCENTILE_95", reducer="REDUCE_MAX", group_by=[_REV], unit="ms"),
    # vLLM's Prometheus metrics (per instance).
    MetricDef(key="requests_running", types=[prom("vllm:num_requests_running", "gauge")], resource=PROM,
              aligner="ALIGN_MEAN", reducer="REDUCE_SUM", group_by=[_INST], unit="requests"),
    MetricDef(key="requests_waiting", types=[prom("vllm:num_requests_waiting", "gauge")], resource=PROM,
              aligner="ALIGN_MEAN", reducer="REDUCE_SUM", group_by=[_INST], unit="requests"),
    MetricDef(key="kv_usage",
              types=[prom("vllm:kv_cache_usage_perc", "gauge"), prom("vllm:gpu_cache_usage_perc", "gauge")],
              resource=PROM, aligner="ALIGN_MAX", reducer="REDUCE_MAX", group_by=[_INST], unit="ratio"),
    MetricDef(key="preemptions_rate", types=[prom("vllm:num_preemptions_total", "counter")], resource=PROM,
              aligner="ALIGN_RATE", reducer="REDUCE_SUM", group_by=[_INST], unit="/min", scale=60.0),
    MetricDef(key="generation_tokens_rate", types=[prom("vllm:generation_tokens_total", "counter")],
              resource=PROM, aligner="ALIGN_RATE", reducer="REDUCE_SUM", group_by=[_INST], unit="tok/s"),
    MetricDef(key="ttft_p95", types=[prom("vllm:time_to_first_token_seconds", "histogram")], resource=PROM,
              aligner="ALIGN_DELTA", reducer="REDUCE_PERCENTILE_95", group_by=[_INST], unit="s"),
    MetricDef(key="itl_p95",
              types=[prom("vllm:inter_token_latency_seconds", "histogram"),
                     prom("vllm:time_per_output_token_seconds", "histogram")],
              resource=PROM, aligner="ALIGN_DELTA", reducer="REDUCE_PERCENTILE_95", group_by=[_INST],
              unit="s"),
    MetricDef(key="e2e_p95", types=[prom("vllm:e2e_request_latency_seconds", "histogram")], resource=PROM,
              aligner="ALIGN_DELTA", reducer="REDUCE_PERCENTILE_95", group_by=[_INST], unit="s"),
)  # fmt: skip

BY_KEY: dict[str, MetricDef] = {m.key: m for m in CATALOG}


class Point(BaseModel):
    t: str  # the end of the alignment period (RFC 3339)
    v: float


class Series(BaseModel):
    """One aligned series: a metric for one revision / instance / response class, oldest point first."""

    key: str
    metric_type: str
    labels: dict[str, str] = Field(default_factory=dict)  # the group-by labels that name this series
    unit: str
    points: list[Point] = Field(default_factory=list)

    @property
    def instance(self) -> str | None:
        return self.labels.get("instance")

    @property
    def name(self) -> str:
        """``key`` plus what tells it apart (``kv_usage[instance=3f2a..]``)."""
        if not self.labels:
            return self.key
        parts = [f"{k}={short_label(v)}" for k, v in sorted(self.labels.items())]
        return f"{self.key}[{','.join(parts)}]"


class SeriesSet(BaseModel):
    """What one read of Cloud Monitoring returned for a service."""

    service: str
    revision: str | None = None
    start: str
    end: str
    period_s: float
    series: list[Series] = Field(default_factory=list)
    points_read: int = 0
    calls: int = 0
    truncated: bool = False  # some series or points were left out by the bounds
    missing: list[str] = Field(default_factory=list)  # keys with no data in the window

    def by_key(self, key: str) -> list[Series]:
        return [s for s in self.series if s.key == key]


class SeriesSummary(BaseModel):
    """A series compressed for a model: a few numbers, never the points."""

    name: str
    key: str
    labels: dict[str, str] = Field(default_factory=dict)
    unit: str
    points: int
    first: float  # mean of the first quarter of the window
    level: float  # mean of the last quarter: where it is now
    last: float
    peak: float
    peak_at: str
    low: float
    trend_per_min: float  # least-squares slope over the window, units per minute
    changed_at: str | None = None  # where the series stepped (None: no clear change)
    flat: bool = False  # no change at all over the window

    def line(self) -> str:
        """One line for the model's context."""
        f = _fmt
        bits = [f"{self.name} ({self.unit}): now {f(self.level)}"]
        if not self.flat:
            bits.append(f"was {f(self.first)}")
            bits.append(f"trend {'+' if self.trend_per_min >= 0 else ''}{f(self.trend_per_min)}/min")
            bits.append(f"peak {f(self.peak)} at {self.peak_at[11:19]}Z")
            if self.changed_at:
                bits.append(f"changed at {self.changed_at[11:19]}Z")
        else:
            bits.append("flat")
        return "; ".join(bits) + f" [{self.points} points]"


# -- compression ------------------------------------------------------------------------------------


def summarize(series: Series) -> SeriesSummary | None:
    """The few numbers that stand for ``series`` (None for a series without points)."""
    pts = series.points
    if not pts:
        return None
    vals = [p.v for p in pts]
    n = len(vals)
    q = max(1, n // 4)
    first = sum(vals[:q]) / q
    level = sum(vals[-q:]) / q
    i_peak = max(range(n), key=lambda i: vals[i])
    lo, hi = min(vals), max(vals)
    flat = hi - lo <= 0.005 * max(abs(hi), abs(lo), 1e-9)  # no change worth a word
    slope = 0.0
    changed: str | None = None
    if n >= 2 and not flat:
        ts = [_epoch(p.t) for p in pts]
        t0 = ts[0]
        xs = [(t - t0) / 60.0 for t in ts]
        mx, my = sum(xs) / n, sum(vals) / n
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, vals, strict=True)) / sxx if sxx else 0.0
        changed = _change_point(vals, [p.t for p in pts])
    return SeriesSummary(
        name=series.name,
        key=series.key,
        labels=dict(series.labels),
        unit=series.unit,
        points=n,
        first=_round(first),
        level=_round(level),
        last=_round(vals[-1]),
        peak=_round(vals[i_peak]),
        peak_at=pts[i_peak].t,
        low=_round(lo),
        trend_per_min=_round(slope),
        changed_at=changed,
        flat=flat,
    )


def _change_point(vals: list[float], times: list[str]) -> str | None:
    """The time the series stepped: the split that best separates a before and an after (the largest
    drop in squared error), kept only when the step is a large part of the series' range."""
    n = len(vals)
    if n < 4:
        return None
    total = sum(vals)
    total_sq = sum(v * v for v in vals)
    sse_all = total_sq - total * total / n
    if sse_all <= 0:
        return None
    best, best_i = 0.0, -1
    left = left_sq = 0.0
    for i in range(1, n):
        left += vals[i - 1]
        left_sq += vals[i - 1] ** 2
        r, r_sq = total - left, total_sq - left_sq
        sse = (left_sq - left * left / i) + (r_sq - r * r / (n - i))
        gain = sse_all - sse
        if gain > best:
            best, best_i = gain, i
    if best_i < 1:
        return None
    before = sum(vals[:best_i]) / best_i
    after = sum(vals[best_i:]) / (n - best_i)
    span = max(vals) - min(vals)
    # a real step explains most of the variance, moves the level by a good part of the range, and
    # fits far better than a straight line (a steady ramp has a trend, not a change point)
    if best / sse_all < 0.6 or abs(after - before) < 0.4 * span:
        return None
    xm = (n - 1) / 2
    ym = total / n
    sxx = sum((i - xm) ** 2 for i in range(n))
    b = sum((i - xm) * (v - ym) for i, v in enumerate(vals)) / sxx
    sse_line = sum((v - (ym + b * (i - xm))) ** 2 for i, v in enumerate(vals))
    if sse_all - best > 0.5 * sse_line:
        return None
    return times[best_i]


def summaries(series_set: SeriesSet) -> list[SeriesSummary]:
    out = [summarize(s) for s in series_set.series]
    return [s for s in out if s is not None]


# -- the reader ---------------------------------------------------------------------------------------


def quote(value: str) -> str:
    """``value`` as a Monitoring filter string literal."""
    cleaned = "".join(ch if ch.isprintable() else " " for ch in str(value))
    return '"' + cleaned.replace("\\", "\\\\").replace('"', '\\"') + '"'


def build_filter(metric: MetricDef, metric_type: str, service: str, revision: str | None = None) -> str:
    """The Monitoring filter for one metric of a service (every value validated or quoted)."""
    from mcp_tools.names import validate_revision_name, validate_service_name

    validate_service_name(service)
    parts = [f"metric.type = {quote(metric_type)}", f"resource.type = {quote(metric.resource)}"]
    if metric.resource == RUN:
        parts.append(f"resource.labels.service_name = {quote(service)}")
        if revision:
            parts.append(f"resource.labels.revision_name = {quote(validate_revision_name(revision))}")
    else:
        parts.append(f"resource.labels.namespace = {quote(service)}")
    return " AND ".join(parts)


def _check_window(window_s: float, period_s: float) -> int:
    for what, v in (("window", window_s), ("period", period_s)):
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
            raise UserError(f"{what} must be a positive number of seconds, not {v!r}")
    if window_s > MAX_WINDOW_S:
        raise UserError(f"window is longer than {MAX_WINDOW_S / 3600:g} h")
    if period_s < MIN_PERIOD_S:
        raise UserError(f"period must be at least {MIN_PERIOD_S:g} s (Cloud Monitoring's alignment)")
    if period_s > window_s:
        raise UserError("period must not be longer than the window")
    points = math.ceil(window_s / period_s)
    if points > MAX_POINTS:
        raise UserError(
            f"window / period is {points} points per series, more than {MAX_POINTS}: "
            "widen the period or narrow the window"
        )
    return points


def parse_keys(keys: list[str] | str | None) -> list[MetricDef]:
    """The catalog entries named by ``keys`` (all when None); an unknown key is a ``UserError``."""
    if keys is None or keys == [] or keys == "":
        return list(CATALOG)
    names = [k.strip() for k in (keys.split(",") if isinstance(keys, str) else keys) if k.strip()]
    bad = [k for k in names if k not in BY_KEY]
    if bad:
        raise UserError(f"unknown series {', '.join(bad)} (one of {', '.join(BY_KEY)})")
    return [BY_KEY[k] for k in names]


class CloudMonitoring(ApiReader):
    """Read a Cloud Run service's time series from Cloud Monitoring."""

    @property
    def client(self) -> Any:
        return self.lazy_client(
            "monitoring",
            "google.cloud.monitoring_v3",
            "MetricServiceClient",
            endpoint=self.settings.monitoring_api_endpoint,
            transport="grpc",
        )

    def close(self) -> None:
        for client in self.drop_clients():
            with contextlib.suppress(Exception):  # best effort
                client.transport.close()

    def read(
        self,
        service: str,
        *,
        keys: list[str] | str | None = None,
        window_s: float = DEFAULT_WINDOW_S,
        period_s: float = DEFAULT_PERIOD_S,
        end: datetime | None = None,
        revision: str | None = None,
    ) -> SeriesSet:
        """The service's series over the last ``window_s`` (ending at ``end``, default now), aligned
        to ``period_s``. A metric with no data is listed in ``missing``, not an error. ``revision``
        narrows Cloud Run's series (per revision); vLLM's are per instance (the collector's
        ``prometheus_target`` names the service and the instance, not the revision)."""
        metrics = parse_keys(keys)
        max_points = _check_window(window_s, period_s)
        end = (end or datetime.now(UTC)).astimezone(UTC)
        start = end - timedelta(seconds=window_s)
        out = SeriesSet(
            service=service, revision=revision, start=_iso(start), end=_iso(end), period_s=period_s
        )
        for m in metrics:
            found: list[Series] = []
            for metric_type in m.types:
                found, points, truncated, calls = self._list(
                    m, metric_type, service, revision, start, end, period_s, max_points
                )
                out.calls += calls
                out.points_read += points
                out.truncated = out.truncated or truncated
                if found:
                    break
            if found:
                out.series += found
            else:
                out.missing.append(m.key)
        return out

    def _list(
        self,
        m: MetricDef,
        metric_type: str,
        service: str,
        revision: str | None,
        start: datetime,
        end: datetime,
        period_s: float,
        max_points: int,
    ) -> tuple[list[Series], int, bool, int]:
        from google.cloud import monitoring_v3
        from google.protobuf import duration_pb2, timestamp_pb2

        end_s = int(math.ceil(end.timestamp()))
        start_s = end_s - int(round((end - start).total_seconds()))
        interval = monitoring_v3.TimeInterval(
            start_time=timestamp_pb2.Timestamp(seconds=start_s),
            end_time=timestamp_pb2.Timestamp(seconds=end_s),
        )
        agg = monitoring_v3.Aggregation(
            alignment_period=duration_pb2.Duration(seconds=int(period_s)),
            per_series_aligner=getattr(monitoring_v3.Aggregation.Aligner, m.aligner),
            cross_series_reducer=getattr(monitoring_v3.Aggregation.Reducer, m.reducer),
            group_by_fields=list(m.group_by),
        )
        request = monitoring_v3.ListTimeSeriesRequest(
            name=f"projects/{self.project}",
            filter=build_filter(m, metric_type, service, revision),
            interval=interval,
            aggregation=agg,
            view=monitoring_v3.ListTimeSeriesRequest.TimeSeriesView.FULL,
            page_size=PAGE_SIZE,
        )
        state = {"calls": 0}

        def _fetch() -> list[Any]:
            state["calls"] = 0
            got: list[Any] = []
            # the pager asks for the next page with the same timeout; stop once the bound is reached
            for page in self.client.list_time_series(request=request, **self.policy.rpc).pages:
                state["calls"] += 1
                got.extend(page.time_series)
                if len(got) > MAX_SERIES:
                    break
            return got

        from mcp_tools.errors import NotFoundError

        try:
            raw = call(f"Cloud Monitoring (list time series {m.key})", _fetch, policy=self.policy)
        except NotFoundError:  # Monitoring knows no such metric type (yet): no data, not a failure
            return [], 0, False, state["calls"]
        truncated = len(raw) > MAX_SERIES
        series: list[Series] = []
        points = 0
        for ts in raw[:MAX_SERIES]:
            pts = [Point(t=_pb_time(p.interval.end_time), v=_value(p.value) * m.scale) for p in ts.points]
            pts.sort(key=lambda p: p.t)  # the API answers newest first
            if len(pts) > max_points:
                pts, truncated = pts[-max_points:], True
            points += len(pts)
            labels = {**dict(ts.resource.labels), **dict(ts.metric.labels)}
            wanted = {f.rsplit(".", 1)[-1] for f in m.group_by}
            series.append(
                Series(
                    key=m.key,
                    metric_type=metric_type,
                    labels={k: str(v) for k, v in labels.items() if k in wanted},
                    unit=m.unit,
                    points=pts,
                )
            )
        series.sort(key=lambda s: s.name)
        return series, points, truncated, state["calls"]


def read_series(
    service: str,
    *,
    settings: Settings | None = None,
    policy: CallPolicy | None = None,
    **kwargs: Any,
) -> SeriesSet:
    """One read of a service's series (``CloudMonitoring.read``) with a client that is closed after."""
    mon = CloudMonitoring(settings, policy=policy)
    try:
        return mon.read(service, **kwargs)
    finally:
        mon.close()


# -- helpers ----------------------------------------------------------------------------------------


def _value(v: Any) -> float:
    field = v._pb.WhichOneof("value") if hasattr(v, "_pb") else None
    if field == "double_value":
        return float(v.double_value)
    if field == "int64_value":
        return float(v.int64_value)
    if field == "bool_value":
        return 1.0 if v.bool_value else 0.0
    if field == "distribution_value":
        return float(v.distribution_value.mean)
    return 0.0


def _pb_time(ts: Any) -> str:
    if isinstance(ts, datetime):
        return _iso(ts)
    return _iso(datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, UTC))


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _round(v: float) -> float:
    if v == 0 or not math.isfinite(v):
        return 0.0 if not math.isfinite(v) else v
    return float(f"{v:.4g}")


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def short_label(v: str) -> str:
    """A label value for display: long hex ids (instances) cut to 8 characters."""
    return v[:8] if re.fullmatch(r"[0-9a-f]{12,}(:\d+)?", v) else v
