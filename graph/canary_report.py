"""The report's "Canary" section, and its chart: the fix's figures before and after, step by step.

``canary_section(verification)`` renders the Markdown lines (the report calls it once);
``write_chart(canary, cfg)`` draws the PNG when one is asked for (``Configuration.canary_chart`` or
``canary_chart_path``); matplotlib is imported only then.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from graph.config import Configuration
from graph.state import Canary, Latency

log = logging.getLogger(__name__)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def _row(label: str, share: str, m: Latency | None, verdict: str = "") -> str:
    if m is None:
        return f"| {label} | {share} | - | - | - | - | - | {verdict} |"
    errors = f"{m.errors}/{m.requests}" + (f" ({m.error})" if m.error else "")
    return (
        f"| {label} | {share} | {_ms(m.ttft_p50_ms)} | {_ms(m.ttft_p95_ms)} | {_ms(m.itl_p50_ms)} | "
        f"{_ms(m.itl_p95_ms)} | {errors} | {verdict} |"
    )


def canary_section(verification: dict[str, Any] | None) -> list[str]:
    """The Markdown lines of the canary (empty when the fix was not deployed as one)."""
    raw = (verification or {}).get("canary")
    if not raw:
        return []
    c = Canary.model_validate(raw)
    out = ["", "## Canary", ""]
    if c.promoted:
        verdict = "promoted: the fix has all traffic"
    elif c.breached_at == 0:
        verdict = "failed its checks before it was given any traffic"
    elif c.breached_at is not None:
        verdict = f"breached at {c.breached_at}% of traffic: traffic sent back"
    else:
        verdict = "not given traffic"
    out.append(
        f"Revision `{c.revision}` (tag `{c.tag}`, {c.url or 'no URL'}) against `{c.baseline_revision}`, "
        f"which served before: **{verdict}**."
    )
    if c.kv_note:
        mark = {True: "within the prediction", False: "OUTSIDE the prediction", None: "not compared"}[c.kv_ok]
        out.append(f"- KV cache: {c.kv_note} ({mark}).")
    out += [
        "",
        "| measured | fix's share | TTFT p50 ms | TTFT p95 ms | ITL p50 ms | ITL p95 ms | errors | verdict |",
        "|---|---|---|---|---|---|---|---|",
        _row(f"before: `{c.baseline_revision}` (service URL)", "0%", c.baseline),
    ]
    if c.before is not None:
        ok = "breached" if c.breached_at == 0 else "ok"
        out.append(_row("the fix, no traffic (tag URL)", "0%", c.before, ok))
    for s in c.steps:
        verdict = "breached: " + "; ".join(s.breaches) if s.breaches else "ok"
        if s.resumed:
            verdict += " (resumed: traffic already there)"
        out.append(_row("service URL", f"{s.percent}%", s.service, verdict))
        out.append(_row("the fix (tag URL)", f"{s.percent}%", s.canary))
    if c.chart:
        chart = Path(c.chart)  # beside the report (the default place): linked by its name
        out += ["", f"![canary figures]({chart.name if chart.parent.name == 'reports' else chart})"]
    return out


def chart_path(c: Canary, cfg: Configuration) -> Path:
    """Where the chart goes: ``canary_chart_path`` (a .png file, or a folder), else the reports folder."""
    name = f"canary-{c.revision}.png"
    if cfg.canary_chart_path:
        p = Path(cfg.canary_chart_path)
        return p if p.suffix.lower() == ".png" else p / name
    return cfg.state_path / "reports" / name


def write_chart(c: Canary, cfg: Configuration) -> str | None:
    """TTFT and inter-token latency (p50, p95) at each share the fix had, against the baseline's.
    None when it cannot be drawn (no matplotlib, a folder that cannot be written): the report says
    the figures in its table either way."""
    points: list[tuple[str, Latency]] = [("0% (fix)", c.before)] if c.before is not None else []
    points += [(f"{s.percent}%", s.canary) for s in c.steps if s.canary is not None]
    if not points:
        return None
    path = chart_path(c, cfg)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        xs = list(range(len(points)))
        for ax, what, key in ((axes[0], "TTFT", "ttft"), (axes[1], "inter-token latency", "itl")):
            for q, style in (("p50", "o-"), ("p95", "s--")):
                ys = [getattr(m, f"{key}_{q}_ms") for _, m in points]
                ax.plot(xs, [y if y is not None else float("nan") for y in ys], style, label=f"fix {q}")
                base = getattr(c.baseline, f"{key}_{q}_ms") if c.baseline else None
                if base is not None:
                    ax.axhline(
                        base, linestyle=":", color="grey" if q == "p50" else "black", label=f"before {q}"
                    )
            ax.set_xticks(xs, [label for label, _ in points])
            ax.set_xlabel("the fix's share of traffic")
            ax.set_ylabel("ms")
            ax.set_ylim(bottom=0)
            ax.set_title(what)
            ax.legend(fontsize=8)
        verdict = "promoted" if c.promoted else f"failed at {c.breached_at}% of traffic"
        fig.suptitle(f"canary {c.revision} against {c.baseline_revision}: {verdict}")
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=100)
        plt.close(fig)
    except Exception as e:  # the chart is an extra: its failure never fails the verification
        log.warning("canary chart not written to %s: %s", path, e)
        return None
    return str(path)
