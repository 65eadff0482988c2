"""The canary's measurements and judgements: pure reads, no change to the service.

- :func:`measure`: a short benchmark (``mcp_tools.bench``, the project's one load client) of a URL, as
  :class:`graph.state.Latency` (TTFT and inter-token p50 / p95, errors).
- :func:`kv_check`: the revision's own "GPU KV cache size: N tokens" line (Cloud Logging) against the
  planner's ``kv_cache_tokens_range`` for the revision's spec.
- :func:`regressions` / :func:`breaches`: what makes a fix worse than the revision it replaces, and
  which SLO a step breaks because of the fix.

The nodes (``apply``, ``verify``, ``rollback``) make the changes; this module only says what is so.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from typing import Any

from graph.config import Configuration
from graph.state import ApplyResult, Latency
from mcp_tools.errors import short_error
from mcp_tools.spec_ops import canary_names

log = logging.getLogger(__name__)

KV_LINE = "GPU KV cache size"


def measure(url: str, cfg: Configuration, label: str) -> Latency:
    """``cfg.canary_requests`` streamed chat requests to ``url`` (``cfg.canary_concurrency`` at a
    time). A benchmark that cannot run at all (no server, no model list) is a measurement with an
    error and every request counted as failed: the URL is not serving."""
    from mcp_tools.bench import BenchConfig, run_benchmark
    from mcp_tools.bench.stats import percentile

    bc = BenchConfig(
        url=url,
        endpoint="chat",
        concurrencies=[cfg.canary_concurrency],
        context_lengths=[cfg.canary_prompt_tokens],
        output_tokens=cfg.canary_output_tokens,
        requests_per_point=cfg.canary_requests,
        seconds_per_point=max(1.0, cfg.canary_request_timeout_s * 2),
        warmup_requests=0,
        exact_prompt_lengths=False,
        request_timeout_s=cfg.canary_request_timeout_s,
        stop_on_saturation=False,
        error_budget=1.0,
        write_output=False,
        label=f"canary-{label}",
    )
    try:
        result = asyncio.run(run_benchmark(bc))
    except Exception as e:  # the URL does not serve (or the bench could not start): all failed
        return Latency(
            url=label, requests=cfg.canary_requests, errors=cfg.canary_requests, error=short_error(e)
        )
    samples = result.samples

    def pct(values: list[float], q: float) -> float | None:
        return round(percentile(sorted(values), q) * 1000, 2) if values else None

    ttft = [s.ttft_s for s in samples if s.ok and s.ttft_s is not None]
    # Inter-token latency per request, as its mean time per token after the first (TPOT): the gaps
    # between chunks are not, since a busy client reads several chunks at once (gaps of 0 ms).
    itl = [s.tpot_s for s in samples if s.ok and s.tpot_s is not None]
    return Latency(
        url=label,
        requests=len(samples),
        ok=sum(1 for s in samples if s.ok),
        errors=sum(1 for s in samples if not s.ok and _counts_as_error(s.status)),
        ttft_p50_ms=pct(ttft, 50),
        ttft_p95_ms=pct(ttft, 95),
        itl_p50_ms=pct(itl, 50),
        itl_p95_ms=pct(itl, 95),
    )


def carry_on(result: ApplyResult, info: Any, key: str, cfg: Configuration) -> None:
    """A change made before this run (``result.revision``), completed from the live service as the run
    that made it had it: deployed as a canary (its tag in the traffic), the revision that serves beside
    it, and, while it has no traffic yet, the serving revision's baseline."""
    _, tag = canary_names(cfg.service, key)
    if not any(t.tag == tag for t in info.traffic):
        return
    result.canary, result.tag = True, tag
    others = [t for t in info.traffic if t.revision != result.revision and t.percent > 0]
    if others:
        result.previous_ready_revision = max(others, key=lambda t: t.percent).revision
    if result.baseline is None and result.revision and info.percent_of(result.revision) == 0:
        result.baseline = baseline(info, cfg)


def baseline(info: Any, cfg: Configuration) -> Latency | None:
    """The serving revision's figures before the change: a short benchmark of the service URL."""
    url = info.uri or cfg.vllm_base_url
    return measure(url, cfg, "service") if url else None


def _counts_as_error(status: int | None) -> bool:
    """A failure the service is to blame for: 5xx, 429, or no answer (timeout, dropped connection)."""
    return status is None or status >= 500 or status == 429


