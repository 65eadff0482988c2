"""Service level objectives over Cloud Monitoring's series, and their multi-window burn rate.

Three SLOs, configured with defaults (``SloConfig``, a field of ``graph.config.Configuration`` that
observe copies into the observation, so analyzers stay pure functions of what was observed):

- TTFT p95 and inter-token latency p95 are window-based SLOs (Google's SRE workbook, "Implementing
  SLOs": a period is good when its p95 is under the target; the objective is the share of good
  periods). A p95 series says nothing finer than that about single requests.
- The 5xx rate is request-based: bad = 5xx answers, total = every answer Cloud Run counted.

Burn rate = (bad share over a window) / (1 - objective): 1 spends the budget exactly over the SLO
period. An alert needs both windows of a pair over the threshold (the workbook's multi-window,
multi-burn-rate alert, "Alerting on SLOs", 30-day budget): 1 h and 5 min at 14.4x (2% of the budget
in an hour), 6 h and 30 min at 6x (5% in six hours). An observation holds less than that (30 min by
default), so each pair is scaled to it: the long window becomes the observation's window (never
longer than the pair's own), the short one keeps the pair's 1:12 ratio (at least one period).
"""

from __future__ import annotations

import math
from collections import defaultdict

from pydantic import BaseModel, Field

from mcp_tools.monitoring import Series, SeriesSet

#: (long window s, short window s, burn threshold, name) - the SRE workbook's pairs for a 30-day budget.
BURN_PAIRS: tuple[tuple[float, float, float, str], ...] = (
    (3600.0, 300.0, 14.4, "1h/5m"),
    (21600.0, 1800.0, 6.0, "6h/30m"),
)


class SloConfig(BaseModel):
    """The SLOs and the thresholds of the failures only time shows (defaults for a chat service)."""

    # The latency targets: Monitoring's p95 per period here, a canary step's p95 over its requests.
    ttft_p95_s: float = Field(default=2.0, gt=0, allow_inf_nan=False)  # time to first token, p95
    itl_p95_s: float = Field(default=0.2, gt=0, allow_inf_nan=False)  # inter-token latency, p95
    latency_objective: float = Field(default=0.99, gt=0, lt=1)  # share of periods under target
    availability: float = Field(default=0.999, gt=0, lt=1)  # share of answers that are not 5xx
    hung_minutes: float = Field(default=3.0, ge=1, le=60)  # work in flight, no token, this long
    kv_full: float = Field(default=0.9, gt=0, le=1)  # KV-cache usage that counts as full
    kv_full_share: float = Field(default=0.5, gt=0, le=1)  # ... for this share of the window


class Burn(BaseModel):
    """One SLO burning fast enough to page on one window pair."""

    slo: str  # "TTFT p95 <= 2 s"
    key: str  # the series it was read from
    objective: float
    pair: str  # the workbook's pair ("1h/5m")
    long_s: float
    short_s: float
    burn_long: float
    burn_short: float
    threshold: float

    def line(self) -> str:
        """The evidence line: names the SLO, the burn rate and the windows."""
        return (
            f"series: SLO {self.slo} ({self.objective:.4g}) burning {_x(self.burn_long)}x over the last "
            f"{_dur(self.long_s)} and {_x(self.burn_short)}x over the last {_dur(self.short_s)} "
            f"(pages at {self.threshold:g}x: the workbook's {self.pair} pair scaled to the window)"
        )


def newest(ss: SeriesSet) -> float:
    """The time of the newest point read (epoch s): the series' "now". Monitoring's latest points lag
    the wall clock by minutes (and an emulator's clock may run ahead of it), so windows are counted
    back from the data, not from the read's end time. The read's end when nothing was read."""
    from mcp_tools.monitoring import _epoch

    last = [_epoch(s.points[-1].t) for s in ss.series if s.points]
    return max(last) if last else _epoch(ss.end)


def windows(window_s: float, period_s: float) -> list[tuple[float, float, float, str]]:
    """The burn pairs scaled to an observation of ``window_s`` aligned to ``period_s``."""
    out = []
    for long_s, short_s, thr, name in BURN_PAIRS:
        lng = min(long_s, window_s)
        sht = max(period_s, math.ceil(lng * short_s / long_s / period_s) * period_s)
        out.append((lng, min(sht, lng), thr, name))
    return out


def _by_time(series: list[Series]) -> dict[float, list[float]]:
    from mcp_tools.monitoring import _epoch

    out: dict[float, list[float]] = defaultdict(list)
    for s in series:
        for p in s.points:
            out[_epoch(p.t)].append(p.v)
    return dict(out)


def _share_bad(samples: list[tuple[float, float, float]], since: float) -> float | None:
    """bad / total over the samples (t, bad, total) at or after ``since`` (None: no data)."""
    bad = sum(b for t, b, _ in samples if t >= since)
    total = sum(n for t, _, n in samples if t >= since)
    return bad / total if total > 0 else None


def burns(ss: SeriesSet, slo: SloConfig) -> list[Burn]:
    """Every SLO that burns over the threshold on both windows of a pair (the fastest pair first)."""
    from mcp_tools.monitoring import _epoch

    end = newest(ss)
    out: list[Burn] = []
    sources: list[tuple[str, str, float, list[tuple[float, float, float]]]] = []
    for key, name, target in (
        ("ttft_p95", "TTFT p95", slo.ttft_p95_s),
        ("itl_p95", "inter-token p95", slo.itl_p95_s),
    ):
        per_t = _by_time(ss.by_key(key))
        if per_t:  # a period is bad when any instance's p95 is over the target
            samples = [(t, 1.0 if max(v) > target else 0.0, 1.0) for t, v in per_t.items()]
            sources.append((key, f"{name} <= {target:g} s", slo.latency_objective, samples))
    rates = ss.by_key("request_rate")
    if rates:
        bad_t = _by_time([s for s in rates if s.labels.get("response_code_class") == "5xx"])
        all_t = _by_time(rates)
        samples = [(t, sum(bad_t.get(t, [])), sum(v)) for t, v in all_t.items()]
        sources.append(("request_rate", "5xx rate", slo.availability, samples))
    for key, name, objective, samples in sources:
        budget = 1.0 - objective
        for lng, sht, thr, pair in windows(_epoch(ss.end) - _epoch(ss.start), ss.period_s):
            b_long = _share_bad(samples, end - lng + 1e-6)
            b_short = _share_bad(samples, end - sht + 1e-6)
            if b_long is None or b_short is None:
                continue
            r_long, r_short = b_long / budget, b_short / budget
            if r_long >= thr and r_short >= thr:
                out.append(
                    Burn(
                        slo=name,
                        key=key,
                        objective=objective,
                        pair=pair,
                        long_s=lng,
                        short_s=sht,
                        burn_long=round(r_long, 2),
                        burn_short=round(r_short, 2),
                        threshold=thr,
                    )
                )
                break  # the fastest pair that fires is enough for this SLO
    return out


def _dur(s: float) -> str:
    if s >= 3600 and s % 3600 == 0:
        return f"{s / 3600:g}h"
    return f"{s / 60:g}m" if s >= 60 else f"{s:g}s"


def _x(v: float) -> str:
    return f"{v:.1f}" if v < 100 else f"{v:.0f}"
