"""approve: the human decision, through LangGraph's ``interrupt()``.

The node runs again from its top when the thread is resumed, so nothing before the ``interrupt()``
call has a side effect: the payload is computed from the state only. After it returns, the decision
is validated, recorded as the plan's one decision (``graph.checkpoint.Decisions``: first one wins; a
resume whose decision lost stops with ``DecisionConflict``), written to the state and appended to
the audit log (idempotently: a re-run does not record it twice). Under the ``auto`` policy, plans
whose every mutating step is of a kind the user listed as safe are approved by the policy without
interrupting, and that too is audited.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import interrupt

from graph import audit
from graph.checkpoint import DecisionRecord
from graph.config import Configuration
from graph.policy import apply_key, approval_id_for, auto_allowed
from graph.state import Approval, ApprovalRequest, SREState, event, now_iso
from mcp_tools.remediation import RemediationPlan


class ApprovalInputError(ValueError):
    """A resume value that is not a decision."""


def thread_id_of(config: RunnableConfig) -> str:
    tid = ((config or {}).get("configurable") or {}).get("thread_id")
    return str(tid) if tid else "no-thread"


def approval_request(state: SREState, config: RunnableConfig) -> ApprovalRequest:
    """What the person is asked to decide: the plan, the diff and the prediction. Pure."""
    cfg = Configuration.from_runnable_config(config)
    tid = thread_id_of(config)
    plan = RemediationPlan.model_validate(state.get("plan") or {})
    return ApprovalRequest.of_state(state, thread_id=tid, service=cfg.service, plan_key=apply_key(tid, plan))


def parse_decision(value: Any) -> tuple[str, str, str | None, str | None]:
    """(decision, approver, reason, at) from a resume value; anything else is refused."""
    if isinstance(value, str):
        value = {"decision": value}
    if not isinstance(value, dict):
        raise ApprovalInputError(f"a decision must be a mapping, not {type(value).__name__}")
    decision = str(value.get("decision", "")).strip().lower()
    if decision not in ("approve", "reject"):
        raise ApprovalInputError(f"decision must be 'approve' or 'reject', not {value.get('decision')!r}")
    approver = str(value.get("approver") or "").strip()
    if not approver:
        raise ApprovalInputError("a decision must name its approver")
    reason = value.get("reason")
    at = value.get("at")
    return decision, approver[:200], (str(reason)[:500] if reason else None), (str(at) if at else None)


class DecisionConflict(RuntimeError):
    """The thread was resumed with a decision that is not the one recorded for this plan, and the
    recorded one is an approval another resume carries out: the graph stops here, nothing applied.
    (A recorded rejection is simply carried out: that applies nothing.)"""


def _record(
    thread_id: str,
    key: str,
    decision: str,
    approver: str,
    note: str | None,
    reason: str | None,
    at: str | None,
    claim: str | None,
    cfg: Configuration,
) -> DecisionRecord:
    """The decision that stands for this plan: ours, recorded now if none was (first one wins)."""
    from graph.checkpoint import open_decisions
    from mcp_tools.settings import get_settings

    mine = DecisionRecord(
        thread_id=thread_id,
        plan_key=key,
        decision=decision,  # type: ignore[arg-type]
        principal=approver,
        note=note,
        reason=reason,
        approval_id=approval_id_for(thread_id, key),
        at=at or now_iso(),
        **({"claim": claim} if claim else {}),
    )
    with open_decisions(get_settings().checkpoint_url, cfg.state_path) as store:
        won, standing = store.claim(mine)
    if won or standing.claim == claim:
        return standing
    if approver == AUTO_PRINCIPAL and standing.principal == AUTO_PRINCIPAL:
        return standing  # the policy's own approval, recorded before a restart
    if standing.decision == "reject":
        return standing  # the rejection stands: carrying it out applies nothing
    raise DecisionConflict(
        f"this plan was already {standing.verb()} by {standing.who} at {standing.at}; "
        f"the {decision} by {approver} is not carried out"
    )


AUTO_PRINCIPAL = "policy:auto"


def approve(state: SREState, config: RunnableConfig) -> dict[str, Any]:
    cfg = Configuration.from_runnable_config(config)
    plan = RemediationPlan.model_validate(state.get("plan") or {})
    thread_id = thread_id_of(config)
    key = apply_key(thread_id, plan)

    decision: str
    approver: str
    reason: str | None
    at: str | None
    note: str | None = None
    claim: str | None = None
    if auto_allowed(plan, cfg, state):
        decision, approver, at = "approve", AUTO_PRINCIPAL, None
        reason = "every mutating step is of a kind listed in GEMMA_SRE_AUTO_KINDS"
    else:
        # Everything above is pure; the interrupt is the first thing with an effect.
        answer = interrupt(approval_request(state, config).model_dump(mode="json"))
        decision, approver, reason, at = parse_decision(answer)
        if isinstance(answer, dict):
            note = str(answer["note"]).strip()[:200] or None if answer.get("note") else None
            claim = str(answer["claim"]) if answer.get("claim") else None
        shown = answer.get("plan_key") if isinstance(answer, dict) else None
        if decision == "approve" and shown is not None and shown != key:
            # The plan changed after the person saw it: their approval was for another plan.
            decision = "reject"
            reason = "the plan changed after it was shown for approval; nothing is applied"
            claim = None  # a decision on this plan of its own, recorded below
    rec = _record(thread_id, key, decision, approver, note, reason, at, claim, cfg)

    approval = Approval(
        decision=rec.decision,
        approver=rec.principal,
        note=rec.note,
        at=rec.at,
        reason=rec.reason,
        approval_id=rec.approval_id,
        claim=rec.claim,
        policy=cfg.policy.value,
    )
    pf = state.get("preflight") or {}
    audit.append(
        audit.AuditEvent(
            event="approval" if rec.decision == "approve" else "rejection",
            thread_id=thread_id,
            service=cfg.service,
            actor=rec.principal,
            approval_id=approval.approval_id,
            what=", ".join(f"{s.kind.value} {s.change}" for s in plan.steps),
            diff=pf.get("diff", ""),
            at=approval.at,
            details={"reason": rec.reason, "note": rec.note, "policy": cfg.policy.value, "apply_key": key},
        ),
        state_dir=cfg.state_path,
    )
    msg = f"{rec.verb()} by {rec.who}" + (f" ({rec.reason})" if rec.reason else "")
    return {"approval": approval.model_dump(mode="json"), "timeline": event("approve", msg)}