def regressions(fix: Latency, base: Latency | None, cfg: Configuration) -> list[str]:
    """How much slower ``fix`` is than the serving revision's ``base`` (empty: not slower). Medians
    are compared (a few requests' p95 is their slowest one), with ``canary_min_delta_ms`` of slack;
    errors are the SLO's business (:func:`breaches`)."""
    out: list[str] = []
    ratio = cfg.canary_max_ratio
    if base is None or ratio is None:
        return out
    for what, a, b in (
        ("median TTFT", fix.ttft_p50_ms, base.ttft_p50_ms),
        ("median inter-token latency", fix.itl_p50_ms, base.itl_p50_ms),
    ):
        if a is None or b is None:
            continue
        if a > b * ratio and a - b > cfg.canary_min_delta_ms:
            out.append(
                f"{what} {a:.0f} ms against the serving revision's {b:.0f} ms (x{a / max(b, 1e-9):.1f})"
            )
    return out


def slo_breaches(m: Latency, cfg: Configuration) -> dict[str, str]:
    """The SLOs ``m`` breaks (``ttft``, ``itl``: ``cfg.slo``'s targets; ``errors``), each with what was
    measured."""
    out: dict[str, str] = {}
    ttft_ms, itl_ms = cfg.slo.ttft_p95_s * 1000.0, cfg.slo.itl_p95_s * 1000.0
    if m.ttft_p95_ms is not None and m.ttft_p95_ms > ttft_ms:
        out["ttft"] = f"TTFT p95 {m.ttft_p95_ms:.0f} ms > SLO {ttft_ms:.0f} ms"
    if m.itl_p95_ms is not None and m.itl_p95_ms > itl_ms:
        out["itl"] = f"inter-token p95 {m.itl_p95_ms:.0f} ms > SLO {itl_ms:.0f} ms"
    if m.error_rate > cfg.slo_error_rate:
        out["errors"] = f"error rate {m.error_rate:.0%} > SLO {cfg.slo_error_rate:.0%}"
    return out


def breaches(
    service: Latency | None, fix: Latency | None, base: Latency | None, cfg: Configuration
) -> list[str]:
    """What a traffic step breaks because of the fix: an SLO the fix's own URL or the service URL
    breaks that the serving revision did not break before the change (a service that was already
    over its SLO, e.g. overloaded, is not the fix's doing), and any regression against that revision."""
    before = slo_breaches(base, cfg) if base is not None else {}
    out: list[str] = []
    for where, m in (("the fix's URL", fix), ("the service URL", service)):
        if m is not None:
            out += [f"{where}: {text}" for kind, text in slo_breaches(m, cfg).items() if kind not in before]
    if fix is not None:
        out += [f"the fix's URL: {r}" for r in regressions(fix, base, cfg)]
    return out


def kv_check(
    world: Any, service: str, revision: Any
) -> tuple[int | None, list[int] | None, bool | None, str]:
    """(reported tokens, predicted range, within it, a note) for a revision (a ``RevisionInfo``):
    vLLM's own "GPU KV cache size" line from the revision's logs, against the planner's range for the
    revision's spec. Not checked (None) when either is not known: a blind spot, never a failure."""
    from mcp_tools.capacity import parse_vllm_args, parse_vllm_startup, plan_capacity
    from mcp_tools.spec_ops import get_model

    predicted: list[int] | None = None
    spec = revision.spec
    try:
        flags = parse_vllm_args(spec.args)
        model = flags.model or get_model(spec.args)
        if model and spec.gpu_type:
            p = plan_capacity(model, gpu=spec.gpu_type, gpu_count=spec.gpu_count, flags=flags, suggest=False)
            if p.kv_cache_tokens_range and p.kv_cache_tokens_range[1] > 0:
                predicted = [int(x) for x in p.kv_cache_tokens_range]
    except Exception as e:  # an unknown checkpoint: no prediction rather than a guess
        log.info("planner cannot size revision %s: %s", revision.name, e)
    created = revision.create_time
    since = _parse(created) - timedelta(minutes=1) if created else None
    reported: int | None = None
    if since is not None:
        try:
            lines = world.revision_lines(service, revision.name, since=since, text=KV_LINE)
            reported = parse_vllm_startup(lines).kv_cache_tokens
        except Exception as e:
            return None, predicted, None, f"the revision's logs could not be read: {short_error(e)}"
    if reported is None:
        return None, predicted, None, f"no '{KV_LINE}' line in the revision's logs"
    if predicted is None:
        return reported, None, None, "the planner cannot size this revision's model: not compared"
    lo, hi = predicted
    ok = lo <= reported <= hi
    note = f"vLLM reports {reported:,} tokens of KV cache; the planner predicted {lo:,} to {hi:,}"
    return reported, predicted, ok, note


def _parse(ts: str) -> datetime:
    return datetime.fromisoformat(str(ts).replace("Z", "+00:00"))
