"""``gemma-sre run --service NAME``: one cycle of the loop against a real project or a sandbox."""

from __future__ import annotations

import typer

from agent.params import approver_option, model_url_option, policy_option


def register(app: typer.Typer) -> None:
    @app.command()
    def run(
        service: str = typer.Option(None, "--service", help="The Cloud Run service (or GEMMA_SRE_SERVICE)."),
        policy: str = policy_option(),
        yes: bool = typer.Option(False, "--yes", "-y", help="Approve the plan without asking."),
        approver: str = approver_option(),
        sandbox: bool = typer.Option(False, "--sandbox", help="Start a local sandbox and run against it."),
        scenario: str = typer.Option(
            None, "--scenario", help="The sandbox scenario (with --sandbox; default reference-weights-oom)."
        ),
        no_model: bool = typer.Option(False, "--no-model", help="Diagnose with the analyzers only."),
        model_url: str = model_url_option("GEMMA_SRE_MODEL_URL; none with --sandbox"),
        as_json: bool = typer.Option(False, "--json", help="Print the result as one JSON document."),
    ) -> None:
        """Observe, diagnose, propose and (after approval) apply, verify and report, once."""
        from agent.session import CycleOptions, run_interactive
        from mcp_tools.errors import UserError
        from mcp_tools.settings import Policy

        if scenario and not sandbox:
            raise UserError("--scenario needs --sandbox")
        pol = Policy.parse(policy)
        code = run_interactive(
            CycleOptions(
                service=service,
                policy=pol,
                yes=yes,
                approver=approver,
                sandbox=sandbox,
                scenario=scenario,
                use_model=not no_model,
                model_url=model_url,
                as_json=as_json,
            )
        )
        if code:
            raise typer.Exit(code)
