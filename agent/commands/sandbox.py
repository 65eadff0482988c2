from __future__ import annotations

from pathlib import Path

import typer

from agent.params import bounded


def register(app: typer.Typer) -> None:
    @app.command()
    def sandbox(
        port: int = typer.Option(
            8181,
            "--port",
            parser=bounded(int, 0, 65_535),
            help="Loopback port to serve on (0: any free port).",
        ),
        host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind (keep it on loopback)."),
        scenario: str | None = typer.Option(
            None, "--scenario", help="Start in a named state (see --list-scenarios)."
        ),
        incident: Path | None = typer.Option(
            None, "--incident", help="An incident YAML file: its service is deployed and its logs preloaded."
        ),
        time_scale: float = typer.Option(
            60.0,
            "--time-scale",
            parser=bounded(float, 0, 10_000, lo_open=True),
            help="Simulated seconds per real second.",
        ),
        zero_latency: bool = typer.Option(
            False, "--zero-latency", help="Endpoints answer without any delay."
        ),
        project: str | None = typer.Option(None, "--project", help="Project id scenarios deploy into."),
        location: str | None = typer.Option(None, "--location", help="Location scenarios deploy into."),
        list_scenarios: bool = typer.Option(False, "--list-scenarios", help="List scenario names and exit."),
    ) -> None:
        """Run a local stand-in for a GCP project running vLLM on Cloud Run (until Ctrl-C)."""
        import time

        from mcp_tools.errors import UserError
        from sandbox.scenarios import SCENARIOS

        if list_scenarios:
            for name in SCENARIOS:
                typer.echo(name)
            return
        if scenario is not None and incident is not None:
            raise UserError("--scenario and --incident: give one, not both")
        if scenario is not None and scenario not in SCENARIOS:
            raise UserError(f"--scenario {scenario!r}: unknown (one of {', '.join(SCENARIOS)})")
        if time_scale <= 0:
            raise UserError(f"--time-scale {time_scale}: must be positive")
        if not 0 <= port <= 65535:
            raise UserError(f"--port {port}: not a TCP port")
        from sandbox.server import start_sandbox
        from sandbox.testing import sandbox_env

        try:
            sb = start_sandbox(
                scenario=scenario,
                incident=incident,
                port=port,
                host=host,
                time_scale=time_scale,
                zero_latency=zero_latency,
                project=project,
                location=location,
            )
        except OSError as e:
            raise UserError(f"--port {port}: cannot listen on {host}:{port} ({e.strerror or e})") from None
        try:
            typer.echo(
                f"gemma-sre sandbox listening on {sb.url}  (scenario: {sb.scenario_name or 'none'}, "
                f"time-scale {time_scale:g})"
            )
            for name, info in sb.state()["services"].items():
                serving = ", ".join(f"{r} {p}%" for r, p in info["serving"]) or "nothing (no ready revision)"
                typer.echo(f"  service {name}: {info['uri']}  serving: {serving}")
            typer.echo("Export these to point gemma-sre (and the official clients) at it:")
            for k, v in sandbox_env(sb).items():
                typer.echo(f"  export {k}={v}")
            typer.echo("Journal: GET /_sandbox/journal   Faults: POST /_sandbox/faults   Ctrl-C to stop.")
            while True:
                time.sleep(1.0)
        except KeyboardInterrupt:
            typer.echo("stopping")
        finally:
            sb.stop()
