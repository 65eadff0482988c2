"""Cloud Monitoring end to end: the official ``google-cloud-monitoring`` client against the sandbox
(filters, aggregation, paging, Google's errors), the series reader, compression, and observe with
Monitoring readable and not."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
from google.api import metric_pb2
from google.api_core import exceptions as gexc
from google.cloud import monitoring_v3
from google.protobuf import duration_pb2, timestamp_pb2

from graph.config import Configuration
from graph.diagnosis import build_context
from graph.nodes.observe import observe_service
from mcp_tools.endpoint import tls_context
from mcp_tools.errors import UserError
from mcp_tools.monitoring import CloudMonitoring, Point, Series, build_filter, parse_keys, summarize
from mcp_tools.settings import Settings
from sandbox.testing import monitoring_client, sandbox_factory  # noqa: F401  (fixture)

A = monitoring_v3.Aggregation
KV = "prometheus.googleapis.com/vllm:kv_cache_usage_perc/gauge"
TOKENS = "prometheus.googleapis.com/vllm:generation_tokens_total/counter"
TTFT = "prometheus.googleapis.com/vllm:time_to_first_token_seconds/histogram"


def _interval(seconds: float = 1800) -> monitoring_v3.TimeInterval:
    now = time.time()
    return monitoring_v3.TimeInterval(
        start_time=timestamp_pb2.Timestamp(seconds=int(now - seconds)),
        end_time=timestamp_pb2.Timestamp(seconds=int(now)),
    )


def _list(client: Any, sb: Any, flt: str, **kw: Any) -> list[Any]:
    req = monitoring_v3.ListTimeSeriesRequest(
        name=f"projects/{sb.project}", filter=flt, interval=kw.pop("interval", _interval()), **kw
    )
    return list(client.list_time_series(request=req, retry=None, timeout=10))


@pytest.fixture
def hot(sandbox_factory: Any) -> Any:  # noqa: F811
    return sandbox_factory(scenario="hot-instance")


def test_raw_series_filters_and_kinds(hot: Any) -> None:
    client = monitoring_client(hot)
    kv = _list(client, hot, f'metric.type = "{KV}" AND resource.labels.namespace = "gemma-4-12b"')
    assert len(kv) == 2  # two instances, one series each
    assert {ts.resource.type for ts in kv} == {"prometheus_target"}
    assert kv[0].metric_kind == metric_pb2.MetricDescriptor.MetricKind.GAUGE
    levels = sorted(ts.points[0].value.double_value for ts in kv)
    assert levels[1] > 0.9 and levels[0] < 0.5  # the hot instance's cache is full, the other's is not
    # points come newest first, 30 s apart, inside the interval
    t = [p.interval.end_time.timestamp() for p in kv[0].points]
    assert t == sorted(t, reverse=True) and abs((t[0] - t[1]) - 30) < 1e-6
    one = kv[0].resource.labels["instance"]
    only = _list(client, hot, f'metric.type = "{KV}" AND resource.label.instance = "{one}"')
    assert [ts.resource.labels["instance"] for ts in only] == [one]
    none = _list(client, hot, f'metric.type = "{KV}" AND resource.labels.namespace = "other-service"')
    assert none == []
    counts = _list(
        client,
        hot,
        'metric.type="run.googleapis.com/request_count" '
        'metric.labels.response_code_class = one_of("2xx","5xx")',
    )
    assert {ts.metric.labels["response_code_class"] for ts in counts} == {"2xx"}
    assert counts[0].value_type == metric_pb2.MetricDescriptor.ValueType.INT64
    hist = _list(client, hot, f'metric.type = "{TTFT}"')
    d = hist[0].points[0].value.distribution_value
    assert d.count > 0 and len(d.bucket_counts) == len(d.bucket_options.explicit_buckets.bounds) + 1


def test_aggregation_aligns_and_reduces(hot: Any) -> None:
    client = monitoring_client(hot)
    per_instance = A(
        alignment_period=duration_pb2.Duration(seconds=300),
        per_series_aligner=A.Aligner.ALIGN_RATE,
        cross_series_reducer=A.Reducer.REDUCE_SUM,
        group_by_fields=["resource.label.instance"],
    )
    rates = _list(client, hot, f'metric.type = "{TOKENS}"', aggregation=per_instance)
    assert len(rates) == 2 and all(len(ts.points) == 6 for ts in rates)  # 30 min / 5 min
    assert set(rates[0].resource.labels) == {"instance"}  # only the group-by label survives
    hot_rate, cold_rate = sorted((ts.points[0].value.double_value for ts in rates), reverse=True)
    assert hot_rate > 2 * cold_rate > 0
    total = A(
        alignment_period=duration_pb2.Duration(seconds=300),
        per_series_aligner=A.Aligner.ALIGN_RATE,
        cross_series_reducer=A.Reducer.REDUCE_SUM,
    )
    (summed,) = _list(client, hot, f'metric.type = "{TOKENS}"', aggregation=total)
    assert summed.points[0].value.double_value == pytest.approx(hot_rate + cold_rate, rel=1e-6)
    p95 = A(
        alignment_period=duration_pb2.Duration(seconds=300),
        per_series_aligner=A.Aligner.ALIGN_DELTA,
        cross_series_reducer=A.Reducer.REDUCE_PERCENTILE_95,
        group_by_fields=["resource.label.instance"],
    )
    ttft = sorted(
        ts.points[0].value.double_value
        for ts in _list(client, hot, f'metric.type = "{TTFT}"', aggregation=p95)
    )
    assert ttft[1] > 3 * ttft[0]  # the hot instance queues: its TTFT is far worse


def test_paging_and_errors(hot: Any) -> None:
    client = monitoring_client(hot)
    req = monitoring_v3.ListTimeSeriesRequest(
        name=f"projects/{hot.project}", filter=f'metric.type = "{KV}"', interval=_interval(), page_size=1
    )
    pages = list(client.list_time_series(request=req, retry=None, timeout=10).pages)
    assert [len(p.time_series) for p in pages] == [1, 1]
    assert pages[0].next_page_token and not pages[1].next_page_token
    seen = {p.time_series[0].resource.labels["instance"] for p in pages}
    assert len(seen) == 2
    with pytest.raises(gexc.InvalidArgument, match="filter"):
        _list(client, hot, 'metric.type = "x" AND (resource.type = ')
    with pytest.raises(gexc.InvalidArgument, match="exactly one metric.type"):
        _list(client, hot, 'resource.type = "prometheus_target"')
    with pytest.raises(gexc.NotFound, match="Cannot find metric"):
        _list(client, hot, 'metric.type = "prometheus.googleapis.com/nope/gauge"')
    bad_token = monitoring_v3.ListTimeSeriesRequest(
        name=f"projects/{hot.project}", filter=f'metric.type = "{KV}"', interval=_interval(), page_token="zzz"
    )
    with pytest.raises(gexc.InvalidArgument, match="pageToken"):
        list(client.list_time_series(request=bad_token, retry=None, timeout=10))
    gauge_rate = A(
        alignment_period=duration_pb2.Duration(seconds=60), per_series_aligner=A.Aligner.ALIGN_RATE
    )
    with pytest.raises(gexc.InvalidArgument, match="kind GAUGE"):
        _list(client, hot, f'metric.type = "{KV}"', aggregation=gauge_rate)


def test_reader_per_instance_and_bounds(hot: Any) -> None:
    mon = CloudMonitoring(Settings(**hot.settings_fields()))
    ss = mon.read("gemma-4-12b", keys=["kv_usage", "requests_waiting", "request_rate", "startup_latency"])
    kv = ss.by_key("kv_usage")
    assert len(kv) == 2 and {s.instance for s in kv} and all(len(s.points) == 30 for s in kv)
    assert all(a.t < b.t for s in kv for a, b in zip(s.points, s.points[1:], strict=False))  # oldest first
    waiting = sorted(s.points[-1].v for s in ss.by_key("requests_waiting"))
    assert waiting[0] == 0 and waiting[1] > 5
    assert {s.labels["response_code_class"] for s in ss.by_key("request_rate")} == {"2xx"}
    assert "startup_latency" in ss.missing  # the instances started before the window
    assert ss.points_read == sum(len(s.points) for s in ss.series) and ss.calls == 4
    with pytest.raises(UserError, match="points per series"):
        mon.read("gemma-4-12b", window_s=86400, period_s=60)
    with pytest.raises(UserError, match="unknown series"):
        parse_keys(["kv_usage", "nope"])
    with pytest.raises(UserError, match="invalid Cloud Run service name"):
        build_filter(parse_keys(["kv_usage"])[0], KV, 'x" OR metric.type = "y')


def _series(values: list[float]) -> Series:
    t0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC).timestamp()
    pts = [
        Point(t=datetime.fromtimestamp(t0 + 60 * i, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), v=v)
        for i, v in enumerate(values)
    ]
    labels = {"instance": "ab" * 16}
    return Series(key="generation_tokens_rate", metric_type=TOKENS, labels=labels, unit="tok/s", points=pts)


def test_compression_level_trend_peak_change() -> None:
    step = summarize(_series([110.0] * 20 + [0.0] * 10))
    assert step is not None
    assert (step.first, step.level, step.peak, step.low) == (110.0, 0.0, 110.0, 0.0)
    assert step.changed_at == "2026-01-01T12:20:00Z" and step.trend_per_min < 0 and not step.flat
    assert step.peak_at == "2026-01-01T12:00:00Z"
    line = step.line()
    assert "now 0" in line and "changed at 12:20:00Z" in line and "[30 points]" in line
    assert "[instance=abababab]" in line  # instance ids are shortened to 8 characters
    ramp = summarize(_series([float(i) for i in range(30)]))
    assert ramp is not None and ramp.trend_per_min == pytest.approx(1.0) and ramp.changed_at is None
    flat = summarize(_series([4.0] * 30))
    assert flat is not None and flat.flat and flat.line().endswith("flat [30 points]")
    assert summarize(_series([])) is None


def _cfg(sb: Any, **kw: Any) -> Configuration:
    return Configuration.from_settings(
        service="gemma-4-12b", **sb.settings_fields(), use_model=False, retry_base_s=0.05, **kw
    )


def test_observe_carries_compressed_series(sandbox_factory: Any) -> None:  # noqa: F811
    sb = sandbox_factory(scenario="stuck-engine")
    until = datetime.now(UTC)
    obs, summary = observe_service(  # the stuck engine's probe answers never: waited for 1 s, not 8
        _cfg(sb, probe_timeout_s=1.0),
        since=datetime.fromtimestamp(until.timestamp() - 3600, UTC),
        until=until,
    )
    assert summary.series_read and summary.series_points > 0 and obs.blind_to("monitoring") is None
    assert obs.health is True  # /health answers: the engine is stuck, not down
    tokens = next(s for s in obs.series_summaries() if s.key == "generation_tokens_rate")
    running = next(s for s in obs.series_summaries() if s.key == "requests_running")
    assert tokens.level == 0 and tokens.first > 50 and tokens.changed_at is not None
    assert running.level == 4
    context = build_context(obs)
    assert "time series from Cloud Monitoring" in context
    assert "generation_tokens_rate" in context and "changed at" in context
    assert '"v":' not in context and obs.series is not None
    raw = obs.series.by_key("generation_tokens_rate")[0].points
    assert not any(f"{p.v:.6g}" in context for p in raw if p.v not in (0.0,) and p.v != tokens.first)


def test_observe_degrades_when_monitoring_is_down(sandbox_factory: Any) -> None:  # noqa: F811
    sb = sandbox_factory(scenario="healthy")
    sb.faults.inject("monitoring", "status", 503, count=None)
    until = datetime.now(UTC)
    obs, summary = observe_service(
        _cfg(sb, retries=2), since=datetime.fromtimestamp(until.timestamp() - 4 * 3600, UTC), until=until
    )
    blind = obs.blind_to("monitoring")
    assert blind is not None and blind.reason == "error" and "Cloud Monitoring" in blind.why
    assert obs.series is None and not summary.series_read
    assert any(u.startswith("Cloud Monitoring:") for u in summary.unread)
    assert obs.logs and obs.health is True  # the rest was read: the cycle goes on, degraded
    context = build_context(obs)
    assert "not read:" in context and "no conclusion can rest on metrics over time" in context


def test_observe_does_not_reach_for_real_monitoring_against_an_emulator(sandbox_factory: Any) -> None:  # noqa: F811
    sb = sandbox_factory(scenario="healthy")
    fields = {**sb.settings_fields(), "monitoring_api_endpoint": None}
    cfg = Configuration.from_settings(service="gemma-4-12b", **fields, use_model=False)
    cfg = cfg.model_copy(update={"monitoring_api_endpoint": None})
    assert not cfg.monitoring_wanted
    until = datetime.now(UTC)
    obs, _ = observe_service(cfg, since=datetime.fromtimestamp(until.timestamp() - 600, UTC), until=until)
    assert obs.series is None and obs.blind_to("monitoring") is None


def test_metrics_series_tool_through_the_official_mcp_client(
    sandbox_factory: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tool of the server ``gemma-sre mcp`` serves, built here, through the official client."""
    from sandbox.testing import sandbox_env
    from tests.mcp_client import session_here, text_of

    sb = sandbox_factory(scenario="load-ramp")
    for name, value in {**sandbox_env(sb), "GEMMA_SRE_POLICY": "read-only"}.items():
        monkeypatch.setenv(name, value)
    st = session_here()
    try:
        tools = {t.name: t for t in st.run(lambda s: s.list_tools()).tools}
        assert tools["metrics_series"].annotations.readOnlyHint is True  # listed under read-only
        r = st.call(
            "metrics_series", {"service_name": "gemma-4-12b", "series": ["requests_waiting", "kv_usage"]}
        )
        assert not r.isError, text_of(r)
        sc = r.structuredContent
        assert sc["series"] is None and sc["points_read"] == 60  # two series of 30 points, none returned
        waiting = next(x for x in sc["summaries"] if x["key"] == "requests_waiting")
        assert waiting["level"] > 20 and waiting["first"] < 1 and waiting["trend_per_min"] > 0
        assert "requests_waiting[instance=" in text_of(r) and '"v"' not in text_of(r)
        pts = st.call(
            "metrics_series",
            {
                "service_name": "gemma-4-12b",
                "series": ["kv_usage"],
                "include_points": True,
                "window_minutes": 10,
            },
        ).structuredContent
        assert len(pts["series"]) == 1 and len(pts["series"][0]["points"]) == 10
        bad = st.call("metrics_series", {"service_name": "gemma-4-12b", "series": ["nope"]})
        assert bad.isError and "unknown series nope" in text_of(bad)
        wide = st.call("metrics_series", {"service_name": "gemma-4-12b", "window_minutes": 100000})
        assert wide.isError and "window_minutes" in text_of(wide)
    finally:
        st.close()


