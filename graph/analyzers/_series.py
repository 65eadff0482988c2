"""What the analyzers read from Cloud Monitoring's series (``Observation.series``): per instance,
per time, the recent stretch, and evidence lines that cite a series readably ("series: ...").

Only series still reporting count as the present (a restarted revision's old instance stops
reporting; its last points are history, not the current state).
"""

from __future__ import annotations

from collections import defaultdict

from graph.analyzers.base import Evidence
from graph.observation import Observation
from mcp_tools.monitoring import Series, SeriesSet, _epoch, short_label
from mcp_tools.vocabulary import SERIES_PREFIX


def series_ev(text: str) -> Evidence:
    """A finding's evidence from a series: line 0, "series: ..."."""
    return Evidence(line=0, text=f"{SERIES_PREFIX}{text}"[:300])


def current(ss: SeriesSet, key: str) -> list[Series]:
    """The ``key`` series of instances still reporting at the newest point read (within two periods)."""
    from graph.slo import newest

    end = newest(ss)
    return [s for s in ss.by_key(key) if s.points and _epoch(s.points[-1].t) >= end - 2.5 * ss.period_s]


def by_instance(ss: SeriesSet, key: str) -> dict[str, Series]:
    return {s.instance or "": s for s in current(ss, key)}


def values_at(s: Series | None) -> dict[float, float]:
    return {} if s is None else {_epoch(p.t): p.v for p in s.points}


def combined(series: list[Series], how: str = "sum") -> list[tuple[float, float]]:
    """One value per time over several series (instances): their sum or max, oldest first."""
    per_t: dict[float, list[float]] = defaultdict(list)
    for s in series:
        for p in s.points:
            per_t[_epoch(p.t)].append(p.v)
    f = max if how == "max" else sum
    return sorted((t, float(f(v))) for t, v in per_t.items())


def quarter_means(vals: list[float]) -> tuple[float, float]:
    """(mean of the first quarter, mean of the last quarter)."""
    if not vals:
        return 0.0, 0.0
    q = max(1, len(vals) // 4)
    return sum(vals[:q]) / q, sum(vals[-q:]) / q


def series_of(obs: Observation) -> SeriesSet | None:
    ss = obs.series
    return ss if ss is not None and ss.series else None


def inst(s: Series | str | None) -> str:
    name = s.instance if isinstance(s, Series) else s
    return short_label(name or "?")


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min"
