"""How the loop looks on screen (rich): one line per step, the approval request, the outcome."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.syntax import Syntax

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


def current_user() -> str:
    """Who is deciding, when nobody said: the OS user name."""
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # no user database entry (some containers)
        return "unknown"


def print_update(console: Console, node: str, update: dict[str, Any]) -> None:
    for e in update.get("timeline") or []:
        style = _STYLE.get(node, "")
        console.print(f"[{style}]{node:>9}[/] {e.get('message', '')}", highlight=False, soft_wrap=True)
    if node == "diagnose":
        diag = update.get("diagnosis") or {}
        if diag.get("summary"):
            console.print(f"{'':>9} {diag['summary']}", highlight=False, soft_wrap=True)


def _predicted(pred: dict[str, Any]) -> str:
    parts = []
    if "weights_gib" in pred:
        parts.append(f"weights {pred['weights_gib']} GiB")
    if "kv_cache_tokens" in pred:
        parts.append(f"KV cache {int(pred['kv_cache_tokens']):,} tokens")
    if "fits" in pred:
        parts.append("fits" if pred["fits"] else "does NOT fit")
    if not parts:
        parts = [f"{k}={v}" for k, v in pred.items() if not isinstance(v, (dict, list))]
    return ", ".join(parts)


def print_request(console: Console, pending: dict[str, Any]) -> None:
    plan = pending.get("plan") or {}
    console.print("[bold]Proposed plan[/] (approval required):", highlight=False)
    for i, s in enumerate(plan.get("steps") or [], 1):
        change = ", ".join(f"{k}={v}" for k, v in (s.get("change") or {}).items())
        console.print(f"  {i}. [bold]{s.get('kind', '')}[/] {change}", highlight=False, soft_wrap=True)
        if s.get("predicted"):
            console.print(f"     predicted: {_predicted(s['predicted'])}", highlight=False, soft_wrap=True)
        if s.get("why"):
            console.print(f"     why: {s['why']}", highlight=False, soft_wrap=True)
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
