"""How the loop looks on screen (rich): one line per step, the approval request, the outcome."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table

_STYLE = {
    "observe": "cyan",
    "diagnose": "magenta",
    "propose": "blue",
    "preflight": "blue",
    "approve": "yellow",
    "apply": "green",
    "verify": "green",
    "rollback": "red",
    "report": "bold",
}


def print_update(console: Console, node: str, update: dict[str, Any]) -> None:
    for e in update.get("timeline") or []:
        style = _STYLE.get(node, "")
        console.print(f"[{style}]{node:>9}[/] {e.get('message', '')}", highlight=False, soft_wrap=True)
    if node == "diagnose":
        diag = update.get("diagnosis") or {}
        for ev in (diag.get("evidence") or [])[:3]:
            console.print(f"{'':>9} [dim]line {ev.get('line')}:[/] {ev.get('text')}", highlight=False)


def print_request(console: Console, pending: dict[str, Any]) -> None:
    plan = pending.get("plan") or {}
    table = Table(title="Proposed plan", show_lines=False, expand=False)
    table.add_column("#", justify="right")
    table.add_column("kind")
    table.add_column("change")
    table.add_column("predicted")
    table.add_column("why")
    for i, s in enumerate(plan.get("steps") or [], 1):
        pred = s.get("predicted") or {}
        pred_txt = ", ".join(f"{k}={v}" for k, v in pred.items() if not isinstance(v, (dict, list)))
        table.add_row(
            str(i), s.get("kind", ""), json.dumps(s.get("change") or {}), pred_txt, s.get("why", "")
        )
    console.print(table)
    diff = pending.get("diff") or ""
    if diff:
        console.print(Panel(Syntax(diff, "diff", theme="ansi_dark", word_wrap=True), title="Revision diff"))
    for note in pending.get("preflight_notes") or []:
        console.print(f"  preflight: {note}", highlight=False)


def print_outcome(console: Console, status: str, summary: str, report: dict[str, str]) -> None:
    style = {"fixed": "bold green", "healthy": "green", "rolled_back": "yellow", "failed": "bold red"}.get(
        status, "bold"
    )
    console.print(f"[{style}]{status}[/]: {summary}", highlight=False)
    if report.get("markdown"):
        console.print(f"report: {report['markdown']}", highlight=False, soft_wrap=True)
        console.print(f"json:   {report['json']}", highlight=False, soft_wrap=True)