def test_stuck_engine_hangs_generation_not_health(sandbox_factory: Any) -> None:  # noqa: F811
    import httpx

    from sandbox.faults import FaultInjector, stall_generation

    sb = sandbox_factory(scenario="stuck-engine")
    uri = sb.cloudrun.get_service(sb.project, sb.location, "gemma-4-12b")["uri"]
    assert httpx.get(f"{uri}/health", timeout=5, verify=tls_context()).status_code == 200
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            f"{uri}/v1/completions", json={"prompt": "hi", "max_tokens": 1}, timeout=0.5, verify=tls_context()
        )
    # the stall is one revision's generation: another revision (a restart) and other paths are free
    f = FaultInjector()
    stall_generation(f, "svc-00001-abc")
    assert f.take(("/health", "svc-00001-abc")) is None
    assert f.take(("/v1/completions", "svc-00002-def")) is None
    hit = f.take(("/v1/completions", "svc-00001-abc", "model"))
    assert hit is not None and hit.kind == "hang"


def test_metrics_command_sparklines_chart_json_and_bad_input(tmp_path: Any, cli: Any) -> None:
    import json

    def metrics(*args: str) -> Any:
        return cli("metrics", *args)

    chart = tmp_path / "series.png"
    keys = "generation_tokens_rate,requests_running"
    r = metrics("--sandbox", "--scenario", "stuck-engine", "--series", keys, "--chart", str(chart))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "generation_tokens_rate[instance=" in r.stdout and "▁" in r.stdout and "█" in r.stdout
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    j = metrics("--sandbox", "--scenario", "stuck-engine", "--series", "kv_usage", "--json")
    assert j.returncode == 0, j.stderr[-2000:]
    doc = json.loads(j.stdout)
    assert doc["service"] == "gemma-4-12b" and len(doc["series"][0]["points"]) == 30
    bad = metrics("--series", "nope")
    assert bad.returncode == 2 and "unknown series nope" in bad.stderr and "Traceback" not in bad.stderr
    no_service = metrics()
    assert no_service.returncode == 2 and "--service" in no_service.stderr


