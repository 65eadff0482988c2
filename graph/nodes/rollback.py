"""rollback: traffic back to the last good revision after a failed verification.

For a canary that is the revision that served before the change (100%, the canary's tag dropped),
whatever share the canary had reached when a step breached.

It carries the same approval id as the change it undoes (the person approved a change that is
verified or undone), is audited, and is naturally idempotent (it routes traffic to a named revision).
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from graph import audit
from graph.config import Configuration
from graph.nodes.approve import thread_id_of
from graph.state import ApplyResult, Approval, RollbackResult, SREState, Verification, event
from graph.world import World
from mcp_tools.errors import short_error


def _last_good(world: World, name: str, applied: ApplyResult) -> str | None:
    if applied.previous_ready_revision and applied.previous_ready_revision != applied.revision:
        return applied.previous_ready_revision
    for r in world.list_revisions(name):  # newest first
        if r.ready and r.name != applied.revision:
            return str(r.name)
    return None


def rollback(state: SREState, config: RunnableConfig) -> dict[str, Any]:
    cfg = Configuration.from_runnable_config(config)
    world = World(cfg)
    name = cfg.service
    applied = ApplyResult.model_validate(state.get("applied") or {"key": ""})
    approval = Approval.model_validate(state["approval"])
    v = Verification.model_validate(state.get("verification") or {"ok": False})
    reason = "; ".join(v.reasons) or "verification failed"
    thread_id = thread_id_of(config)

    try:
        target = _last_good(world, name, applied)
    except Exception as e:
        result = RollbackResult(
            attempted=False, reason=reason, error=f"could not list revisions: {short_error(e)}"
        )
        return _done(result)
    if target is None:
        result = RollbackResult(
            attempted=False,
            reason=reason,
            error="no earlier Ready revision to return to: a person must act",
        )
        return _done(result)

    result = RollbackResult(attempted=True, to_revision=target, reason=reason)
    try:
        res = world.rollback(name, target, approval_id=approval.approval_id, deadline_s=cfg.verify_deadline_s)
        result.ok = bool(res.ready)
        if not res.ready:
            result.error = res.message
    except Exception as e:
        result.error = short_error(e)
    audit.append(
        audit.AuditEvent(
            event="rollback" if result.ok else "rollback_failed",
            thread_id=thread_id,
            service=name,
            actor="gemma-sre",
            approval_id=approval.approval_id,
            what=f"traffic to {target}: {reason}",
            revision=target,
            details={"error": result.error, "from_revision": applied.revision},
        ),
        state_dir=cfg.state_path,
    )
    return _done(result)


def _done(result: RollbackResult) -> dict[str, Any]:
    if result.ok:
        msg = f"rolled back: traffic on {result.to_revision} ({result.reason})"
    elif result.attempted:
        msg = f"rollback to {result.to_revision} failed: {result.error}"
    else:
        msg = f"no rollback: {result.error}"
    return {"rollback": result.model_dump(mode="json"), "timeline": event("rollback", msg)}
