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
from graph.state import Approval, ApprovalRequest, PreflightResult, SREState, event, now_iso
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
    approved_key: str,
    decision: str,
    approver: str,
    note: str | None,
    reason: str | None,
    at: str | None,
    claim: str | None,
    cfg: Configuration,
) -> DecisionRecord:
    """The decision that stands for this plan: ours, recorded now if none was (first one wins).

    ``key`` is the offered plan's (one decision per plan put to a person); ``approved_key`` the key
    of the plan the decision is for: the same, or another option the person chose."""
    from graph.checkpoint import open_ledger

    mine = DecisionRecord(
        thread_id=thread_id,
        plan_key=key,
        decision=decision,  # type: ignore[arg-type]
        principal=approver,
        note=note,
        reason=reason,
        approval_id=approval_id_for(thread_id, approved_key),
        at=at or now_iso(),
        **({"claim": claim} if claim else {}),
    )
    with open_ledger(cfg.state_path) as store:
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


def server_identity(config: RunnableConfig) -> str | None:
    """The caller LangGraph Server authenticated for this run (its ``auth`` handler's ``identity``, as
    ``langgraph:<identity>``); None without one (no server, or ``langgraph dev``'s no-auth default)."""
    user = ((config or {}).get("configurable") or {}).get("langgraph_auth_user_id")
    if not isinstance(user, str) or not user.strip():
        return None
    return "langgraph:" + user.strip()[:190]


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
    option: int | None = None
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
        who = server_identity(config)
        if who is not None:
            # LangGraph Server authenticated whoever resumed this run: that is who decided, and the
            # name the resume value gives is kept beside it, as a note (never instead).
            note = note or (approver if approver != who else None)
            approver = who
        shown = answer.get("plan_key") if isinstance(answer, dict) else None
        if decision == "approve" and shown is not None and shown != key:
            # The plan changed after the person saw it: their approval was for another plan.
            decision = "reject"
            reason = "the plan changed after it was shown for approval; nothing is applied"
            claim = None  # a decision on this plan of its own, recorded below
        if decision == "approve" and isinstance(answer, dict) and answer.get("option") is not None:
            option = int(answer["option"])
    update: dict[str, Any] = {}
    approved_key = key
    offered = (state.get("preflight") or {}).get("option")
    if option is not None and option != offered:
        chosen = choose_option(state, cfg, option)
        if chosen is None:  # the runner checked it; a state edited since cannot make it pass
            decision, option, claim = "reject", None, None
            reason = "the option chosen does not pass preflight; nothing is applied"
        else:
            update = chosen
            approved_key = apply_key(thread_id, RemediationPlan.model_validate(chosen["plan"]))
    else:
        option = None
    rec = _record(thread_id, key, approved_key, decision, approver, note, reason, at, claim, cfg)
    if rec.approval_id != approval_id_for(thread_id, approved_key):
        # The decision that stands (another process's) is for another option than ours: carry out its.
        update, option = _standing_option(state, cfg, thread_id, rec)
        approved_key = apply_key(thread_id, RemediationPlan.model_validate(update.get("plan") or plan))
    shown_plan = RemediationPlan.model_validate(update.get("plan") or plan)

    approval = Approval(
        decision=rec.decision,
        approver=rec.principal,
        note=rec.note,
        at=rec.at,
        reason=rec.reason,
        approval_id=rec.approval_id,
        claim=rec.claim,
        policy=cfg.policy.value,
        plan_key=key,
        option=option,
        offered_option=offered if option is not None else None,
    )
    pf = update.get("preflight") or state.get("preflight") or {}
    audit.append(
        audit.AuditEvent(
            event="approval" if rec.decision == "approve" else "rejection",
            thread_id=thread_id,
            service=cfg.service,
            actor=rec.principal,
            approval_id=approval.approval_id,
            what=", ".join(f"{s.kind.value} {s.change}" for s in shown_plan.steps),
            diff=pf.get("diff", ""),
            at=approval.at,
            details={
                "reason": rec.reason,
                "note": rec.note,
                "policy": cfg.policy.value,
                "apply_key": approved_key,
                "option": option,
            },
        ),
        state_dir=cfg.state_path,
    )
    msg = f"{rec.verb()} by {rec.who}" + (f" ({rec.reason})" if rec.reason else "")
    if option is not None:
        from graph.preflight import plan_text

        msg += f"; option {option} chosen instead of option {offered}: {plan_text(shown_plan)}"
    return {**update, "approval": approval.model_dump(mode="json"), "timeline": event("approve", msg)}


def choose_option(state: SREState, cfg: Configuration, option: int) -> dict[str, Any] | None:
    """The state update that makes ranked option ``option`` (1-based) the plan: the plan, its
    preflight (spec, diff) and the alternatives, by the one selection rule (``choose_plan``).
    None when it does not pass preflight. Pure."""
    from graph.preflight import choose_plan
    from mcp_tools.errors import UserError
    from mcp_tools.incident import ServiceSpec

    options = [RemediationPlan.model_validate(o) for o in state.get("options") or []]
    raw_spec = (state.get("observation") or {}).get("service")
    spec = ServiceSpec.model_validate(raw_spec) if raw_spec is not None else None
    try:
        choice = choose_plan(options, spec, policy=cfg.policy, pick=option)
    except UserError:
        return None
    result = PreflightResult(
        ok=choice.plan.preflight.ok,
        notes=list(choice.plan.preflight.notes),
        diff=choice.diff,
        new_spec=choice.new_spec.model_dump(mode="json") if choice.new_spec is not None else None,
        mutates=choice.plan.mutates,
        option=choice.rank,
    )
    return {
        "plan": choice.plan.model_dump(mode="json"),
        "alternatives": [a.model_dump(mode="json") for a in choice.alternatives],
        "preflight": result.model_dump(mode="json"),
    }


def _standing_option(
    state: SREState, cfg: Configuration, thread_id: str, rec: DecisionRecord
) -> tuple[dict[str, Any], int | None]:
    """The update and option of the recorded decision (its approval id names the plan it is for)."""
    offered = (state.get("preflight") or {}).get("option")
    for i, raw in enumerate(state.get("ranked") or [], start=1):
        if i == offered:
            continue
        p = RemediationPlan.model_validate(raw)
        if approval_id_for(thread_id, apply_key(thread_id, p)) == rec.approval_id:
            chosen = choose_option(state, cfg, i)
            if chosen is not None:
                return chosen, i
    return {}, None
