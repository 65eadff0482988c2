"""propose: the candidate plans for the diagnosis, best first (``graph.propose.propose_options``).

Nothing free-form exists to be executed: each option is typed steps (SPEC.md section 2). Which option
is offered is preflight's decision (the first that passes).
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from graph.state import SREState, event


def propose(state: SREState, config: RunnableConfig) -> dict[str, Any]:
    from graph.diagnosis import Diagnosis
    from graph.observation import Observation
    from graph.propose import propose_options

    diagnosis = Diagnosis.model_validate(state["diagnosis"])
    options = propose_options(diagnosis, Observation.model_validate(state["observation"]))
    from graph.preflight import plan_text

    if not options:
        msg = "no option"
    else:
        ranked = "; ".join(f"{i}. {plan_text(o)}" for i, o in enumerate(options, start=1))
        msg = f"{len(options)} option(s), ranked (preflight offers the first that passes): {ranked}"
    return {"options": [o.model_dump(mode="json") for o in options], "timeline": event("propose", msg)}
