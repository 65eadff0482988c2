"""One cycle on screen, shared by ``gemma-sre run`` and ``gemma-sre demo``.

Starts a sandbox when asked, runs the loop to the approval interrupt, asks the person (or takes
``--yes``), resumes, and prints the outcome and where the report is. Without a terminal and without
``--yes`` it never waits: it says how to decide and exits.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from mcp_tools.settings import Policy

DEFAULT_SCENARIO = "reference-weights-oom"


@dataclass
class CycleOptions:
    service: str | None = None
    policy: Policy | None = None
    yes: bool = False
    approver: str | None = None
    sandbox: bool = False
    scenario: str | None = None
    use_model: bool = True
    model_url: str | None = None
    as_json: bool = False
    time_scale: float | None = None
    demo: bool = False


@contextlib.contextmanager
def maybe_sandbox(opts: CycleOptions) -> Iterator[Any]:
    if not opts.sandbox:
        yield None
        return
    from sandbox.server import start_sandbox

    kwargs: dict[str, Any] = {"scenario": opts.scenario or DEFAULT_SCENARIO}
    if opts.time_scale is not None:
        kwargs["time_scale"] = opts.time_scale
    sb = start_sandbox(**kwargs)
    try:
        yield sb
    finally:
        sb.stop()


def sandbox_service(sb: Any) -> str:
    """The service a sandbox scenario deployed (the first, when there are several)."""
    names = [key.rsplit("/", 1)[1] for key in sb.state()["services"]]
    if not names:
        from mcp_tools.errors import UserError

        raise UserError("the sandbox has no service: pass --scenario NAME")
    return names[0]


def configuration_for(opts: CycleOptions, sb: Any) -> Any:
    from graph.config import Configuration

    overrides: dict[str, Any] = {"service": opts.service, "use_model": opts.use_model}
    if opts.policy is not None:
        overrides["policy"] = opts.policy
    if opts.model_url:
        overrides["model_url"] = opts.model_url
    if sb is not None:
        overrides.update(
            **sb.settings_fields(),
            service=opts.service or sandbox_service(sb),
            verify_deadline_s=60.0,
            verify_poll_s=0.2,
            retry_base_s=0.1,
        )
        if not opts.model_url:
            overrides["model_url"] = None  # the sandbox's endpoint serves synthetic text, not a diagnosis
            overrides["vllm_base_url"] = None
    return Configuration.from_settings(**overrides)


def run_interactive(
    opts: CycleOptions,
    *,
    banner: Callable[[Console, Any], None] | None = None,
    before_decision: Callable[[Console, Any], None] | None = None,
) -> int:
    """Run one cycle with the person in the loop. The exit code: 0 done or awaiting a decision, 1 failed."""
    from agent.display import current_user, print_outcome, print_request, print_update
    from graph.runner import resume_cycle, run_cycle

    console = Console(stderr=opts.as_json, highlight=False)
    if opts.sandbox:
        console.print(f"[dim]starting a sandbox (scenario {opts.scenario or DEFAULT_SCENARIO}) ...[/]")
    with maybe_sandbox(opts) as sb:
        cfg = configuration_for(opts, sb)
        console.print(f"[dim]observing service {cfg.service or '-'} (each step is shown as it ends) ...[/]")
        if banner is not None:
            banner(console, cfg)
        if banner is None and cfg.use_model and not cfg.model_url and cfg.model is None:
            console.print("[dim]no model configured: diagnosing with the deterministic analyzers only[/]")

        def show(node: str, update: dict[str, Any]) -> None:
            print_update(console, node, update)

        result = run_cycle(cfg, on_update=show)
        if result.status == "awaiting_approval" and result.pending is not None:
            if before_decision is not None:
                before_decision(console, result)
            print_request(console, result.pending)
            decision: str | None = None
            approver = current_user()  # who decides; a typed --approver is a note beside it
            if opts.yes:
                decision = "approve"
                note = f" (note: {opts.approver})" if opts.approver else ""
                console.print(f"approved with --yes by {approver}{note}")
            elif sys.stdin.isatty() and not opts.as_json:
                from rich.prompt import Confirm

                decision = "approve" if Confirm.ask("Apply this plan?", console=console) else "reject"
            if decision is None:
                console.print(f"Waiting for a decision on thread [bold]{result.thread_id}[/].")
                if sb is not None:
                    console.print(
                        "This sandbox lives only as long as this command: run it again with --yes "
                        "(or at a terminal) to approve."
                    )
                else:  # one command per line, never wrapped inside a command
                    console.print(f"Approve: gemma-sre approve {result.thread_id}", soft_wrap=True)
                    console.print(
                        f"Reject:  gemma-sre reject {result.thread_id} --reason '...'", soft_wrap=True
                    )
                    console.print("Pending threads: gemma-sre threads", soft_wrap=True)
                _emit_json(opts, result)
                return 0
            result = resume_cycle(
                result.thread_id,
                decision=decision,
                approver=approver,
                note=opts.approver,
                on_update=show,
                live=cfg,
            )
        print_outcome(console, result.status, result.summary, result.report)
        _emit_json(opts, result)
        # A cycle that could not read the service checked nothing: that is not a success.
        unread = (result.values.get("observation_summary") or {}).get("unread") or []
        blind = [u for u in unread if str(u).startswith("service spec")]
        if blind:
            print(f"error: could not read the service: {blind[0]}", file=sys.stderr)
        return 1 if result.status in ("failed", "undetermined") or blind else 0


def _emit_json(opts: CycleOptions, result: Any) -> None:
    if not opts.as_json:
        return
    doc = {
        "thread_id": result.thread_id,
        "status": result.status,
        "summary": result.summary,
        "report": result.report,
        "pending": result.pending.model_dump(mode="json") if result.pending else None,
    }
    sys.stdout.write(json.dumps(doc, default=str) + "\n")
