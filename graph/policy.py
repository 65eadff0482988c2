"""Policy: which way the loop goes after each decision point, and the keys that make apply idempotent.

The tool layer decides what mutates (``mcp_tools.remediation.MUTATING_KINDS``), never a model. The
routes below are the only paths to ``apply``: through ``approve`` (a recorded human decision, or the
``auto`` policy for kinds the user listed as safe), and never under ``read-only`` or ``suggest``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig

from graph.config import Configuration
from graph.state import SREState
from mcp_tools.remediation import RemediationPlan
from mcp_tools.settings import Policy

#: The environment variable a revision applied by gemma-sre carries: the apply key of its plan.
#: Cloud Run keeps it in the service template, so a resumed apply sees that it already happened.
APPLY_KEY_ENV = "GEMMA_SRE_APPLY_KEY"


def apply_key(thread_id: str, plan: RemediationPlan) -> str:
    """A deterministic key for applying this plan in this thread (same plan, same thread: same key)."""
    steps = [s.model_dump(mode="json", include={"kind", "change"}) for s in plan.steps]
    raw = json.dumps({"thread": thread_id, "steps": steps}, sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def approval_id_for(thread_id: str, key: str) -> str:
    """The approval id a mutation carries (``x-gemma-sre-approval``): one per plan per thread."""
    return "apr-" + hashlib.sha256(f"{thread_id}|{key}".encode()).hexdigest()[:20]


def mutating_kinds(plan: RemediationPlan) -> list[str]:
    return [s.kind.value for s in plan.steps if s.mutates]


def degraded_observation(state: SREState | dict[str, Any]) -> str | None:
    """Why ``auto`` may not act on this cycle's observation on its own: what it could not read
    (None: it read everything it meant to)."""
    unread = list((state.get("observation_summary") or {}).get("unread") or [])
    if not unread:
        return None
    return (
        "auto policy: not applied without a person, the observation is degraded (not read: "
        + "; ".join(str(u) for u in unread)
        + ")"
    )


def auto_allowed(
    plan: RemediationPlan, cfg: Configuration, state: SREState | dict[str, Any] | None = None
) -> bool:
    """Under ``auto``: every mutating step is of a kind the user listed in GEMMA_SRE_AUTO_KINDS, and
    the cycle's observation (``state``) is not degraded: a blind spot is never acted on unattended."""
    kinds = mutating_kinds(plan)
    if state is not None and degraded_observation(state) is not None:
        return False
    return cfg.policy is Policy.AUTO and bool(kinds) and all(k in cfg.auto_kinds for k in kinds)


# --- routes (conditional edges) --------------------------------------------------------------------


def _plan(state: SREState) -> RemediationPlan:
    return RemediationPlan.model_validate(state.get("plan") or {})


def route_after_diagnose(state: SREState, config: RunnableConfig) -> Literal["propose", "report"]:
    if (state.get("diagnosis") or {}).get("category") == "healthy":
        return "report"
    return "propose"


def route_after_preflight(state: SREState, config: RunnableConfig) -> Literal["approve", "report"]:
    cfg = Configuration.from_runnable_config(config)
    if cfg.policy in (Policy.READ_ONLY, Policy.SUGGEST):
        return "report"
    pf: dict[str, Any] = state.get("preflight") or {}
    if not pf.get("ok") or not _plan(state).mutates:
        return "report"
    return "approve"


def route_after_approve(state: SREState, config: RunnableConfig) -> Literal["apply", "report"]:
    approval = state.get("approval") or {}
    return "apply" if approval.get("decision") == "approve" else "report"


def route_after_verify(state: SREState, config: RunnableConfig) -> Literal["rollback", "report"]:
    v = state.get("verification") or {}
    # Undetermined (the service could not be read): no verdict, so no automatic rollback.
    return "report" if v.get("ok") or v.get("undetermined") else "rollback"
