"""vLLM's metrics: its histogram bucket bounds, the counters the app keeps, and the collector that
formats them (vLLM's metric names) at scrape time."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.vllm_sim.engine import Engine

TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
E2E_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip


class Histogram:
    """A cheap histogram (vLLM's bucket bounds) that can record one value n times at once."""

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float, n: int = 1) -> None:
        if n <= 0:
            return
        self.counts[bisect_left(self.bounds, value)] += n
        self.sum += value * n
        self.count += n

    def buckets(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        acc = 0
        for bound, c in zip(self.bounds, self.counts, strict=False):
            acc += c
            out.append((repr(float(bound)), float(acc)))
        out.append(("+Inf", float(self.count)))
        return out


class Metrics:
    def __init__(self) -> None:
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)
        self.queue = Histogram(E2E_BUCKETS)
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.preemptions = 0
        self.success: dict[str, int] = {"length": 0, "stop": 0, "abort": 0}


class SimCollector:
    """Builds vLLM's metric families from the sim's state at scrape time (prometheus_client formats them)."""

    def __init__(self, model_name: str, metrics: Metrics, engine: Engine) -> None:
        self.model_name = model_name
        self.metrics = metrics
        self.engine = engine

    def collect(self) -> Iterable[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        m = self.metrics
        eng = self.engine
        labels = ["model_name"]
        lv = [self.model_name]

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=labels)
            g.add_metric(lv, value)
            return g

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(name, doc, labels=labels)
            c.add_metric(lv, value)
            return c

        def hist(name: str, doc: str, h: Histogram) -> HistogramMetricFamily:
            f = HistogramMetricFamily(name, doc, labels=labels)
            f.add_metric(lv, buckets=h.buckets(), sum_value=h.sum)
            return f

        yield gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches.", len(eng.running)
        )
        yield gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed.", len(eng.waiting)
        )
        yield gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", eng.kv_usage)
        yield gauge(
            "vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", eng.kv_usage
        )
        yield counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine.", m.preemptions
        )
        yield counter("vllm:prompt_tokens", "Number of prefill tokens processed.", m.prompt_tokens)
        yield counter("vllm:generation_tokens", "Number of generation tokens processed.", m.generation_tokens)
        success = CounterMetricFamily(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels=["model_name", "finished_reason"],
        )
        for reason, v in m.success.items():
            success.add_metric([*lv, reason], v)
        yield success
        yield hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", m.ttft)
        yield hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", m.itl)
        yield hist(
            "vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", m.itl
        )
        yield hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", m.e2e)
        yield hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase.", m.queue)
