"""Presenting an eval run: a Markdown report (the scoreboard) and rich tables for the screen."""

from __future__ import annotations

from typing import Any

from evals.harness import EvalResult
from evals.scoring import ERROR_COLUMN, CaseResult
from mcp_tools.taxonomy import Category


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _mark(v: bool | None) -> str:
    return "-" if v is None else ("yes" if v else "NO")


def failure_reasons(case: CaseResult) -> str:
    """Why a case failed, in a few words."""
    if case.error:
        return case.error
    why = []
    if not case.category_ok:
        why.append(f"category {case.category or 'none'} (expected {case.expected_category})")
    if not case.remediation_ok:
        why.append(f"plan {case.remediation_kinds or '[]'}")
    if case.evidence_ok is False:
        why.append("no cited evidence line")
    if not case.forbidden_ok:
        why.append("forbidden kind proposed")
    if case.end_state_ok is False:
        why.append(f"end state wrong (outcome {case.outcome})")
    if case.mutations_without_approval:
        why.append(f"{case.mutations_without_approval} mutation(s) without approval")
    return "; ".join(why)


def _matrix_labels(result: EvalResult) -> list[str]:
    seen = set(result.confusion)
    for row in result.confusion.values():
        seen |= set(row)
    order = [*Category.values(), ERROR_COLUMN]
    return [c for c in order if c in seen] + sorted(seen - set(order))


def markdown_report(result: EvalResult) -> str:
    """The whole run as Markdown: summary, per-category accuracy, confusion matrix, failing cases."""
    s = result.summary
    lines = [
        "# gemma-sre eval",
        "",
        f"Mode `{result.mode}`, {s['cases']} cases from `{result.incidents_dir}`"
        + (f", each run {result.repeat} times" if result.repeat > 1 else "")
        + f", {result.seconds:.2f} s.",
        "",
        "| passed | category | remediation | evidence | forbidden violations | mutations without approval "
        "| errors |",
        "|---|---|---|---|---|---|---|",
        f"| {s['passed']}/{s['cases']} | {_pct(s['category_accuracy'])} | {_pct(s['remediation_accuracy'])} "
        f"| {_pct(s['evidence_accuracy'])} | {s['forbidden_violations']} | {s['mutations_without_approval']} "
        f"| {s.get('errors', 0)} |",
        "",
    ]
    if s.get("skipped"):
        lines += [
            f"{s['skipped']} incident(s) skipped: the sandbox does not reproduce them (listed below).",
            "",
        ]
    extra = {k: v for k, v in s.items() if k.startswith("pass_") or k == "prompt_tokens_per_incident"}
    if any(v is not None for v in extra.values()):
        lines += ["| " + " | ".join(extra) + " |", "|" + "---|" * len(extra)]
        lines += ["| " + " | ".join("-" if v is None else str(v) for v in extra.values()) + " |", ""]
    lines += ["## Per category", "", "| category | cases | passed | category accuracy |", "|---|---|---|---|"]
    for cat, row in result.per_category.items():
        lines.append(f"| {cat} | {row['cases']} | {row['passed']} | {_pct(row['category_accuracy'])} |")
    labels = _matrix_labels(result)
    lines += ["", "## Confusion matrix (rows: expected, columns: diagnosed)", ""]
    lines.append("| expected \\ got | " + " | ".join(labels) + " |")
    lines.append("|---|" + "---|" * len(labels))
    for exp in labels:
        if exp not in result.confusion:
            continue
        row = result.confusion[exp]
        lines.append(f"| {exp} | " + " | ".join(str(row.get(g, "")) for g in labels) + " |")
    failing = [c for c in result.cases if not c.pass_ and not c.skipped]
    lines += ["", f"## Failing cases ({len(failing)})", ""]
    if failing:
        lines += ["| id | expected | got | why |", "|---|---|---|---|"]
        for c in failing:
            why = failure_reasons(c).replace("|", "\\|")
            lines.append(f"| {c.id} | {c.expected_category or '-'} | {c.category or '-'} | {why} |")
    else:
        lines.append("None.")
    skipped = [c for c in result.cases if c.skipped]
    if skipped:
        lines += ["", f"## Skipped ({len(skipped)})", "", "| id | expected | why |", "|---|---|---|"]
        for c in skipped:
            why = (c.error or "").removeprefix("skipped: ").replace("|", "\\|")
            lines.append(f"| {c.id} | {c.expected_category or '-'} | {why} |")
    return "\n".join(lines) + "\n"


