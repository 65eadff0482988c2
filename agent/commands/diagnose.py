"""``gemma-sre diagnose``: one incident file to a root cause with evidence and a checked, typed plan."""

from __future__ import annotations

from pathlib import Path

import typer

from agent.params import model_url_option


def register(app: typer.Typer) -> None:
    @app.command()
    def diagnose(
        incident: Path = typer.Option(..., "--incident", help="An incident YAML file (SPEC.md section 3)."),
        as_json: bool = typer.Option(False, "--json", help="Print the SPEC section 4 JSON document."),
        show_context: bool = typer.Option(
            False,
            "--show-context",
            help="Print what a model would be sent (and its token count); no model call.",
        ),
        model_url: str = model_url_option("GEMMA_SRE_MODEL_URL; none: analyzers only"),
    ) -> None:
        """Diagnose one recorded incident, offline: analyzers first, a model only when one is given."""
        import json

        from graph.diagnosis import build_context
        from graph.observation import Observation
        from graph.pipeline import assess_incident
        from mcp_tools.incident import load_incident
        from mcp_tools.logs import count_tokens
        from mcp_tools.model_endpoint import configured_endpoints
        from mcp_tools.settings import get_settings

        inc = load_incident(incident)
        settings = get_settings()
        if show_context:
            ctx = build_context(Observation.from_incident(inc))
            doc = {"id": inc.id, "context": ctx, "context_tokens": count_tokens(ctx)}
            if as_json:
                typer.echo(json.dumps(doc, ensure_ascii=False))
            else:
                typer.echo(ctx)
                typer.echo(f"\n({doc['context_tokens']} tokens, estimated)", err=True)
            return
        # --model-url, else GEMMA_SRE_MODEL_URL (not the monitored VLLM_BASE_URL: a recorded incident
        # is not about the endpoint running now), then the fallback.
        endpoints = configured_endpoints(settings, primary=model_url, monitored=False)
        d = assess_incident(inc, model=endpoints or None, policy=settings.policy)
        if as_json:
            typer.echo(json.dumps(d.to_spec_json(), ensure_ascii=False))
            return
        _render(d, model_asked=bool(endpoints))


def _render(d: object, *, model_asked: bool) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.panel import Panel
    from rich.table import Table

    from agent.display import predicted_text
    from graph.pipeline import Assessment
    from graph.preflight import step_text

    assert isinstance(d, Assessment)
    con = Console()
    colour = {"healthy": "green", "unknown": "yellow"}.get(d.category, "red")
    head = f"[bold {colour}]{d.category}[/] (confidence {d.confidence:.2f})\n{escape(d.summary)}"
    if d.model_used:
        head += f"\n[dim]model: {escape(d.model_used)}, {d.prompt_tokens} prompt tokens[/]"
    elif not model_asked:
        head += "\n[dim]no model configured: deterministic analyzers only[/]"
    con.print(Panel(head, title=f"diagnosis: {escape(d.id)}", expand=False))
    if d.evidence:
        t = Table("line", "evidence", show_header=True, header_style="bold", expand=False)
        for e in d.evidence:
            t.add_row(str(e.line) if e.line else "-", escape(e.text))
        con.print(t)
    if d.plan.steps:
        t = Table("#", "kind", "change", "why", "predicted", header_style="bold", expand=False)
        for i, s in enumerate(d.plan.steps, 1):
            p = predicted_text(s.predicted) if s.predicted else ""
            change = step_text(s).removeprefix(s.kind.value).strip()
            t.add_row(str(i), s.kind.value, escape(change), escape(s.why), escape(p))
        con.print(t)
        ok = "[green]passed[/]" if d.plan.preflight.ok else "[red]failed[/]"
        con.print(f"preflight {ok}: " + escape("; ".join(d.plan.preflight.notes)))
        if d.diff:
            con.print(escape(d.diff), highlight=False)
    else:
        con.print("plan: [green]no action[/]")
    if d.alternatives:
        con.print("[dim]other options, ranked:[/]")
        from graph.preflight import plan_text, why_not

        for a in d.alternatives:
            mark = (
                "passes preflight"
                if a.preflight.ok
                else "fails preflight: " + ("; ".join(why_not(a)) or "no reason recorded")
            )
            con.print(f"  - {escape(plan_text(a))} [dim]({escape(mark)})[/]", soft_wrap=True)
    for n in d.notes:
        con.print(f"[dim]note: {escape(n)}[/]")
