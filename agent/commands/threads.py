"""``gemma-sre threads`` (pending approvals) and ``gemma-sre incidents`` (past incidents): the ids the
other commands take (``approve``, ``reject``, the REPL's ``/report``), so nobody copies them from
scrollback."""

from __future__ import annotations

import typer

from agent.params import bounded


def register(app: typer.Typer) -> None:
    @app.command()
    def threads(
        as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
    ) -> None:
        """The threads waiting for a decision: thread id, age, category and the plan in one line."""
        from agent.commands.status import emit, show
        from agent.readouts import pending_threads, render_threads
        from mcp_tools.settings import get_settings

        rows = pending_threads(get_settings().state_dir)
        if as_json:
            emit({"threads": [r.model_dump(mode="json") for r in rows]})
        else:
            show(render_threads(rows))

    @app.command()
    def incidents(
        service: str = typer.Option(None, "--service", "-s", help="Only this service's incidents."),
        limit: int = typer.Option(
            20, "--limit", "-n", parser=bounded(int, 1, 1000), help="Show the newest N (1-1000)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
    ) -> None:
        """Past incidents, newest first: thread id, category, outcome and the report's path."""
        from agent.commands.status import emit, show
        from agent.readouts import past_incidents, render_incidents
        from mcp_tools.settings import get_settings

        rows = past_incidents(get_settings().state_dir, service=service, limit=limit)
        if as_json:
            emit({"incidents": [r.model_dump(mode="json") for r in rows]})
        else:
            show(render_incidents(rows))
