"""``gemma-sre demo``: the whole loop on the reference failure, on a local sandbox, in under a minute.

Gemma 4 12B in bf16 on one 24 GB NVIDIA L4: the weights alone do not fit, vLLM dies with CUDA out of
memory while loading them. The demo observes it, diagnoses it with the cited log line, shows the
capacity planner's options with their predicted memory, asks for approval (``--yes`` approves), applies
the fix as a new revision, verifies it and writes the report.
"""

from __future__ import annotations

from typing import Any

import typer

from agent.params import approver_option, model_url_option

SCENARIO = "reference-weights-oom"
DEMO_TIME_SCALE = 600.0  # a three-minute cold start takes a third of a second


def _banner(console: Any, cfg: Any) -> None:
    console.rule("[bold]gemma-sre demo[/]: Gemma 4 12B (bf16) on one NVIDIA L4, local sandbox")
    console.print(
        f"service [bold]{cfg.service}[/] in sandbox project {cfg.project} / {cfg.location}; "
        f"policy {cfg.policy.value}",
        highlight=False,
    )
    if cfg.model_url:
        console.print(f"diagnosis model: {cfg.model_url}", highlight=False)
    else:
        console.print(
            "[yellow]no model configured[/]: the deterministic analyzers diagnose "
            "(pass --model-url URL to add a model)",
            highlight=False,
        )


def planner_options(console: Any, result: Any) -> None:
    """The capacity planner's verdict on the failing spec, and which option is offered. The options
    it leads to, ranked and each with preflight's verdict, are the approval request's list (one
    selection rule: the plan offered is the first option that passes preflight,
    ``graph.preflight.choose_plan``)."""
    from mcp_tools.incident import ServiceSpec
    from mcp_tools.spec_ops import plan_spec

    raw = (result.values.get("observation") or {}).get("service")
    if not raw:
        return
    spec = ServiceSpec.model_validate(raw)
    try:
        # suggest=False: the planner's "best fix" ignores preflight; the line below names the option offered
        cap = plan_spec(spec, suggest=False)
        if cap is None:
            return
    except Exception as e:  # the planner cannot place this model: the request still shows the options
        console.print(f"[dim]planner: {e}[/]")
        return
    console.print(
        f"planner: {cap.model} on {cap.gpu} ({cap.gpu_memory_gib:.1f} GiB usable): weights "
        f"{cap.weights_gib:.1f} GiB, {cap.verdict}",
        highlight=False,
        soft_wrap=True,
    )
    pf = result.values.get("preflight") or {}
    ranked = result.values.get("ranked") or []
    if pf.get("option") and len(ranked) > 1:
        from graph.preflight import plan_text
        from mcp_tools.remediation import RemediationPlan

        chosen = RemediationPlan.model_validate(result.values.get("plan") or {})
        console.print(
            f"offered: option {pf['option']} of {len(ranked)}, {plan_text(chosen)}: the first ranked "
            "option that passes preflight (the list below says why the others do not)",
            highlight=False,
            soft_wrap=True,
        )


def register(app: typer.Typer) -> None:
    @app.command()
    def demo(
        yes: bool = typer.Option(False, "--yes", "-y", help="Approve the plan without asking."),
        model_url: str = model_url_option("none: analyzers only"),
        approver: str = approver_option(),
    ) -> None:
        """Run the whole loop on the reference failure (Gemma 4 12B bf16 on one L4) in a local sandbox."""
        from agent.session import CycleOptions, run_interactive
        from mcp_tools.settings import Policy

        code = run_interactive(
            CycleOptions(
                policy=Policy.APPROVE,
                yes=yes,
                approver=approver,
                sandbox=True,
                scenario=SCENARIO,
                use_model=True,
                model_url=model_url,
                time_scale=DEMO_TIME_SCALE,
                demo=True,
            ),
            banner=_banner,
            before_decision=planner_options,
        )
        if code:
            raise typer.Exit(code)
