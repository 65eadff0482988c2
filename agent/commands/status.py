"""``gemma-sre status | logs``: the REPL's ``/status`` and ``/logs`` as one-shot commands (the same
functions, ``agent.readouts``), each with ``--json``.
``gemma-sre metrics`` is agent/commands/metrics.py."""

from __future__ import annotations

from typing import Any

import typer

from agent.params import bounded

SERVICE_HELP = "The Cloud Run service (default: GEMMA_SRE_SERVICE or the profile's)."


def readout_world(service: str | None, settings: Any = None) -> tuple[Any, str]:
    """(the loop's ``World``, the service name) from the settings (default: the environment's) and
    ``--service``."""
    from graph.config import Configuration
    from graph.world import World
    from mcp_tools.errors import UserError

    cfg = Configuration.from_settings(settings, service=service)
    if not cfg.service:
        raise UserError("no service named: pass --service NAME or set GEMMA_SRE_SERVICE")
    from mcp_tools.cloudrun import validate_service_name

    validate_service_name(cfg.service)
    return World(cfg), cfg.service


def show(renderables: list[Any]) -> None:
    from rich.console import Console

    console = Console(highlight=False)
    for r in renderables:
        console.print(r)


def emit(doc: Any) -> None:
    import json
    import sys

    sys.stdout.write(json.dumps(doc, default=str) + "\n")


def register(app: typer.Typer) -> None:
    @app.command()
    def status(
        service: str = typer.Option(None, "--service", "-s", help=SERVICE_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
    ) -> None:
        """The service now: URL, revisions, conditions that failed, GPU, vLLM args, /health."""
        from agent.readouts import render_status, service_status

        world, name = readout_world(service)
        st = service_status(world, name)
        if as_json:
            emit(st.model_dump(mode="json"))
        else:
            show(render_status(st))

    @app.command()
    def logs(
        text_filter: str = typer.Option(
            None, "--filter", "-f", help="Only records whose printed text contains this (case-insensitive)."
        ),
        since: str = typer.Option(
            "24h", "--since", help="How far back: 30m, 6h, 2d, or an RFC 3339 time (at most 30 days)."
        ),
        limit: int = typer.Option(
            50, "--limit", "-n", parser=bounded(int, 1, 1000), help="Show the newest N records (1-1000)."
        ),
        service: str = typer.Option(None, "--service", "-s", help=SERVICE_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
    ) -> None:
        """The service's newest log records from Cloud Logging, whole and redacted."""
        from agent.readouts import render_logs, service_logs

        world, name = readout_world(service)
        view = service_logs(world, name, text_filter=text_filter, since=since, limit=limit)
        if as_json:
            emit(view.model_dump(mode="json"))
        else:
            show(render_logs(view))
