"""parse_vllm_metrics on /metrics pages in vLLM's own format (V1 and V0 metric names)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from mcp_tools.errors import UserError
from mcp_tools.metrics import histogram_quantile, parse_vllm_metrics

MODEL = "google/gemma-4-12b-it"
# vLLM V1's bucket boundaries (vllm/v1/metrics/loggers.py)
TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]
ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5]


def _v1_page() -> str:
    """A V1 page produced the way vLLM produces it: prometheus_client, vLLM's names and labels."""
    reg = CollectorRegistry()
    labels = ["model_name", "engine"]
    running = Gauge(
        "vllm:num_requests_running", "Number of requests in model execution batches.", labels, registry=reg
    )
    waiting = Gauge(
        "vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels, registry=reg
    )
    kv = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels, registry=reg)
    pre = Counter(
        "vllm:num_preemptions", "Cumulative number of preemption from the engine.", labels, registry=reg
    )
    prompt = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels, registry=reg)
    gen = Counter("vllm:generation_tokens", "Number of generation tokens processed.", labels, registry=reg)
    ttft = Histogram(
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        labels,
        buckets=TTFT_BUCKETS,
        registry=reg,
    )
    itl = Histogram(
        "vllm:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        labels,
        buckets=ITL_BUCKETS,
        registry=reg,
    )
    for engine, (r, w, k) in {"0": (4, 7, 0.97), "1": (2, 1, 0.40)}.items():
        running.labels(MODEL, engine).set(r)
        waiting.labels(MODEL, engine).set(w)
        kv.labels(MODEL, engine).set(k)
    pre.labels(MODEL, "0").inc(12)
    prompt.labels(MODEL, "0").inc(51234)
    gen.labels(MODEL, "0").inc(8000)
    gen.labels(MODEL, "1").inc(2000)
    # TTFT: 50 at 30 ms, 40 at 70 ms (engine 0) and 10 at 300 ms (engine 1)
    for _ in range(50):
        ttft.labels(MODEL, "0").observe(0.03)
    for _ in range(40):
        ttft.labels(MODEL, "0").observe(0.07)
    for _ in range(10):
        ttft.labels(MODEL, "1").observe(0.3)
    for _ in range(200):
        itl.labels(MODEL, "0").observe(0.04)
    return generate_latest(reg).decode()


V0_PAGE = """\
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="gemma-12b"} 1.0
# HELP vllm:num_requests_swapped Number of requests swapped to CPU.
# TYPE vllm:num_requests_swapped gauge
vllm:num_requests_swapped{model_name="gemma-12b"} 0.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="gemma-12b"} 0.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="gemma-12b"} 0.25
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",num_gpu_blocks="2048"} 1.0
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{model_name="gemma-12b"} 0.0
# HELP vllm:time_per_output_token_seconds Histogram of time per output token in seconds.
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_sum{model_name="gemma-12b"} 3.0
vllm:time_per_output_token_seconds_bucket{le="0.01",model_name="gemma-12b"} 0.0
vllm:time_per_output_token_seconds_bucket{le="0.025",model_name="gemma-12b"} 0.0
vllm:time_per_output_token_seconds_bucket{le="0.05",model_name="gemma-12b"} 60.0
vllm:time_per_output_token_seconds_bucket{le="0.075",model_name="gemma-12b"} 100.0
vllm:time_per_output_token_seconds_bucket{le="+Inf",model_name="gemma-12b"} 100.0
vllm:time_per_output_token_seconds_count{model_name="gemma-12b"} 100.0
"""


def test_v1_names() -> None:
    m = parse_vllm_metrics(_v1_page())
    assert m.model_names == [MODEL]
    assert m.kv_cache_usage == pytest.approx(0.97)  # the fullest engine
    assert m.kv_cache_usage_metric == "vllm:kv_cache_usage_perc"
    assert m.num_requests_running == 6 and m.num_requests_waiting == 8  # summed over engines
    assert m.preemptions_total == 12
    assert m.prompt_tokens_total == 51234 and m.generation_tokens_total == 10000
    assert m.ttft is not None and m.ttft.count == 100
    assert m.ttft.mean == pytest.approx((50 * 0.03 + 40 * 0.07 + 10 * 0.3) / 100)
    # p50: rank 50 ends the (0.02, 0.04] bucket; p90: ends (0.06, 0.08]; p99: 9/10 into (0.25, 0.5]
    assert m.ttft.p50 == pytest.approx(0.04)
    assert m.ttft.p90 == pytest.approx(0.08)
    assert m.ttft.p99 == pytest.approx(0.25 + 0.25 * 0.9)
    assert m.itl is not None and m.itl.metric == "vllm:inter_token_latency_seconds"
    assert 0.025 < (m.itl.p50 or 0) <= 0.05
    assert "KV cache usage 97.0%" in m.summary()


def test_v0_names() -> None:
    m = parse_vllm_metrics(V0_PAGE)
    assert m.kv_cache_usage == pytest.approx(0.25)
    assert m.kv_cache_usage_metric == "vllm:gpu_cache_usage_perc"
    assert m.num_requests_swapped == 0
    assert m.itl is not None and m.itl.metric == "vllm:time_per_output_token_seconds"
    # rank 50 lies 50/60 of the way through (0.025, 0.05]
    assert m.itl.p50 == pytest.approx(0.025 + 0.025 * 50 / 60)
    assert m.itl.p90 == pytest.approx(0.05 + 0.025 * 30 / 40)
    assert m.itl.mean == pytest.approx(0.03)
    assert m.cache_config["num_gpu_blocks"] == "2048"
    assert m.ttft is None


def test_empty_histogram_has_no_percentiles_and_inf_bucket_is_capped() -> None:
    page = (
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        'vllm:time_to_first_token_seconds_bucket{le="0.1"} 0.0\n'
        'vllm:time_to_first_token_seconds_bucket{le="+Inf"} 0.0\n'
        "vllm:time_to_first_token_seconds_count 0.0\n"
        "vllm:time_to_first_token_seconds_sum 0.0\n"
    )
    m = parse_vllm_metrics(page)
    assert m.ttft is not None and m.ttft.count == 0 and m.ttft.p50 is None
    assert histogram_quantile(0.99, [(0.1, 1.0), (float("inf"), 10.0)]) == 0.1


def test_not_prometheus_text_is_a_user_error() -> None:
    with pytest.raises(UserError, match="Prometheus exposition format"):
        parse_vllm_metrics('vllm:x{model_name="a" 1\n')


def test_no_vllm_metrics() -> None:
    m = parse_vllm_metrics("# TYPE up gauge\nup 1\n")
    assert m.metric_names == 0 and m.kv_cache_usage is None
    assert m.summary() == "no vLLM metrics found"
