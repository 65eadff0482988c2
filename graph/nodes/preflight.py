"""preflight: each option checked once, in rank order (``graph.preflight.choose_plan``): the new
revision spec and its diff, flags validated, the planner's fit, GPU/dtype, Cloud Run limits, policy.

The first option that passes is the plan; a plan that fails is not offered for approval as it stands:
the loop goes to the report.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from graph.config import Configuration
from graph.policy import degraded_observation
from graph.state import PreflightResult, SREState, event
from mcp_tools.incident import ServiceSpec
from mcp_tools.remediation import RemediationPlan
from mcp_tools.settings import Policy


def preflight_node(state: SREState, config: RunnableConfig) -> dict[str, Any]:
    from graph.preflight import choose_plan

    cfg = Configuration.from_runnable_config(config)
    options = [RemediationPlan.model_validate(o) for o in state.get("options") or []]
    raw_spec = (state.get("observation") or {}).get("service")
    spec = ServiceSpec.model_validate(raw_spec) if raw_spec is not None else None
    choice = choose_plan(options, spec, policy=cfg.policy)
    plan = choice.plan
    result = PreflightResult(
        ok=plan.preflight.ok,
        notes=list(plan.preflight.notes),
        diff=choice.diff,
        new_spec=choice.new_spec.model_dump(mode="json") if choice.new_spec is not None else None,
        mutates=plan.mutates,
    )
    blocked = degraded_observation(state) if cfg.policy is Policy.AUTO and result.mutates else None
    if blocked:
        result.notes.append(blocked)  # it becomes an approval request (graph.policy.auto_allowed)
    verdict = "accepted" if result.ok else "refused"
    kinds = ", ".join(f"{s.kind.value} {s.change}" for s in plan.steps) or "none"
    msg = f"plan {verdict}: {kinds}" + (f"; {'; '.join(result.notes)}" if result.notes else "")
    return {
        "plan": plan.model_dump(mode="json"),
        "alternatives": [a.model_dump(mode="json") for a in choice.alternatives],
        "preflight": result.model_dump(mode="json"),
        "timeline": event("preflight", msg),
    }
