"""How the loop looks on screen (rich): one line per step, the approval request, the outcome."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text

if TYPE_CHECKING:
    from graph.state import ApprovalRequest

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


def predicted_text(pred: dict[str, Any]) -> str:
    """The planner's figures for a step, in words: ``weights 12.14 GiB, KV cache 49,372 tokens, fits``."""
    parts = []
    if "weights_gib" in pred:
        parts.append(f"weights {pred['weights_gib']} GiB")
    if "kv_cache_tokens" in pred:
        parts.append(f"KV cache {int(pred['kv_cache_tokens']):,} tokens")
    if "fits" in pred:
        parts.append("fits" if pred["fits"] else "does NOT fit")
    if not parts:
        parts = [
            f"{k.replace('_', ' ')} {('yes' if v else 'no') if isinstance(v, bool) else v}"
            for k, v in pred.items()
            if not isinstance(v, (dict, list)) and k != "summary"
        ]
    return ", ".join(parts)


def render_request(req: ApprovalRequest) -> RenderableType:
    """The one rendering of an approval request: the plan's steps (each with its prediction and why),
    the revision diff, and preflight's notes. The CLI, the REPL and the MCP tools' text all use it."""
    offered = next((o for o in req.options if o.offered), None)
    which = f", option {offered.rank} of {len(req.options)}" if offered and len(req.options) > 1 else ""
    parts: list[RenderableType] = [Text.from_markup(f"[bold]Proposed plan[/] (approval required{which}):")]
    for i, s in enumerate(req.plan.steps, 1):
        change = s.describe().removeprefix(s.kind.value).strip()
        parts.append(Text.from_markup(f"  {i}. [bold]{escape(s.kind.value)}[/] {escape(change)}"))
        if s.predicted:
            parts.append(
                Text(f"     prediction (capacity planner): {predicted_text(s.predicted)}", style="cyan")
            )
        if s.why:
            parts.append(Text(f"     why: {s.why}"))
    if req.diff:
        parts.append(
            Panel(Syntax(req.diff, "diff", theme="ansi_dark", word_wrap=True), title="Revision diff")
        )
    parts += [Text(f"  preflight: {n}", style="dim") for n in req.preflight_notes]
    if len(req.options) > 1:  # the ranked options, each with preflight's verdict (approve --option N)
        parts.append(Text("Options, ranked (approve another with --option N):", style="bold"))
        parts += [Text(f"  {o.line}", style="" if o.ok else "dim") for o in req.options]
    return Group(*parts)


def print_request(console: Console, req: ApprovalRequest) -> None:
    console.print(render_request(req), highlight=False, soft_wrap=True)


def request_text(req: ApprovalRequest, *, width: int = 100) -> str:
    """``render_request`` as plain text (for an MCP tool's text content)."""
    import io

    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, highlight=False).print(
        render_request(req), soft_wrap=True
    )
    return buf.getvalue().rstrip("\n")


# How an outcome's status is shown, in the one-shot commands and the REPL alike.
OUTCOME_STYLE = {
    "fixed": "bold green",
    "healthy": "green",
    "rolled_back": "yellow",
    "undetermined": "bold yellow",
    "failed": "bold red",
}


def print_outcome(console: Console, status: str, summary: str, report: dict[str, str]) -> None:
    style = OUTCOME_STYLE.get(status, "bold")
    console.print(f"[{style}]{status}[/]: {summary}", highlight=False)
    if report.get("markdown"):
        console.print(f"report: {report['markdown']}", highlight=False, soft_wrap=True)
        console.print(f"json:   {report['json']}", highlight=False, soft_wrap=True)
