"""``gemma-sre watch``: observe a service every interval; report each incident once, then escalated or
resolved; plan fixes for new incidents and let them wait for a decision without blocking."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from agent.params import bounded, http_url, policy_option


def register(app: typer.Typer) -> None:
    @app.command()
    def watch(
        service: str = typer.Option(None, "--service", "-s", help="The Cloud Run service to watch."),
        interval: str = typer.Option(None, "--interval", help="Time between cycles: 30s, 5m, 1h (60s)."),
        policy: str = policy_option(),
        webhook: str = typer.Option(
            None,
            "--webhook",
            parser=http_url,
            envvar="GEMMA_SRE_WEBHOOK_URL",
            help="POST new / escalated / resolved incidents here (Slack-compatible JSON).",
        ),
        max_cycles: int = typer.Option(
            None, "--max-cycles", parser=bounded(int, 1, 10_000_000), help="Stop after this many cycles."
        ),
        quiet_cycles: int = typer.Option(
            2,
            "--quiet-cycles",
            parser=bounded(int, 1, 10_000),
            help="Cycles without a sign of an incident before it counts as resolved.",
        ),
        sandbox: bool = typer.Option(False, "--sandbox", help="Watch a service in a local sandbox (no GCP)."),
        scenario: str = typer.Option(
            "reference-weights-oom", "--scenario", help="The sandbox scenario (with --sandbox)."
        ),
        fleet: Path = typer.Option(
            None,
            "--fleet",
            help="Watch the services a fleet TOML file lists (agent/fleet.py); replicas sharing "
            "GEMMA_SRE_CHECKPOINT_URL share the work.",
        ),
    ) -> None:
        """Watch a service: each cycle reads what is new since the last, incidents are reported once
        (then escalated or resolved), and a planned fix waits for `gemma-sre approve THREAD` while
        watching goes on. Ctrl-C stops; the state survives a restart."""
        import contextlib

        from rich.console import Console
        from rich.markup import escape

        from agent.incidents_tracker import IncidentEvent
        from agent.interrupts import ctrl_c_raises
        from agent.watch import CycleSummary, Watcher, parse_interval, status_line
        from graph.config import Configuration
        from mcp_tools.errors import UserError
        from mcp_tools.settings import Policy

        console = Console(highlight=False)
        style = {"new": "bold red", "escalated": "bold yellow", "resolved": "bold green"}

        def on_event(e: IncidentEvent) -> None:
            i = e.incident
            console.print(
                f"[{style[e.kind]}]{e.kind.upper()}[/] {i.category} on {i.service} "
                f"(confidence {i.confidence:.2f}): {e.reason}",
                soft_wrap=True,
            )
            if e.kind != "resolved" and i.summary:
                console.print(f"    {i.summary}", soft_wrap=True)

        def on_cycle(s: CycleSummary) -> None:
            console.print(f"[dim]{escape(status_line(s))}[/]", soft_wrap=True)
            if s.finished_thread:
                how = s.finished_status or "not found in this state directory"
                console.print(f"thread {s.finished_thread} finished: {how}")
            if s.pending_thread:
                console.print(
                    f"[yellow]waiting for a decision:[/] gemma-sre approve {s.pending_thread}   "
                    f"gemma-sre reject {s.pending_thread} --reason '...'",
                    soft_wrap=True,
                )

        if fleet is not None:
            flags = (
                ("--service", service),
                ("--interval", interval),
                ("--policy", policy),
                ("--sandbox", sandbox),
            )
            given = [f for f, v in flags if v]
            if given:
                raise UserError(f"--fleet: {given[0]} is set per service in the fleet file, not here")
            from agent.fleet import watch_fleet

            try:
                with ctrl_c_raises():
                    n = watch_fleet(
                        fleet,
                        max_rounds=max_cycles,
                        webhook=webhook,
                        quiet_cycles=quiet_cycles,
                        print_line=lambda text: console.print(escape(text), soft_wrap=True),
                        on_event=on_event,
                    )
            except KeyboardInterrupt:
                console.print("stopped; the fleet's state is kept in the checkpoint store")
                return
            console.print(f"done after {n} round(s)")
            return
        interval_s = parse_interval(interval or "60s")
        pol = Policy.parse(policy)
        instance: str | None = None
        watcher: Watcher | None = None
        try:  # Ctrl-C stops it at any point, its start (the sandbox's, the first imports) included
            with ctrl_c_raises(), contextlib.ExitStack() as stack:
                if sandbox:
                    from agent.commands.repl import sandbox_configuration
                    from sandbox.scenarios import SCENARIOS
                    from sandbox.server import start_sandbox

                    if scenario not in SCENARIOS:
                        raise UserError(f"--scenario must be one of {', '.join(SCENARIOS)}, not {scenario!r}")
                    sb = start_sandbox(scenario=scenario)
                    stack.callback(sb.stop)
                    import uuid

                    instance = f"sandbox-{uuid.uuid4().hex}"  # this sandbox lives as long as this command
                    cfg = sandbox_configuration(sb, service=service, policy=pol)
                    console.print(
                        "[dim]sandbox: decide from another terminal (same GEMMA_SRE_STATE_DIR) while this "
                        "runs; the sandbox stops with it[/]"
                    )
                else:
                    overrides: dict[str, Any] = {"service": service}
                    if pol is not None:
                        overrides["policy"] = pol
                    cfg = Configuration.from_settings(**overrides)
                watcher = Watcher(
                    cfg, webhook=webhook, quiet_cycles=quiet_cycles, on_event=on_event, instance=instance
                )
                console.print(
                    f"watching {cfg.service} every {interval_s:g}s (policy {cfg.policy.value}); "
                    f"state: {watcher.store.path}; Ctrl-C stops",
                    soft_wrap=True,
                )
                n = watcher.run(interval_s=interval_s, max_cycles=max_cycles, on_cycle=on_cycle)
        except KeyboardInterrupt:
            if watcher is None:
                console.print("stopped before the first cycle")
            else:
                console.print(
                    f"stopped (cycle {watcher.state.cycle}); the state is kept in {watcher.store.path}"
                )
            return
        console.print(f"done after {n} cycle(s)")
