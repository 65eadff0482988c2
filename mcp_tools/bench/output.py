"""The run folder: JSON with every sample, CSVs, a Markdown summary and PNG charts; and run comparison.

A run folder is ``<output-dir>/<UTC timestamp>-<label or model>``, created exclusively (a suffix is
added rather than overwrite anything). Charts use matplotlib's Agg canvas (no display, no pyplot).
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from mcp_tools.bench.stats import Dist, PointSummary, Sample
from mcp_tools.errors import UserError

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from mcp_tools.bench.engine import BenchResult

RUN_FILE = "run.json"


def _slug(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", text.split("/")[-1]).strip("-")
    return s[:60] or "run"


def new_run_dir(output_dir: Path, started_at: str, name: str) -> Path:
    """Create and return a fresh run folder; never reuses an existing one."""
    try:
        stamp = datetime.fromisoformat(started_at).strftime("%Y%m%d-%H%M%S")
    except ValueError:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    output_dir.mkdir(parents=True, exist_ok=True)
    base = f"{stamp}-{_slug(name)}"
    for i in range(1, 1000):
        candidate = output_dir / (base if i == 1 else f"{base}-{i}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise UserError(f"--output-dir: could not create a new run folder under {output_dir}")


def _ms(v: float | None) -> str:
    return "" if v is None else f"{v * 1000:.1f}"


def _fmt_level(mode: str, level: float) -> str:
    return f"{level:g} req/s" if mode == "rate" else f"{level:g}"


# ------------------------------------------------------------------------------------------ writing


def write_run(result: BenchResult, output_dir: Path) -> Path:
    meta = result.metadata
    run_dir = new_run_dir(output_dir, meta.started_at, meta.config.get("label") or meta.model)
    result.run_dir = str(run_dir)
    doc = {
        "format": "gemma-sre-bench/1",
        "metadata": meta.model_dump(mode="json"),
        "points": [p.model_dump(mode="json") for p in result.points],
        "stopped": result.stopped,
        "skipped": result.skipped,
        "notes": result.notes,
        "errors": result.errors,
        "samples": [_sample_doc(s) for s in result.samples],
    }
    (run_dir / RUN_FILE).write_text(json.dumps(doc, indent=1) + "\n")
    _write_samples_csv(result.samples, run_dir / "samples.csv")
    _write_points_csv(result.points, run_dir / "points.csv")
    charts = write_charts(result.points, run_dir, title=f"{meta.model}", slo=meta.config.get("slo") or {})
    (run_dir / "summary.md").write_text(summary_markdown(result, charts=[c.name for c in charts]))
    return run_dir


def _sample_doc(s: Sample) -> dict[str, Any]:
    """A sample for run.json, times rounded to the microsecond (keeps big runs' files reasonable)."""
    doc = s.model_dump(mode="json")
    for k in ("start_s", "ttft_s", "e2e_s", "tpot_s"):
        if doc[k] is not None:
            doc[k] = round(doc[k], 6)
    doc["itl_s"] = [round(x, 6) for x in s.itl_s]
    return doc


def _write_samples_csv(samples: Sequence[Sample], path: Path) -> None:
    cols = [
        "point", "context_tokens", "level", "start_s", "ok", "status", "error", "ttft_ms", "tpot_ms",
        "e2e_ms", "itl_mean_ms", "itl_max_ms", "prompt_tokens", "output_tokens", "chunks", "error_detail",
    ]  # fmt: skip
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for s in samples:
            itl_mean = sum(s.itl_s) / len(s.itl_s) if s.itl_s else None
            w.writerow(
                [
                    s.point, s.context_tokens, f"{s.level:g}", f"{s.start_s:.6f}", int(s.ok), s.status or "",
                    s.error or "", _ms(s.ttft_s), _ms(s.tpot_s), _ms(s.e2e_s), _ms(itl_mean),
                    _ms(max(s.itl_s) if s.itl_s else None),
                    s.prompt_tokens if s.prompt_tokens is not None else "",
                    s.output_tokens if s.output_tokens is not None else "", s.chunks, s.error_detail or "",
                ]
            )  # fmt: skip


def _flat_point(p: PointSummary) -> dict[str, Any]:
    row: dict[str, Any] = {
        "point": p.point, "context_tokens": p.context_tokens, "mode": p.mode, "level": p.level,
        "requests": p.requests, "ok": p.ok, "success_rate": round(p.success_rate, 4),
        "duration_s": round(p.duration_s, 3), "request_throughput": round(p.request_throughput, 3),
        "output_token_throughput": round(p.output_token_throughput, 1),
        "total_token_throughput": round(p.total_token_throughput, 1),
        "goodput": "" if p.goodput is None else round(p.goodput, 3),
        "mean_prompt_tokens": "" if p.mean_prompt_tokens is None else round(p.mean_prompt_tokens, 1),
        "mean_output_tokens": "" if p.mean_output_tokens is None else round(p.mean_output_tokens, 1),
    }  # fmt: skip
    for name in ("ttft", "tpot", "itl", "e2e"):
        d: Dist = getattr(p, name)
        for stat in ("mean", "p50", "p90", "p99"):
            row[f"{name}_{stat}_ms"] = _ms(getattr(d, stat))
    row["errors"] = ";".join(f"{k}={v}" for k, v in sorted(p.errors.items()))
    return row


def _write_points_csv(points: Sequence[PointSummary], path: Path) -> None:
    rows = [_flat_point(p) for p in points]
    with path.open("w", newline="") as f:
        if not rows:
            return
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def summary_markdown(result: BenchResult, *, charts: Sequence[str] = (), max_rows: int = 200) -> str:
    """A bounded Markdown summary of a run (also the MCP tool's answer)."""
    meta = result.metadata
    cfg = meta.config
    mode = cfg.get("mode", "concurrency")
    slo = cfg.get("slo") or {}
    slo_txt = ", ".join(f"{k.removesuffix('_s')} <= {v * 1000:g} ms" for k, v in slo.items() if v) or "none"
    lines = [
        f"# Benchmark: {meta.model}",
        "",
        f"- endpoint: `{meta.url}` ({cfg.get('endpoint')}), revision: {meta.revision or 'unknown'}, "
        f"server: {meta.server_version or 'unknown'}",
        f"- started {meta.started_at}, finished {meta.finished_at}; client gemma-sre "
        f"{meta.client.get('gemma-sre')}, httpx {meta.client.get('httpx')}",
        f"- load: {mode}; output tokens {cfg.get('output_tokens')}; up to "
        f"{cfg.get('requests_per_point')} requests or {cfg.get('seconds_per_point')} s per point; prompts "
        f"{'share a prefix' if cfg.get('shared_prefix') else 'unique (no shared prefix)'}",
        f"- SLO for goodput: {slo_txt}",
    ]
    if result.run_dir:
        lines.append(f"- run folder: `{result.run_dir}`")
    lines += [
        "",
        f"| context | {'rate' if mode == 'rate' else 'concurrency'} | requests | ok | req/s | output tok/s "
        "| goodput req/s | TTFT p50 / p99 ms | TPOT p50 / p99 ms | ITL p99 ms | e2e p50 ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    shown = result.points[:max_rows]
    for p in shown:
        good = "" if p.goodput is None else f"{p.goodput:.2f} ({(p.goodput_fraction or 0):.0%})"
        lines.append(
            f"| {p.context_tokens} | {_fmt_level(mode, p.level)} | {p.requests} | {p.success_rate:.0%} "
            f"| {p.request_throughput:.2f} | {p.output_token_throughput:.0f} | {good} "
            f"| {_ms(p.ttft.p50)} / {_ms(p.ttft.p99)} | {_ms(p.tpot.p50)} / {_ms(p.tpot.p99)} "
            f"| {_ms(p.itl.p99)} | {_ms(p.e2e.p50)} |"
        )
    if len(result.points) > len(shown):
        lines.append(f"\n({len(result.points) - len(shown)} more points in points.csv)")
    highlights = _highlights(result.points, mode)
    if highlights:
        lines += ["", "Highlights (measured):", *highlights]
    if result.errors:
        lines += ["", "Errors by type: " + ", ".join(f"{k}: {v}" for k, v in sorted(result.errors.items()))]
        details = _error_examples(result)
        for k, v in details.items():
            lines.append(f"- {k}: {v}")
    lines += [f"\n{kind.capitalize()}: {s}" for kind, s in result.remarks()]
    if charts:
        lines.append("")
        lines += [f"![{c}]({c})" for c in charts]
    return "\n".join(lines) + "\n"


def _highlights(points: Sequence[PointSummary], mode: str) -> list[str]:
    """Per context length: the peak output throughput and, with SLOs, the level with the best goodput."""
    out: list[str] = []
    unit = "req/s offered" if mode == "rate" else "concurrent"
    for ctx, ps in _series(points).items():
        ok = [p for p in ps if p.ok]
        if not ok:
            continue
        peak = max(ok, key=lambda p: p.output_token_throughput)
        line = (
            f"- {ctx}-token prompts: peak {peak.output_token_throughput:,.0f} output tok/s "
            f"({peak.request_throughput:.2f} req/s) at {peak.level:g} {unit}"
        )
        with_good = [p for p in ok if p.goodput is not None]
        if with_good:
            best = max(with_good, key=lambda p: (p.goodput or 0, -p.level))
            if (best.goodput or 0) > 0:
                line += (
                    f"; best goodput {best.goodput:.2f} req/s ({(best.goodput_fraction or 0):.0%} of "
                    f"requests within the SLOs) at {best.level:g} {unit}"
                )
            else:
                line += "; no level met the SLOs"
        out.append(line)
    return out


def _error_examples(result: BenchResult) -> dict[str, str]:
    out: dict[str, str] = {}
    for s in result.samples:
        if not s.ok and s.error and s.error not in out and s.error_detail:
            out[s.error] = s.error_detail[:160]
    return out


# ------------------------------------------------------------------------------------------- charts

_PALETTE = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"]


def _series(points: Sequence[PointSummary]) -> dict[int, list[PointSummary]]:
    by_ctx: dict[int, list[PointSummary]] = {}
    for p in points:
        by_ctx.setdefault(p.context_tokens, []).append(p)
    for v in by_ctx.values():
        v.sort(key=lambda p: p.level)
    return dict(sorted(by_ctx.items()))


def _style_x(ax: Axes, mode: str, levels: Sequence[float]) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    if mode == "concurrency":
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(sorted(set(levels))))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("concurrent requests")
    else:
        ax.set_xlabel("offered request rate (req/s)")
    ax.grid(True, which="major", alpha=0.3)


def _ctx_label(ctx: int) -> str:
    return f"{ctx // 1024}K-token prompts" if ctx >= 1024 and ctx % 1024 == 0 else f"{ctx}-token prompts"


def write_charts(
    points: Sequence[PointSummary], run_dir: Path, *, title: str, slo: dict[str, Any]
) -> list[Path]:
    """throughput.png and latency.png: one line per context length against concurrency (or rate)."""
    if not points:
        return []
    from matplotlib.figure import Figure

    mode = points[0].mode
    series = _series(points)
    levels = [p.level for p in points]
    colors = {ctx: _PALETTE[i % len(_PALETTE)] for i, ctx in enumerate(series)}
    out: list[Path] = []

    # --- throughput ---
    fig = Figure(figsize=(13, 5.2), layout="constrained")
    fig.suptitle(f"{title}: throughput", fontsize=14, fontweight="bold")
    ax1, ax2 = fig.subplots(1, 2)
    for ctx, ps in series.items():
        x = [p.level for p in ps]
        ax1.plot(
            x, [p.output_token_throughput for p in ps], marker="o", color=colors[ctx], label=_ctx_label(ctx)
        )
        ax2.plot(
            x, [p.request_throughput for p in ps], marker="o", color=colors[ctx], label=f"{_ctx_label(ctx)}"
        )
        if any(p.goodput is not None for p in ps):
            ax2.plot(
                x, [p.goodput or 0 for p in ps], marker="x", linestyle="--", color=colors[ctx],
                label=f"{_ctx_label(ctx)}: goodput",
            )  # fmt: skip
    for ctx, ps in series.items():
        best = max(ps, key=lambda p: p.output_token_throughput)
        ax1.annotate(
            f"{best.output_token_throughput:,.0f} tok/s",
            (best.level, best.output_token_throughput),
            textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8, color=colors[ctx],
        )  # fmt: skip
    ax1.set_title("Generated tokens per second (from usage)")
    ax1.set_ylabel("output tokens / s")
    ax2.set_title("Completed requests per second" + (" and goodput (met every SLO)" if slo else ""))
    ax2.set_ylabel("requests / s")
    for ax in (ax1, ax2):
        _style_x(ax, mode, levels)
        ax.set_ylim(0, ax.get_ylim()[1] * 1.08)
        ax.legend(fontsize=8, loc="upper left")
    path = run_dir / "throughput.png"
    fig.savefig(path, dpi=110)
    out.append(path)

    # --- latency ---
    fig = Figure(figsize=(13, 9), layout="constrained")
    fig.suptitle(f"{title}: latency (solid p50, dashed p99)", fontsize=14, fontweight="bold")
    axes = fig.subplots(2, 2)
    panels = [
        ("ttft", "Time to first token", "ttft_s"),
        ("tpot", "Time per output token (after the first)", "tpot_s"),
        ("itl", "Inter-token latency", "itl_s"),
        ("e2e", "End-to-end request latency", "e2e_s"),
    ]
    for ax, (key, label, slo_key) in zip(axes.flat, panels, strict=True):
        top = 0.0
        values: list[float] = []
        for ctx, ps in series.items():
            x = [p.level for p in ps]
            p50 = [(getattr(p, key).p50 or float("nan")) * 1000 for p in ps]
            p99 = [(getattr(p, key).p99 or float("nan")) * 1000 for p in ps]
            ax.plot(x, p50, marker="o", color=colors[ctx], label=_ctx_label(ctx))
            ax.plot(x, p99, marker=".", linestyle="--", color=colors[ctx], alpha=0.7)
            values += [v for v in p50 + p99 if v == v and v > 0]
            top = max([top, *values])
        bound = slo.get(slo_key)
        if bound:
            ax.axhline(
                bound * 1000, color="crimson", linestyle=":", linewidth=1.5, label=f"SLO {bound * 1000:g} ms"
            )
            top = max(top, bound * 1000)
        ax.set_title(label)
        ax.set_ylabel("milliseconds")
        _style_x(ax, mode, levels)
        if values and max(values) / min(values) > 30:  # lines far apart: a log scale keeps each readable
            from matplotlib.ticker import FuncFormatter

            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.set_ylabel("milliseconds (log scale)")
            ax.set_ylim(min(values) / 1.5, top * 2)
        else:
            ax.set_ylim(0, top * 1.15 if top > 0 else 1)
        ax.legend(fontsize=8, loc="upper left")
    path = run_dir / "latency.png"
    fig.savefig(path, dpi=110)
    out.append(path)
    return out


# ------------------------------------------------------------------------------------------ compare


class LoadedRun(BaseModel):
    path: str
    metadata: dict[str, Any]
    points: list[PointSummary]


def load_run(path: str | Path) -> LoadedRun:
    p = Path(path)
    f = p / RUN_FILE if p.is_dir() else p
    if not f.is_file():
        raise UserError(f"{path}: not a benchmark run folder (no {RUN_FILE})")
    try:
        doc = json.loads(f.read_text())
        return LoadedRun(
            path=str(f.parent), metadata=doc["metadata"], points=[PointSummary(**x) for x in doc["points"]]
        )
    except (ValueError, KeyError, TypeError) as e:
        raise UserError(f"{f}: not a readable benchmark run ({type(e).__name__}: {e})") from None


COMPARED: list[tuple[str, str, bool]] = [
    # (label, attribute path, higher is better)
    ("req/s", "request_throughput", True),
    ("output tok/s", "output_token_throughput", True),
    ("goodput req/s", "goodput", True),
    ("success", "success_rate", True),
    ("TTFT p50 ms", "ttft.p50", False),
    ("TTFT p99 ms", "ttft.p99", False),
    ("TPOT p50 ms", "tpot.p50", False),
    ("ITL p99 ms", "itl.p99", False),
    ("e2e p50 ms", "e2e.p50", False),
]


def _get(p: PointSummary, attr: str) -> float | None:
    obj: Any = p
    for part in attr.split("."):
        obj = getattr(obj, part)
    return None if obj is None else float(obj)


class CompareRow(BaseModel):
    context_tokens: int
    level: float
    metric: str
    a: float | None
    b: float | None
    change: float | None  # relative (b - a) / a
    better: bool | None


class Comparison(BaseModel):
    run_a: str
    run_b: str
    rows: list[CompareRow]
    unmatched: list[str]
    output_dir: str | None = None


def compare_runs(run_a: str | Path, run_b: str | Path, output_dir: Path | None = None) -> Comparison:
    a, b = load_run(run_a), load_run(run_b)
    key = lambda p: (p.context_tokens, p.mode, p.level)  # noqa: E731
    pa = {key(p): p for p in a.points}
    pb = {key(p): p for p in b.points}
    rows: list[CompareRow] = []
    for k in sorted(set(pa) & set(pb)):
        for label, attr, higher in COMPARED:
            va, vb = _get(pa[k], attr), _get(pb[k], attr)
            scale = 1000 if label.endswith("ms") else 1
            va = None if va is None else va * scale
            vb = None if vb is None else vb * scale
            change = None if va in (None, 0) or vb is None else (vb - va) / abs(va)  # type: ignore[operator]
            better = None if change is None or abs(change) < 0.02 else (change > 0) == higher
            rows.append(
                CompareRow(
                    context_tokens=k[0], level=k[2], metric=label, a=va, b=vb, change=change, better=better
                )
            )
    unmatched = [f"only in A: context {k[0]} at {k[2]:g}" for k in sorted(set(pa) - set(pb))]
    unmatched += [f"only in B: context {k[0]} at {k[2]:g}" for k in sorted(set(pb) - set(pa))]
    cmp = Comparison(run_a=a.path, run_b=b.path, rows=rows, unmatched=unmatched)
    if output_dir is not None:
        name = f"compare-{Path(a.path).name[:15]}-vs-{Path(b.path).name}"
        d = new_run_dir(output_dir, datetime.now(UTC).isoformat(), name)
        (d / "compare.json").write_text(cmp.model_dump_json(indent=1) + "\n")
        _compare_chart(a, b, d / "compare.png")
        cmp.output_dir = str(d)
    return cmp


def _compare_chart(a: LoadedRun, b: LoadedRun, path: Path) -> None:
    from matplotlib.figure import Figure

    if not a.points and not b.points:
        return
    mode = (a.points or b.points)[0].mode
    sa, sb = _series(a.points), _series(b.points)
    ctxs = sorted(set(sa) | set(sb))
    colors = {ctx: _PALETTE[i % len(_PALETTE)] for i, ctx in enumerate(ctxs)}
    la = f"A: {Path(a.path).name}"
    lb = f"B: {Path(b.path).name}"
    fig = Figure(figsize=(13, 5.2), layout="constrained")
    fig.suptitle(f"Run comparison: solid = {la}, dashed = {lb}", fontsize=13, fontweight="bold")
    ax1, ax2 = fig.subplots(1, 2)
    levels = [p.level for p in a.points + b.points]
    for ctx in ctxs:
        for series, style, name in ((sa, "-", la), (sb, "--", lb)):
            ps = series.get(ctx, [])
            if not ps:
                continue
            x = [p.level for p in ps]
            lbl = f"{_ctx_label(ctx)} ({name[:1]})"
            ax1.plot(
                x,
                [p.output_token_throughput for p in ps],
                linestyle=style,
                marker="o",
                color=colors[ctx],
                label=lbl,
            )
            ax2.plot(
                x, [(p.ttft.p50 or float("nan")) * 1000 for p in ps], linestyle=style, marker="o",
                color=colors[ctx], label=lbl,
            )  # fmt: skip
    ax1.set_title("Output tokens per second")
    ax1.set_ylabel("output tokens / s")
    ax2.set_title("Time to first token, p50")
    ax2.set_ylabel("milliseconds")
    for ax in (ax1, ax2):
        _style_x(ax, mode, levels)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)
