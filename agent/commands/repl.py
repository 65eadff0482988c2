"""``gemma-sre repl``: an interactive session with the agent (commands, questions, approvals)."""

from __future__ import annotations

from typing import Any

import typer

from agent.params import approver_option, model_url_option, policy_option


def sandbox_configuration(
    sb: Any, *, service: str | None, policy: Any = None, model_url: str | None = None
) -> Any:
    """A loop ``Configuration`` pointed at a running sandbox; the service defaults to its first one."""
    from graph.config import Configuration
    from mcp_tools.cloudrun import CloudRun

    overrides: dict[str, Any] = dict(
        **sb.settings_fields(),
        verify_deadline_s=60.0,
        verify_poll_s=0.2,
        retry_base_s=0.1,
        model_url=model_url,
        vllm_base_url=None,
        use_model=bool(model_url),
    )
    if policy is not None:
        overrides["policy"] = policy
    cfg = Configuration.from_settings(**overrides)
    if model_url is None:
        cfg.model_url = None  # the sandbox serves synthetic text, not a diagnosis
    name = service
    if not name:
        services = CloudRun(cfg.settings()).list_services()
        name = services[0].name if services else ""
    cfg.service = name or ""
    return cfg


def register(app: typer.Typer) -> None:
    @app.command()
    def repl(
        service: str = typer.Option(None, "--service", "-s", help="The Cloud Run service to work on."),
        sandbox: bool = typer.Option(False, "--sandbox", help="Work against a local sandbox (no GCP)."),
        scenario: str = typer.Option(
            "reference-weights-oom", "--scenario", help="The sandbox scenario (with --sandbox)."
        ),
        policy: str = policy_option(),
        approver: str = approver_option(),
        model_url: str = model_url_option("GEMMA_SRE_MODEL_URL"),
    ) -> None:
        """An interactive session: /status /logs /metrics /threads /incidents /diagnose /plan /approve
        /reject /bench /capacity /report /help, and free-form questions to the model (read-only tools;
        figures from tools)."""
        import contextlib

        from rich.console import Console

        from agent.repl.app import HISTORY_FILE, run_repl
        from agent.repl.commands import ReplCommands
        from graph.config import Configuration
        from mcp_tools.errors import UserError
        from mcp_tools.settings import Policy, get_settings

        pol = Policy.parse(policy)
        console = Console(highlight=False)
        with contextlib.ExitStack() as stack:
            if sandbox:
                from sandbox.scenarios import SCENARIOS
                from sandbox.server import start_sandbox

                if scenario not in SCENARIOS:
                    raise UserError(f"--scenario must be one of {', '.join(SCENARIOS)}, not {scenario!r}")
                console.print(f"[dim]starting a sandbox with scenario {scenario} ...[/]")
                sb = start_sandbox(scenario=scenario)
                stack.callback(sb.stop)
                # The sandbox's own vLLM serves synthetic text: the model is only ever the user's.
                url = model_url or get_settings().model_url
                cfg = sandbox_configuration(sb, service=service, policy=pol, model_url=url)
            else:
                overrides: dict[str, Any] = {"service": service}
                if model_url:
                    overrides["model_url"] = model_url
                if pol is not None:
                    overrides["policy"] = pol
                cfg = Configuration.from_settings(**overrides)
            commands = ReplCommands(cfg, approver=approver)
            run_repl(commands, console=console, history_path=get_settings().state_dir / HISTORY_FILE)
