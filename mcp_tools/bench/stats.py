"""Per-request samples and the statistics of a load point: percentiles, throughput, goodput."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, Field

from mcp_tools.bench.config import SLO


class Sample(BaseModel):
    """One request as the client saw it. Times in seconds; ``start_s`` relative to the point's start."""

    point: int
    context_tokens: int  # the target prompt length
    level: float  # concurrency or request rate of the point
    start_s: float
    ok: bool
    status: int | None = None  # HTTP status (None when there was no response)
    error: str | None = None  # error type: http_503, timeout, connection_reset, connection_dropped, ...
    error_detail: str | None = None  # the server's error text or the exception, truncated
    ttft_s: float | None = None
    e2e_s: float | None = None
    tpot_s: float | None = None
    itl_s: list[float] = Field(default_factory=list)
    prompt_tokens: int | None = None  # from usage
    output_tokens: int | None = None  # from usage
    chunks: int = 0  # content chunks received


class Dist(BaseModel):
    """mean / p50 / p90 / p99 / max of one latency (seconds)."""

    n: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method) of already sorted values."""
    if not sorted_values:
        raise ValueError("no values")
    if len(sorted_values) == 1:
        return float(sorted_values[0])
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac)


def dist(values: Sequence[float]) -> Dist:
    if not values:
        return Dist()
    s = sorted(values)
    return Dist(
        n=len(s),
        mean=sum(s) / len(s),
        p50=percentile(s, 50),
        p90=percentile(s, 90),
        p99=percentile(s, 99),
        max=s[-1],
    )


def meets_slo(sample: Sample, slo: SLO) -> bool:
    """A request counts toward goodput when it succeeded and met every SLO that is set."""
    if not sample.ok:
        return False
    if slo.ttft_s is not None and (sample.ttft_s is None or sample.ttft_s > slo.ttft_s):
        return False
    if slo.tpot_s is not None and sample.tpot_s is not None and sample.tpot_s > slo.tpot_s:
        return False
    if slo.e2e_s is not None and (sample.e2e_s is None or sample.e2e_s > slo.e2e_s):
        return False
    if slo.itl_s is not None and sample.itl_s:
        worst = percentile(sorted(sample.itl_s), 99)
        if worst > slo.itl_s:
            return False
    return True


class PointSummary(BaseModel):
    """The statistics of one load point (one context length at one concurrency or rate)."""

    point: int
    context_tokens: int
    mode: str
    level: float  # concurrency or offered rate
    requests: int
    ok: int
    success_rate: float
    duration_s: float
    request_throughput: float  # successful requests / s
    output_token_throughput: float  # generated tokens / s (from usage)
    total_token_throughput: float  # prompt + generated tokens / s
    goodput: float | None  # requests / s meeting every SLO (None without SLOs)
    goodput_fraction: float | None
    mean_prompt_tokens: float | None
    mean_output_tokens: float | None
    ttft: Dist
    tpot: Dist
    itl: Dist
    e2e: Dist
    errors: dict[str, int]


def summarize(
    samples: Sequence[Sample],
    *,
    point: int,
    context_tokens: int,
    mode: str,
    level: float,
    slo: SLO,
    duration_s: float,
) -> PointSummary:
    ok = [s for s in samples if s.ok]
    n = len(samples)
    dur = max(duration_s, 1e-9)
    out_tokens = sum(s.output_tokens or 0 for s in ok)
    prompt_tokens = sum(s.prompt_tokens or 0 for s in ok)
    good = None if slo.is_empty() else sum(1 for s in samples if meets_slo(s, slo))
    itls = [x for s in ok for x in s.itl_s]
    prompt_known = [s.prompt_tokens for s in ok if s.prompt_tokens is not None]
    output_known = [s.output_tokens for s in ok if s.output_tokens is not None]
    return PointSummary(
        point=point,
        context_tokens=context_tokens,
        mode=mode,
        level=level,
        requests=n,
        ok=len(ok),
        success_rate=len(ok) / n if n else 0.0,
        duration_s=duration_s,
        request_throughput=len(ok) / dur,
        output_token_throughput=out_tokens / dur,
        total_token_throughput=(out_tokens + prompt_tokens) / dur,
        goodput=None if good is None else good / dur,
        goodput_fraction=None if good is None or not n else good / n,
        mean_prompt_tokens=sum(prompt_known) / len(prompt_known) if prompt_known else None,
        mean_output_tokens=sum(output_known) / len(output_known) if output_known else None,
        ttft=dist([s.ttft_s for s in ok if s.ttft_s is not None]),
        tpot=dist([s.tpot_s for s in ok if s.tpot_s is not None]),
        itl=dist(itls),
        e2e=dist([s.e2e_s for s in ok if s.e2e_s is not None]),
        errors=dict(Counter(s.error or "unknown" for s in samples if not s.ok)),
    )
