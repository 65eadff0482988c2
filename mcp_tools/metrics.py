"""vLLM's Prometheus ``/metrics`` text, parsed into the figures an SRE reads.

Both metric generations are understood: the V0 names (``vllm:gpu_cache_usage_perc``,
``vllm:time_per_output_token_seconds``) and the V1 ones (``vllm:kv_cache_usage_perc``,
``vllm:inter_token_latency_seconds``). Gauges and counters are summed over label sets (engines,
data-parallel ranks) except KV-cache usage, which reports the fullest engine. Percentiles come from
the histogram buckets by linear interpolation, as Prometheus' ``histogram_quantile`` does.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, Field

from mcp_tools.errors import UserError

KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
ITL = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
TTFT = ("vllm:time_to_first_token_seconds",)
E2E = ("vllm:e2e_request_latency_seconds",)
QUEUE = ("vllm:request_queue_time_seconds",)
QUANTILES = (0.5, 0.9, 0.99)


class Percentiles(BaseModel):
    """A latency histogram summarised (seconds). Percentiles are None while the histogram is empty."""

    metric: str
    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


class VllmMetrics(BaseModel):
    model_names: list[str] = Field(default_factory=list)
    kv_cache_usage: float | None = None  # 0..1, the fullest engine
    kv_cache_usage_metric: str | None = None  # which name the server used
    num_requests_running: float | None = None
    num_requests_waiting: float | None = None
    num_requests_swapped: float | None = None
    preemptions_total: float | None = None
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    request_success_total: float | None = None
    ttft: Percentiles | None = None
    itl: Percentiles | None = None
    e2e: Percentiles | None = None
    queue_time: Percentiles | None = None
    cache_config: dict[str, str] = Field(default_factory=dict)
    metric_names: int = 0  # how many vllm: families were seen

    def summary(self) -> str:
        """A few readable lines."""

        def pct(p: Percentiles | None, label: str) -> str | None:
            if p is None or p.count == 0 or p.p50 is None:
                return None
            return (
                f"{label} p50 {p.p50 * 1000:.0f} ms, p90 {(p.p90 or 0) * 1000:.0f} ms, "
                f"p99 {(p.p99 or 0) * 1000:.0f} ms over {p.count} ({p.metric})"
            )

        out: list[str] = []
        if self.kv_cache_usage is not None:
            out.append(f"KV cache usage {self.kv_cache_usage * 100:.1f}% ({self.kv_cache_usage_metric})")
        if self.num_requests_running is not None or self.num_requests_waiting is not None:
            out.append(
                f"requests running {_n(self.num_requests_running)}, waiting {_n(self.num_requests_waiting)}"
            )
        if self.preemptions_total is not None:
            out.append(f"preemptions {_n(self.preemptions_total)}")
        for p, label in ((self.ttft, "TTFT"), (self.itl, "inter-token"), (self.e2e, "end-to-end")):
            line = pct(p, label)
            if line:
                out.append(line)
        if self.prompt_tokens_total is not None or self.generation_tokens_total is not None:
            out.append(
                f"tokens: prompt {_n(self.prompt_tokens_total)}, generated {_n(self.generation_tokens_total)}"
            )
        return "\n".join(out) or "no vLLM metrics found"


def _n(v: float | None) -> str:
    if v is None:
        return "n/a"
    return str(int(v)) if float(v).is_integer() else f"{v:.2f}"


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """The q-quantile from cumulative (upper bound, count) buckets, interpolated within a bucket."""
    if not buckets:
        return None
    buckets = sorted(buckets, key=lambda b: b[0])
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                # the +Inf bucket: the best we can say is the largest finite bound
                finite = [b for b, _ in buckets if not math.isinf(b)]
                return finite[-1] if finite else None
            if count == prev_count:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return buckets[-1][0]


def parse_vllm_metrics(text: str) -> VllmMetrics:
    """Parse the text of a vLLM ``/metrics`` page (Prometheus exposition format)."""
    from prometheus_client.parser import text_string_to_metric_families

    if not isinstance(text, str):
        raise UserError("metrics must be Prometheus text")
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    families: set[str] = set()
    try:
        for fam in text_string_to_metric_families(text):
            if fam.name.startswith("vllm:"):
                families.add(fam.name)
            for s in fam.samples:
                samples.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    except (ValueError, TypeError, IndexError) as e:
        raise UserError(f"metrics text is not in Prometheus exposition format ({e})") from None

    m = VllmMetrics(metric_names=len(families))
    models: set[str] = set()
    for values in samples.values():
        for labels, _ in values:
            if labels.get("model_name"):
                models.add(labels["model_name"])
    m.model_names = sorted(models)

    def total(*names: str) -> float | None:
        for name in names:
            if name in samples:
                return sum(v for _, v in samples[name] if not math.isnan(v))
        return None

    for name in KV_USAGE:
        if name in samples:
            vals = [v for _, v in samples[name] if not math.isnan(v)]
            if vals:
                usage = max(vals)
                m.kv_cache_usage = usage / 100.0 if usage > 1.0 else usage
                m.kv_cache_usage_metric = name
            break
    m.num_requests_running = total("vllm:num_requests_running")
    m.num_requests_waiting = total("vllm:num_requests_waiting")
    m.num_requests_swapped = total("vllm:num_requests_swapped")
    m.preemptions_total = total("vllm:num_preemptions_total", "vllm:num_preemptions")
    m.prompt_tokens_total = total("vllm:prompt_tokens_total")
    m.generation_tokens_total = total("vllm:generation_tokens_total")
    m.request_success_total = total("vllm:request_success_total")
    m.ttft = _histogram(samples, TTFT)
    m.itl = _histogram(samples, ITL)
    m.e2e = _histogram(samples, E2E)
    m.queue_time = _histogram(samples, QUEUE)
    if "vllm:cache_config_info" in samples:
        labels = samples["vllm:cache_config_info"][0][0]
        m.cache_config = {k: v for k, v in labels.items() if k not in ("model_name", "engine")}
    return m


def _histogram(
    samples: dict[str, list[tuple[dict[str, str], float]]], names: tuple[str, ...]
) -> Percentiles | None:
    for name in names:
        bucket_rows = samples.get(f"{name}_bucket")
        if not bucket_rows:
            continue
        merged: dict[float, float] = {}
        for labels, value in bucket_rows:
            le = labels.get("le")
            if le is None:
                continue
            bound = math.inf if le in ("+Inf", "Inf", "inf") else float(le)
            merged[bound] = merged.get(bound, 0.0) + value
        buckets = sorted(merged.items())
        count = sum(v for _, v in samples.get(f"{name}_count", [])) or (buckets[-1][1] if buckets else 0)
        ssum = sum(v for _, v in samples.get(f"{name}_sum", []))
        p: dict[str, Any] = {"metric": name, "count": int(count)}
        if count:
            p["mean"] = ssum / count
            for q in QUANTILES:
                p[f"p{int(q * 100)}"] = histogram_quantile(q, buckets)
        return Percentiles(**p)
    return None