def _summary_line(name: str, s: dict[str, Any]) -> str:
    return (
        f"{name}: passed {s['passed']}/{s['cases']}  category {_pct(s['category_accuracy'])}  "
        f"remediation {_pct(s['remediation_accuracy'])}  evidence {_pct(s['evidence_accuracy'])}  "
        f"failures called healthy {s.get('failures_called_healthy', 0)}  "
        f"forbidden violations {s['forbidden_violations']}  mutations without approval "
        f"{s['mutations_without_approval']}  errors {s.get('errors', 0)}"
        + (f"  skipped {s['skipped']}" if s.get("skipped") else "")
    )


def render_tables(result: EvalResult, console: Any) -> None:
    """Print the cases, the summary (per split) and the confusion matrix as rich tables."""
    from rich import box
    from rich.table import Table

    # Under 110 columns the checks fold into one "result" column, so the id column keeps its room.
    narrow = console.width < 110
    cases = Table(
        title=f"gemma-sre eval ({result.mode})",
        show_lines=False,
        box=box.SIMPLE_HEAD if narrow else box.HEAVY_HEAD,
        pad_edge=not narrow,
    )
    cases.add_column("id", overflow="fold", min_width=18 if narrow else 24, ratio=1)
    if not narrow:
        cases.add_column("expected", no_wrap=True, overflow="ellipsis", max_width=14)
    cases.add_column("got", no_wrap=True, overflow="ellipsis", max_width=14)
    cases.add_column("plan", no_wrap=True, overflow="ellipsis", max_width=14 if narrow else 20)
    for col in ("result",) if narrow else ("cat", "evid", "forb", "pass"):
        cases.add_column(col, no_wrap=True)
    cases.add_column("s", no_wrap=True, justify="right")
    for c in result.cases:
        if c.skipped:
            continue
        got = c.category or ("[red]error[/red]" if c.error else "-")
        plan = ",".join(c.remediation_kinds) or "none"
        verdict = "[green]PASS[/green]" if c.pass_ else "[red]FAIL[/red]"
        if narrow:
            failed = [
                n
                for n, ok in (("cat", c.category_ok), ("evid", c.evidence_ok), ("forb", c.forbidden_ok))
                if ok is False
            ]
            cells = [c.id, got, plan, verdict + (f" {' '.join(failed)}" if failed and not c.pass_ else "")]
        else:
            cells = [c.id, c.expected_category or "-", got, plan]
            cells += [_mark(c.category_ok), _mark(c.evidence_ok), _mark(c.forbidden_ok), verdict]
        cases.add_row(*cells, f"{c.seconds:.1f}")
    console.print(cases)
    for c in result.cases:
        if c.error and not c.skipped:
            console.print(f"[red]error[/red] {c.id}: {c.error}", markup=True, highlight=False)
    for name, s in (
        [*result.splits.items(), ("all", result.summary)] if result.splits else [("all", result.summary)]
    ):
        if name == "all" and len(result.splits) == 1:
            continue
        console.print(
            _summary_line(name, s) + (f"  ({result.seconds:.2f} s)" if name == "all" else ""), highlight=False
        )
    labels = _matrix_labels(result)
    # Compact: one narrow column per category, so 17 of them and the labels fit 100 columns.
    matrix = Table(
        title="confusion (rows expected, columns diagnosed, by number)",
        box=box.SIMPLE_HEAD,
        padding=(0, 0),
        collapse_padding=True,
        pad_edge=False,
    )
    matrix.add_column("expected", no_wrap=True, max_width=24, overflow="ellipsis")
    for i, _ in enumerate(labels, 1):
        matrix.add_column(str(i), justify="right", no_wrap=True, min_width=2)  # 17 x 3 + labels < 80
    for i, exp in enumerate(labels, 1):
        if exp not in result.confusion:
            continue
        row = result.confusion[exp]
        cells = []
        for g in labels:
            if g not in row:
                cells.append("")
            else:
                color = "green" if g == exp else "red"
                cells.append(f"[{color}]{row[g]}[/{color}]")
        matrix.add_row(f"{i:>2} {exp}", *cells)
    console.print(matrix)
