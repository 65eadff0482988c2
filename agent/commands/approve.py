"""``gemma-sre approve THREAD`` / ``gemma-sre reject THREAD``: decide a pending approval.

From another process or later: the thread is resumed from the checkpoint store, against the service
and endpoints it was started with. The decision is recorded as the OS user running the command
(``--approver NAME`` is a note beside it). ``--option N`` approves another ranked option than the
one offered (one that passed preflight). When another process decided the plan first, nothing is
done here: the output says which decision stands, by whom and when (exit 1 when it is not yours). An
approval for a service that cannot be reached is refused before anything is recorded (exit 2).
"""

from __future__ import annotations

import typer

from agent.params import approver_option, bounded


def _decide(
    thread: str,
    decision: str,
    approver: str | None,
    reason: str | None,
    as_json: bool,
    option: int | None = None,
) -> None:
    import json
    import sys

    from rich.console import Console

    from agent.display import current_user, print_outcome, print_update
    from graph.runner import resume_cycle

    console = Console(stderr=as_json)
    result = resume_cycle(
        thread,
        decision=decision,
        approver=current_user(),
        note=approver,
        reason=reason,
        on_update=lambda n, u: print_update(console, n, u),
        option=option,
    )
    lost = result.status in ("already_decided", "busy") and (result.decided or {}).get("decision") != decision
    if as_json:
        doc = {
            "thread_id": result.thread_id,
            "status": result.status,
            "summary": result.summary,
            "report": result.report,
        }
        if result.decided is not None:
            doc["decided"] = result.decided
        sys.stdout.write(json.dumps(doc) + "\n")
    else:
        print_outcome(console, result.status, result.summary, result.report)
    if result.status in ("failed", "undetermined") or lost:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    @app.command()
    def approve(
        thread: str = typer.Argument(..., help="The thread id `gemma-sre run` printed."),
        approver: str = approver_option(),
        option: int = typer.Option(
            None,
            "--option",
            parser=bounded(int, 1, 100),
            help="Approve ranked option N (as the request lists them) instead of the one offered; "
            "it must have passed preflight.",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the result as one JSON document."),
    ) -> None:
        """Approve a pending plan (or another ranked option, --option N): it is applied, verified, and
        rolled back if it fails. The service must be reachable: otherwise nothing is recorded."""
        _decide(thread, "approve", approver, None, as_json, option)

    @app.command()
    def reject(
        thread: str = typer.Argument(..., help="The thread id `gemma-sre run` printed."),
        reason: str = typer.Option(None, "--reason", help="Why (kept in the audit log and the report)."),
        approver: str = approver_option(),
        as_json: bool = typer.Option(False, "--json", help="Print the result as one JSON document."),
    ) -> None:
        """Reject a pending plan: nothing is applied; the report records who and why."""
        _decide(thread, "reject", approver, reason, as_json)
