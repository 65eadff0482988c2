"""apply: the approved plan, through the Cloud Run Admin API, exactly once.

Idempotence: the plan's apply key (thread id + plan) goes into the new revision as the environment
variable ``GEMMA_SRE_APPLY_KEY``; Cloud Run keeps it in the service template. Before every attempt
the node reads the service: if the template already carries the key, the change was made (by this
process before a retry, or by one that was killed during apply) and nothing is sent again. So a
process killed between approval and apply, or during apply, resumes and applies exactly once.

The mutation path is closed unless the state holds an approval whose id is in the audit log and
which is the decision recorded for this plan in the checkpoint store (with the same claim: the
resume that won, ``graph.checkpoint.Decisions``), and a
plan is never applied over a service that changed after the plan was made (the approved diff would no
longer be what happens).

A canary: when the service has a Ready revision serving it (and ``Configuration.canary``), the fix is
deployed as a revision named after the apply key, with a tag (its own URL) and NO traffic; traffic stays
on the serving revision, whose figures (a short benchmark of the service URL) are measured first, as
the baseline verify compares the fix with. A service that serves nothing takes the fix directly.

The state holds only redacted specs (no secret at rest). The spec that is sent is the live one, read
from the Cloud Run API just before the change, with the plan's typed steps applied to it: it is used
only when its etag is the one observed and its redacted form is the observed spec, and the change it
makes, redacted, is the approved one.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.runnables import RunnableConfig

from graph import audit
from graph.canary import baseline, carry_on
from graph.checkpoint import AppliedRecord, Decisions, open_ledger
from graph.config import Configuration
from graph.nodes.approve import thread_id_of
from graph.policy import APPLY_KEY_ENV, apply_key, approval_id_for
from graph.state import ApplyResult, Approval, ObservationSummary, SREState, event, now_iso
from graph.world import World
from mcp_tools.errors import UserError, short_error
from mcp_tools.incident import ServiceSpec
from mcp_tools.redact import redact_spec
from mcp_tools.remediation import RemediationKind, RemediationPlan
from mcp_tools.settings import Policy
from mcp_tools.spec_ops import apply_steps, canary_names, render

log = logging.getLogger(__name__)


class NotApproved(RuntimeError):
    """apply was reached without a recorded approval: a bug in the wiring, never a path to a change."""


def _check_approval(
    state: SREState, cfg: Configuration, thread_id: str, plan: RemediationPlan, ledger: Decisions
) -> Approval:
    if cfg.policy in (Policy.READ_ONLY, Policy.SUGGEST):
        raise NotApproved(f"policy {cfg.policy.value} never applies a change")
    raw = state.get("approval")
    if not raw:
        raise NotApproved("no approval in the state")
    approval = Approval.model_validate(raw)
    if approval.decision != "approve":
        raise NotApproved(f"the plan was {approval.decision}ed, not approved")
    if approval.approval_id != approval_id_for(thread_id, apply_key(thread_id, plan)):
        # The approval names the plan it was given for: a plan changed since (state edited, e.g. in
        # LangGraph Studio) is not the plan a person approved.
        raise NotApproved(f"approval {approval.approval_id} was given for another plan than this one")
    if approval.approval_id not in audit.approved_ids(cfg.state_path, ledger=ledger):
        raise NotApproved(f"approval {approval.approval_id} is not in the audit log")
    # The decision is recorded under the plan that was offered; it may approve another option.
    rec = ledger.get(thread_id, approval.plan_key or apply_key(thread_id, plan))
    if rec is None or rec.decision != "approve" or rec.approval_id != approval.approval_id:
        raise NotApproved(f"approval {approval.approval_id} is not the decision recorded for this plan")
    if rec.claim != approval.claim:
        # Approved, but by another resume than this one: only the process that won applies.
        raise NotApproved(f"approval {approval.approval_id} is carried out by another process, not this one")
    return approval


def apply(state: SREState, config: RunnableConfig) -> dict[str, Any]:
    cfg = Configuration.from_runnable_config(config)
    thread_id = thread_id_of(config)
    plan = RemediationPlan.model_validate(state.get("plan") or {})
    key = apply_key(thread_id, plan)
    # The ledger is opened for each read and write, never across a Cloud Run wait (minutes on the real
    # API): on Postgres a connection held that long is a pool slot, and an idle timeout away from an
    # error. Each statement is its own transaction either way, so nothing relies on one connection.
    with open_ledger(cfg.state_path) as ledger:
        approval = _check_approval(state, cfg, thread_id, plan, ledger)
        made = ledger.applied(thread_id, key)
    return _apply(state, cfg, thread_id, plan, key, approval, made)


def _apply(
    state: SREState,
    cfg: Configuration,
    thread_id: str,
    plan: RemediationPlan,
    key: str,
    approval: Approval,
    made: AppliedRecord | None,
) -> dict[str, Any]:
    world = World(cfg)
    name = cfg.service
    summary = ObservationSummary.model_validate(state.get("observation_summary") or {"service": name})
    result = ApplyResult(key=key, previous_ready_revision=summary.latest_ready_revision)
    if made is not None:
        # The ledger says it was made (a process killed after recording it and before its state was
        # checkpointed, a replayed or retried run): never sent again, and carried on from the live
        # service as the run that made it would have (a canary stays a canary, with its baseline).
        result.already_applied, result.revision = True, made.revision
        try:
            info = world.get_service(name)
        except Exception as e:
            why = short_error(e)
            result.error = f"applied before this run; the service could not be read to carry on: {why}"
        else:
            carry_on(result, info, key, cfg)
        return _done(state, cfg, thread_id, approval, plan, result)

    rollback_steps = [s for s in plan.steps if s.kind is RemediationKind.ROLLBACK]
    if rollback_steps:  # a plan that only routes traffic back: naturally idempotent
        target = str(rollback_steps[0].change.get("revision") or summary.latest_ready_revision or "")
        try:
            res = world.rollback(
                name, target, approval_id=approval.approval_id, deadline_s=cfg.verify_deadline_s
            )
            result.revision = res.revision
            if not res.ready:
                result.error = res.message
        except Exception as e:
            result.error = short_error(e)
        return _done(state, cfg, thread_id, approval, plan, result)

    pf = state.get("preflight") or {}
    if not pf.get("new_spec"):
        result.error = "preflight rendered no new spec"
        return _done(state, cfg, thread_id, approval, plan, result)
    approved_spec = ServiceSpec.model_validate(pf["new_spec"])  # redacted, as preflight rendered it
    observed = (state.get("observation") or {}).get("service")
    planned_from = ServiceSpec.model_validate(observed) if observed else None  # redacted

    first = True
    for attempt in range(1, max(1, cfg.retries) + 1):
        try:
            info = world.get_service(name)
        except Exception as e:
            result.error = f"could not read the service before applying: {short_error(e)}"
            break
        if info.spec.env.get(APPLY_KEY_ENV) == key:
            # Already made (by an earlier attempt or an earlier process): never send it twice.
            result.already_applied = first
            result.revision = info.latest_created_revision
            result.error = None  # whether it came up is verify's question
            carry_on(result, info, key, cfg)
            break
        if first and _changed_since(info, planned_from, summary.spec_etag):
            # Someone changed the service after the plan was made: the approved diff is no longer what
            # would happen, and sending the rendered spec would silently undo their change.
            result.error = (
                "the service changed after this plan was made (another deploy?): nothing applied; "
                "run a new cycle to plan against the current spec"
            )
            break
        try:
            new_spec = apply_steps(info.spec, plan.steps)  # the real spec: secrets as Cloud Run has them
        except UserError as e:
            result.error = f"the plan's steps do not apply to the live spec: {e}"
            break
        if render(redact_spec(new_spec)) != render(redact_spec(approved_spec)):
            result.error = "the change would differ from the approved diff: nothing applied"
            break
        new_spec.env = {**new_spec.env, APPLY_KEY_ENV: key}
        serving = _serving(info) if cfg.canary else None
        if serving:
            result.canary = True
            result.previous_ready_revision = serving
            if result.baseline is None:
                result.baseline = baseline(info, cfg)
        elif first and result.previous_ready_revision is None:
            result.previous_ready_revision = info.latest_ready_revision
        first = False
        try:
            if serving:
                revision, result.tag = canary_names(name, key)
                res = world.deploy_tagged(
                    name,
                    new_spec,
                    revision=revision,
                    tag=result.tag,
                    serving=serving,
                    approval_id=approval.approval_id,
                    deadline_s=cfg.verify_deadline_s,
                )
            else:
                res = world.update_service(
                    name, new_spec, approval_id=approval.approval_id, deadline_s=cfg.verify_deadline_s
                )
            result.revision = res.revision
            result.error = None if res.ready else res.message
            break
        except UserError as e:  # refused by the API: retrying cannot help
            result.error = short_error(e)
            break
        except Exception as e:  # transient after the client's retries: re-check the key, then retry
            result.error = short_error(e)
            log.warning("apply attempt %d of %d failed: %s", attempt, cfg.retries, result.error)
    return _done(state, cfg, thread_id, approval, plan, result)


def _serving(info: Any) -> str | None:
    """The Ready revision that serves the service (most of its traffic), if any: a fix to it is a canary."""
    serving = info.serving_revision
    if not serving or info.percent_of(serving) == 0:
        return None
    return serving if any(r.name == serving and r.ready for r in info.revisions) else None


def _changed_since(info: Any, planned_from: ServiceSpec | None, etag: str | None) -> bool:
    """Did the live service change after the observation the plan was made from? By its etag when
    both are known, and always by its spec, compared redacted (the state holds no other form)."""
    if etag and info.etag and info.etag != etag:
        return True
    return planned_from is not None and render(redact_spec(info.spec)) != render(redact_spec(planned_from))


def _done(
    state: SREState,
    cfg: Configuration,
    thread_id: str,
    approval: Approval,
    plan: RemediationPlan,
    result: ApplyResult,
) -> dict[str, Any]:
    if result.already_applied:
        msg = f"already applied before this run (revision {result.revision}); nothing sent again"
        if result.canary:
            msg += f"; a canary (tag {result.tag}) beside {result.previous_ready_revision}"
        if result.error:
            msg += f" ({result.error})"
    elif result.revision and result.canary:
        msg = (
            f"applied: revision {result.revision} with no traffic (tag {result.tag}); "
            f"{result.previous_ready_revision} keeps serving" + (f" ({result.error})" if result.error else "")
        )
    elif result.revision:
        msg = f"applied: revision {result.revision}" + (f" ({result.error})" if result.error else "")
    else:
        msg = f"not applied: {result.error}"

    with open_ledger(cfg.state_path) as ledger:  # opened after every wait, for the records only

        def record(name: audit.AuditKind, what: str, **more: Any) -> None:
            audit.append(
                audit.AuditEvent(
                    event=name,
                    thread_id=thread_id,
                    service=cfg.service,
                    actor="gemma-sre",
                    approval_id=approval.approval_id,
                    what=what,
                    **more,
                ),
                state_dir=cfg.state_path,
                ledger=ledger,
            )

        if result.revision:  # the change is made: recorded before anything else
            ledger.record_applied(
                AppliedRecord(
                    thread_id=thread_id,
                    apply_key=result.key,
                    approval_id=str(approval.approval_id),
                    revision=result.revision,
                    at=now_iso(),
                )
            )
            record(
                "mutation",
                ", ".join(f"{s.kind.value} {s.change}" for s in plan.steps),
                diff=(state.get("preflight") or {}).get("diff", ""),
                revision=result.revision,
                details={"apply_key": result.key, "error": result.error},
            )
        elif not result.already_applied:
            record("mutation_failed", msg)
    return {"applied": result.model_dump(mode="json"), "timeline": event("apply", msg)}
