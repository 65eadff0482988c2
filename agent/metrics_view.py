"""The series view shared by ``gemma-sre metrics``, the REPL's ``/metrics`` and anything else that
shows Cloud Monitoring's series to a person: one line per series with a sparkline (terminal), and a
PNG chart (matplotlib's Agg canvas, imported only when a chart is asked for)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp_tools.monitoring import Series, SeriesSet

BLOCKS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 30


def sparkline(values: list[float], width: int = SPARK_WIDTH) -> str:
    """``values`` as block characters, resampled to at most ``width`` (each cell the mean of its span)."""
    if not values:
        return ""
    if len(values) > width:
        step = len(values) / width
        values = [
            sum(chunk) / len(chunk)
            for i in range(width)
            if (chunk := values[int(i * step) : max(int((i + 1) * step), int(i * step) + 1)])
        ]
    lo, hi = min(values), max(values)
    if hi - lo <= 1e-12 * max(1.0, abs(hi)):
        return BLOCKS[0 if hi == 0 else 3] * len(values)
    scale = (len(BLOCKS) - 1) / (hi - lo)
    return "".join(BLOCKS[round((v - lo) * scale)] for v in values)


def series_lines(series_set: SeriesSet, *, width: int = SPARK_WIDTH) -> list[str]:
    """One line per series: name, sparkline, now, peak, trend (the same numbers a model is given)."""
    from mcp_tools.monitoring import summarize

    rows: list[tuple[str, str, str]] = []
    for s in series_set.series:
        summ = summarize(s)
        if summ is None:
            continue
        trend = "flat" if summ.flat else f"{summ.trend_per_min:+.3g}/min"
        figures = f"now {summ.level:.3g} {s.unit}, peak {summ.peak:.3g}, {trend}"
        if summ.changed_at:
            figures += f", changed {summ.changed_at[11:16]}Z"
        rows.append((s.name, sparkline([p.v for p in s.points], width), figures))
    if not rows:
        return []
    pad = min(60, max(len(r[0]) for r in rows))
    return [f"{name[:pad]:<{pad}}  {spark:<{width}}  {figures}" for name, spark, figures in rows]


def render(series_set: SeriesSet, *, width: int = SPARK_WIDTH) -> str:
    """The terminal view: a header, the series, what had no data."""
    ss = series_set
    head = (
        f"Cloud Monitoring, service {ss.service}: {ss.start} .. {ss.end}, aligned to {ss.period_s:g} s "
        f"({len(ss.series)} series, {ss.points_read} points, {ss.calls} calls)"
    )
    out = [head, *(f"  {ln}" for ln in series_lines(ss, width=width))]
    if ss.missing:
        out.append(f"  no data: {', '.join(ss.missing)}")
    if ss.truncated:
        out.append("  (some series or points were left out by the read's bounds)")
    return "\n".join(out)


def write_chart(series_set: SeriesSet, path: str | Path, *, columns: int = 3) -> Path:
    """A PNG with one panel per series family (one line per revision / instance / class)."""
    from datetime import datetime

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from mcp_tools.errors import UserError
    from mcp_tools.monitoring import short_label

    out = Path(path)
    if out.suffix.lower() != ".png":
        raise UserError(f"--chart {path}: the chart is a PNG; name the file *.png")
    families: dict[str, list[Series]] = {}
    for s in series_set.series:
        if s.points:
            families.setdefault(s.key, []).append(s)
    if not families:
        raise UserError(f"no series with data for {series_set.service} in the window: nothing to chart")
    n = len(families)
    cols = min(columns, n)
    rows = (n + cols - 1) // cols
    fig = Figure(figsize=(4.2 * cols, 2.6 * rows), dpi=100)
    FigureCanvasAgg(fig)
    for i, (key, members) in enumerate(families.items(), start=1):
        ax = fig.add_subplot(rows, cols, i)
        for s in members[:8]:
            xs: Any = [datetime.fromisoformat(p.t.replace("Z", "+00:00")) for p in s.points]
            label = ",".join(short_label(v) for v in s.labels.values()) or key
            ax.plot(xs, [p.v for p in s.points], linewidth=1.2, label=label)
        ax.set_title(f"{key} ({members[0].unit})", fontsize=9)
        ax.tick_params(labelsize=7)
        if len(members) > 1:
            ax.legend(fontsize=6, loc="best")
    fig.suptitle(f"{series_set.service}: {series_set.start} .. {series_set.end}", fontsize=10)
    fig.autofmt_xdate()
    fig.tight_layout()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, format="png")
    except OSError as e:
        raise UserError(f"--chart {path}: cannot write it ({e.strerror or e})") from None
    return out


def read(settings: Any, service: str, **kwargs: Any) -> SeriesSet:
    """The service's series for a face (``mcp_tools.monitoring.read_series``)."""
    from mcp_tools.monitoring import read_series

    return read_series(service, settings=settings, **kwargs)
