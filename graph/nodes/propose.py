"""propose: the typed plan for the diagnosis. Nothing free-form exists to be executed.

The diagnosis already ranked the candidate plans (the capacity planner orders memory fixes by
predicted effect) and kept the first that preflight accepts; the others are its alternatives. When
it carries no plan, ``graph.propose.propose_plan`` ranks them here.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from graph.state import SREState, event
from mcp_tools.remediation import RemediationPlan


def propose(state: SREState, config: RunnableConfig) -> dict[str, Any]:
    from graph.diagnosis import Diagnosis
    from graph.observation import Observation
    from graph.propose import propose_plan

    diagnosis = Diagnosis.model_validate(state["diagnosis"])
    plan: RemediationPlan = diagnosis.plan
    if not plan.steps:
        plan = propose_plan(diagnosis, Observation.model_validate(state["observation"]))
    kinds = ", ".join(f"{s.kind.value} {s.change}" for s in plan.steps) or "none"
    alts = len(diagnosis.alternatives)
    msg = f"plan: {kinds}" + (
        f" ({alts} alternative{'s' if alts != 1 else ''} ranked below it)" if alts else ""
    )
    return {"plan": plan.model_dump(mode="json"), "timeline": event("propose", msg)}
