"""``gemma-sre metrics --service NAME``: the service's series over time from Cloud Monitoring
(sparklines in the terminal; ``--chart PATH`` writes a PNG; ``--json`` prints the typed series),
then vLLM's ``/metrics`` now and the service's figures (``agent.readouts.service_metrics``, the
REPL's ``/metrics`` too; ``now`` in the JSON). Exit 1 when ``/metrics`` could not be read."""

from __future__ import annotations

import typer

from agent.params import bounded


def register(app: typer.Typer) -> None:
    @app.command()
    def metrics(
        service: str = typer.Option(None, "--service", help="The Cloud Run service (or GEMMA_SRE_SERVICE)."),
        window: float = typer.Option(
            30, "--window", parser=bounded(float, 1, 1440), help="Minutes of history to read."
        ),
        period: float = typer.Option(
            60, "--period", parser=bounded(float, 60, 3600), help="Alignment period, seconds."
        ),
        series: str = typer.Option(
            None, "--series", help="Comma-separated series keys (default: all; see --list-series)."
        ),
        chart: str = typer.Option(None, "--chart", help="Also write a PNG chart to this path."),
        as_json: bool = typer.Option(False, "--json", help="Print the series as one JSON document."),
        list_series: bool = typer.Option(False, "--list-series", help="List the series keys and exit."),
        sandbox: bool = typer.Option(False, "--sandbox", help="Start a local sandbox and read it."),
        scenario: str = typer.Option(None, "--scenario", help="The sandbox scenario (with --sandbox)."),
    ) -> None:
        """Show the service's Cloud Run and vLLM series over time (Cloud Monitoring)."""
        import json

        from agent import metrics_view
        from agent.commands.status import readout_world, show
        from agent.readouts import metrics_json, render_metrics, service_metrics
        from mcp_tools.errors import UserError
        from mcp_tools.monitoring import CATALOG, parse_keys
        from mcp_tools.settings import Settings, get_settings

        if list_series:
            for m in CATALOG:
                typer.echo(f"{m.key}\t{m.unit}\t{m.types[0]}")
            return
        if scenario and not sandbox:
            raise UserError("--scenario needs --sandbox")
        keys = [m.key for m in parse_keys(series)] if series else None
        sb = None
        try:
            settings = get_settings()
            name = service or settings.service
            if sandbox:
                from agent.session import DEFAULT_SCENARIO, sandbox_service
                from sandbox.server import start_sandbox

                sb = start_sandbox(scenario=scenario or DEFAULT_SCENARIO)
                settings = Settings(**sb.settings_fields())
                name = service or sandbox_service(sb)
            if not name:
                raise UserError("metrics: give --service NAME (or set GEMMA_SRE_SERVICE)")
            got = metrics_view.read(settings, name, keys=keys, window_s=window * 60, period_s=period)
            world, name = readout_world(name, settings)
            now = service_metrics(world, name, world.cfg.vllm_base_url)
            if chart:
                path = metrics_view.write_chart(got, chart)
            if as_json:
                typer.echo(json.dumps({**got.model_dump(mode="json"), "now": metrics_json(now)}))
            else:
                typer.echo(metrics_view.render(got))
                show(render_metrics(now))
                if chart:
                    typer.echo(f"chart: {path}")
            if now.unread:  # the work ran and found a blind spot (SPEC.md section 4)
                raise typer.Exit(1)
        finally:
            if sb is not None:
                sb.stop()