def test_a_restart_of_the_stuck_engine_makes_progress_again(sandbox_factory: Any) -> None:  # noqa: F811
    import httpx

    from sandbox.scenarios import scenario_specs

    sb = sandbox_factory(scenario="stuck-engine")
    mon = CloudMonitoring(Settings(**sb.settings_fields()))
    before = mon.read("gemma-4-12b", keys=["generation_tokens_rate"]).series
    assert len(before) == 1 and before[0].points[-1].v == 0  # stuck: no token for 10 minutes
    (spec,), _ = scenario_specs("stuck-engine")
    restarted = spec.model_copy(update={"env": {**spec.env, "RESTARTED": "1"}})
    sb.deploy(restarted, wait=True)  # a restart: a new revision, the same serving configuration
    sb.clock.advance(5 * 60)
    uri = sb.cloudrun.get_service(sb.project, sb.location, "gemma-4-12b")["uri"]
    r = httpx.post(
        f"{uri}/v1/completions", json={"prompt": "hi", "max_tokens": 1}, timeout=10, verify=tls_context()
    )
    assert r.status_code == 200  # the stall was the old revision's
    after = mon.read("gemma-4-12b", keys=["generation_tokens_rate"], window_s=600).series
    old = before[0].instance
    new = [s for s in after if s.instance != old]
    assert len(new) == 1 and new[0].points[-1].v > 50  # the new instance makes tokens
    stale = [s for s in after if s.instance == old]
    assert not stale or stale[0].points[-1].t < new[0].points[-1].t  # the old one stopped reporting
    mon.close()
