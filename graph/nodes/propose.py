"""propose: a typed plan for the diagnosis (the planner ranks memory fixes). Nothing free-form."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from graph.state import SREState, event


def propose(state: SREState, config: RunnableConfig) -> dict[str, Any]:
    from graph.diagnosis import Diagnosis
    from graph.observation import Observation
    from graph.propose import propose_plan

    diagnosis = Diagnosis.model_validate(state["diagnosis"])
    obs = Observation.model_validate(state["observation"])
    plan = propose_plan(diagnosis, obs)
    kinds = ", ".join(s.kind.value for s in plan.steps) or "none"
    return {
        "plan": plan.model_dump(mode="json"),
        "timeline": event("propose", f"plan: {kinds}"),
    }
