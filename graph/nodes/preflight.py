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


def preflight_line(choice: Any, result: PreflightResult) -> str:
    """The step's line: which option is the plan, and why the better-ranked ones are not."""
    from graph.preflight import plan_text, why_not

    verdict = "accepted" if result.ok else "refused"
    n = len(choice.ranked)
    which = f"option {choice.rank} of {n}: " if choice.rank is not None and n > 1 else ""
    msg = f"plan {verdict}: {which}{plan_text(choice.plan)}"
    if result.notes:
        msg += f"; {'; '.join(result.notes)}"
    above = choice.ranked[: (choice.rank or n + 1) - 1]
    for i, opt in enumerate(above, start=1):
        msg += f"; option {i} ({plan_text(opt)}) fails preflight: {'; '.join(why_not(opt)) or 'no reason'}"
    return msg


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
        option=choice.rank,
    )
    blocked = degraded_observation(state) if cfg.policy is Policy.AUTO and result.mutates else None
    if blocked:
        result.notes.append(blocked)  # it becomes an approval request (graph.policy.auto_allowed)
    msg = preflight_line(choice, result)
    return {
        "plan": plan.model_dump(mode="json"),
        "alternatives": [a.model_dump(mode="json") for a in choice.alternatives],
        "ranked": [r.model_dump(mode="json") for r in choice.ranked],
        "preflight": result.model_dump(mode="json"),
        "timeline": event("preflight", msg),
    }
