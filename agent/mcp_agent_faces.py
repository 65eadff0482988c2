"""The whole agent as MCP tools, so Antigravity CLI, Gemini CLI or any MCP client can run the loop.

- ``investigate(service, question?)``: runs the loop from observe to preflight and stops at the
  approval request: the diagnosis with its evidence, the plan with its diff and prediction, and the
  thread id to decide on. It never applies anything itself, whatever the server's policy.
- ``approve_remediation(thread_id, approver?)`` / ``reject_remediation(thread_id, reason)``: resume that
  thread from the checkpointer (any process, any time later); approve applies, verifies and rolls
  back as the graph does, and returns the outcome. The decision is recorded as the server's
  authenticated principal (``GEMMA_SRE_MCP_PRINCIPAL``: who holds its bearer token; default
  ``mcp:<OS user of the server>``); a name the client passes is only a note beside it. When another
  process decided first, nothing is done and the result says which decision stands.
- ``get_incident_report(thread_id)``: the thread's Markdown report and its outcome, or the request it
  still waits on.

Policies: ``read-only`` hides ``approve_remediation`` (and investigations stop at the diagnosis);
``suggest`` hides it too (plans are shown, never applied). Each graph step is sent as an MCP progress
notification when the client asked for progress (a ``progressToken``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.fastmcp import Context
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from graph.approval_request import ApprovalRequest
from mcp_tools.errors import UserError
from mcp_tools.server import READ_ONLY, ResultModel, ServerState, SharedResult, result, tool
from mcp_tools.settings import Policy

if TYPE_CHECKING:
    from mcp.server.fastmcp import FastMCP

log = logging.getLogger(__name__)

#: The loop's steps, in order, for progress figures.
STEPS = ["observe", "diagnose", "propose", "preflight", "approve", "apply", "verify", "rollback", "report"]

#: Runs the loop (observe, diagnose, plan); it writes only a checkpoint and a report of its own.
INVESTIGATE = ToolAnnotations(
    readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=True
)
DECIDE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=True)
REJECT = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False)


class DiagnosisView(BaseModel):
    category: str = "unknown"
    confidence: float = 0.0
    summary: str = ""
    evidence: list[dict[str, Any]] = Field(default_factory=list)
    model_used: str | None = None


class InvestigateOut(ResultModel):
    thread_id: str
    service: str
    status: str  # awaiting_approval, diagnosed, suggested, healthy, no_action, ...
    summary: str = ""
    diagnosis: DiagnosisView
    plan: dict[str, Any] = Field(default_factory=dict)
    diff: str = ""
    prediction: list[dict[str, Any]] = Field(default_factory=list)
    preflight_ok: bool | None = None
    preflight_notes: list[str] = Field(default_factory=list)
    # Every ranked option with preflight's verdict: approve_remediation(option=N) approves another.
    options: list[dict[str, Any]] = Field(default_factory=list)
    observation_unread: list[str] = Field(default_factory=list)
    question: str | None = None
    answer: str | None = None
    next: str = ""
    request: ApprovalRequest | None = Field(default=None, exclude=True)  # rendered into the text


class OutcomeOut(SharedResult):
    thread_id: str
    status: str
    summary: str = ""
    decision: str | None = None
    approver: str | None = None
    approver_note: str | None = None
    decided: dict[str, Any] | None = None  # status already_decided: the decision that stands
    option: int | None = None  # the ranked option approved, when it is not the one offered
    applied_revision: str | None = None
    verification: dict[str, Any] | None = None
    rollback: dict[str, Any] | None = None
    report_markdown: str | None = None
    report_json: str | None = None


class ReportOut(ResultModel):
    thread_id: str
    status: str
    summary: str = ""
    markdown: str = ""
    report: dict[str, Any] = Field(default_factory=dict)
    pending: ApprovalRequest | None = None


def _progress(ctx: Context | None, offset: int = 0) -> Callable[[str, dict[str, Any]], None] | None:
    """An ``on_update`` for the loop (called in a worker thread) that sends MCP progress notifications."""
    if ctx is None:
        return None
    import anyio.from_thread

    done = [offset]

    def on_update(node: str, update: dict[str, Any]) -> None:
        done[0] += 1
        msgs = [e.get("message", "") for e in update.get("timeline") or []]
        message = f"{node}: {msgs[-1]}" if msgs else node
        try:
            anyio.from_thread.run(ctx.report_progress, float(done[0]), float(len(STEPS)), message[:300])
        except Exception as e:  # progress is best effort; the run goes on
            log.debug("progress notification failed: %s", e)

    return on_update


def _cfg(state: ServerState, service: str, *, policy: Policy) -> Any:
    from graph.config import Configuration
    from mcp_tools.names import validate_service_name

    name = validate_service_name(service.strip()) if service and service.strip() else state.service_name(None)
    return Configuration.from_settings(state.settings, service=name, policy=policy)


def _investigate_out(res: Any, service: str) -> InvestigateOut:
    from graph.state import ApprovalRequest

    v = res.values
    d = v.get("diagnosis") or {}
    pf = v.get("preflight") or {}
    req = res.pending or ApprovalRequest.of_state(v, thread_id=res.thread_id, service=service)
    if res.status == "awaiting_approval":
        nxt = (
            f"approve_remediation(thread_id={res.thread_id!r}) applies, verifies and rolls "
            f"back on failure (option=N approves another ranked option that passed preflight); "
            f"reject_remediation(thread_id={res.thread_id!r}, reason=...) records a no."
        )
    else:
        nxt = f"get_incident_report(thread_id={res.thread_id!r}) has the full report."
    return InvestigateOut(
        thread_id=res.thread_id,
        service=service,
        status=res.status,
        summary=res.summary or str(d.get("summary") or ""),
        diagnosis=DiagnosisView(
            category=str(d.get("category") or "unknown"),
            confidence=float(d.get("confidence") or 0.0),
            summary=str(d.get("summary") or ""),
            evidence=list(d.get("evidence") or [])[:12],
            model_used=d.get("model_used"),
        ),
        plan=req.plan.model_dump(mode="json"),
        diff=req.diff,
        prediction=req.prediction,
        preflight_ok=pf.get("ok") if pf else None,
        preflight_notes=req.preflight_notes,
        options=[o.model_dump(mode="json") for o in req.options],
        observation_unread=list((v.get("observation_summary") or {}).get("unread") or []),
        next=nxt,
        request=req,
    )


def _investigate_text(out: InvestigateOut) -> str:
    from agent.display import request_text

    d = out.diagnosis
    lines = [
        f"thread {out.thread_id} ({out.service}): {out.status}",
        f"{d.category} ({d.confidence:.2f}): {d.summary}",
    ]
    lines += [f"  line {e.get('line')}: {e.get('text')}" for e in d.evidence[:6]]
    if out.request is not None and out.request.plan.steps:
        lines.append(request_text(out.request))
    if out.question:
        lines.append(f"question: {out.question}")
        lines.append(f"answer: {out.answer}")
    lines.append(out.next)
    return "\n".join(lines)


def _outcome_out(res: Any) -> OutcomeOut:
    v = res.values
    approval = v.get("approval") or {}
    applied = v.get("applied") or {}
    return OutcomeOut(
        thread_id=res.thread_id,
        status=res.status,
        summary=res.summary,
        decision=approval.get("decision"),
        approver=approval.get("approver"),
        approver_note=approval.get("note"),
        decided=res.decided,
        option=approval.get("option"),
        applied_revision=applied.get("revision"),
        verification=v.get("verification"),
        rollback=v.get("rollback"),
        report_markdown=res.report.get("markdown"),
        report_json=res.report.get("json"),
    )


def principal(state: ServerState) -> str:
    """Who decides through this server: its configured principal, else the OS user it runs as."""
    from agent.display import current_user

    p = (state.settings.mcp_principal or "").strip()
    return p[:200] if p else f"mcp:{current_user()}"


def _answer(question: str, cfg: Any, out: InvestigateOut) -> str:
    from agent.repl.ask import NoModelError, answer_question

    figures = {"diagnosis": out.diagnosis.model_dump(), "plan": out.plan, "prediction": out.prediction}
    try:
        a = answer_question(question, cfg, emit=lambda s: None, repl_figures=figures)
    except NoModelError as e:
        return f"not answered: {e}"
    return f"{a.text}\n[{a.sources_note()}; model {a.model}]"


def register_agent_faces(mcp: FastMCP, state: ServerState) -> None:
    """Register investigate / approve_remediation / reject_remediation / get_incident_report."""
    import anyio.to_thread

    policy = state.policy

    @tool(mcp, INVESTIGATE)
    async def investigate(
        service: str, question: str | None = None, ctx: Context | None = None
    ) -> Annotated[CallToolResult, InvestigateOut]:
        """Investigate a vLLM service on Cloud Run: observe (spec, revisions, logs, /health, /metrics),
        diagnose the root cause with cited log lines, and plan a typed fix with its revision diff and
        the capacity planner's prediction. Nothing is applied: the plan waits on the returned thread_id
        for approve_remediation or reject_remediation. An optional question is answered by the model
        with read-only tools (needs GEMMA_SRE_MODEL_URL or VLLM_BASE_URL)."""
        # Investigating never applies: under 'auto' the loop still stops at the approval request.
        from graph.runner import run_cycle  # imported where used: the server starts without LangGraph

        run_policy = Policy.APPROVE if policy is Policy.AUTO else policy
        cfg = _cfg(state, service, policy=run_policy)
        on_update = _progress(ctx)
        res = await anyio.to_thread.run_sync(lambda: run_cycle(cfg, on_update=on_update))
        out = _investigate_out(res, cfg.service)
        if question and question.strip():
            out.question = question.strip()[:2000]
            out.answer = await anyio.to_thread.run_sync(lambda: _answer(out.question or "", cfg, out))
        return result(out, _investigate_text(out))

    if policy not in (Policy.READ_ONLY, Policy.SUGGEST):

        @tool(mcp, DECIDE)
        async def approve_remediation(
            thread_id: str,
            approver: str | None = None,
            option: Annotated[
                int | None,
                Field(
                    ge=1,
                    description="Approve ranked option N (1-based, as investigate's options list them) "
                    "instead of the one offered; it must have passed preflight. Example: 2",
                ),
            ] = None,
            ctx: Context | None = None,
        ) -> Annotated[CallToolResult, OutcomeOut]:
            """Approve the plan an investigation left waiting on thread_id (or, with option N, ranked
            option N of the investigation's options, which must have passed preflight): it is applied
            to Cloud Run (recorded as this server's authenticated principal; approver is a note
            beside it), verified (revision Ready, /health, a smoke completion) and rolled back to
            the last good revision if verification fails. Returns the outcome; if another decision
            on this plan came first, nothing is done and status is already_decided. A service that
            cannot be reached is refused before anything is recorded."""
            from graph.runner import resume_cycle

            on_update = _progress(ctx, offset=STEPS.index("preflight") + 1)
            res = await anyio.to_thread.run_sync(
                lambda: resume_cycle(
                    thread_id,
                    decision="approve",
                    approver=principal(state),
                    note=approver,
                    on_update=on_update,
                    option=option,
                )
            )
            out = _outcome_out(res)
            return result(
                out,
                f"{out.status}: {out.summary}"
                + (f"\nreport: {out.report_markdown}" if out.report_markdown else ""),
            )

    @tool(mcp, REJECT)
    async def reject_remediation(
        thread_id: str, reason: str, approver: str | None = None
    ) -> Annotated[CallToolResult, OutcomeOut]:
        """Reject the plan waiting on thread_id: nothing is applied; the report records who (this
        server's authenticated principal; approver is a note beside it) and why. If another decision
        on this plan came first, nothing is done and status is already_decided."""
        if not reason or not reason.strip():
            raise UserError("reason: say why the plan is rejected (it is recorded in the report)")
        from graph.runner import resume_cycle

        res = await anyio.to_thread.run_sync(
            lambda: resume_cycle(
                thread_id, decision="reject", approver=principal(state), note=approver, reason=reason.strip()
            )
        )
        out = _outcome_out(res)
        return result(out, f"{out.status}: {out.summary}")

    @tool(mcp, READ_ONLY)
    async def get_incident_report(thread_id: str) -> Annotated[CallToolResult, ReportOut]:
        """The incident report of a thread (Markdown and JSON: timeline, evidence, diagnosis, plan,
        approval, outcome), or the approval request it is still waiting on."""

        def read() -> ReportOut:
            import json

            from graph.runner import thread_result

            res = thread_result(thread_id)
            if res.waiting:
                return ReportOut(
                    thread_id=thread_id,
                    status="awaiting_approval",
                    summary="no report yet: the plan waits for approve_remediation or reject_remediation",
                    pending=res.pending,
                )
            paths = res.report
            md = Path(paths["markdown"]).read_text(encoding="utf-8") if paths.get("markdown") else ""
            js = json.loads(Path(paths["json"]).read_text(encoding="utf-8")) if paths.get("json") else {}
            return ReportOut(
                thread_id=thread_id,
                status=res.status,
                summary=res.summary,
                markdown=md,
                report=js,
            )

        out = await anyio.to_thread.run_sync(read)
        return result(out, out.markdown or f"{out.status}: {out.summary}")
