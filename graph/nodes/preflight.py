"""preflight: the new revision spec and its diff, flags validated, the planner's fit, GPU/dtype, policy.

A plan that fails preflight is not offered for approval as it stands: the loop goes to the report.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from graph.config import Configuration
from graph.state import PreflightResult, SREState, event
from mcp_tools.incident import ServiceSpec
from mcp_tools.remediation import RemediationPlan


def preflight_node(state: SREState, config: RunnableConfig) -> dict[str, Any]:
    from graph.preflight import preflight

    cfg = Configuration.from_runnable_config(config)
    plan = RemediationPlan.model_validate(state.get("plan") or {})
    raw_spec = (state.get("observation") or {}).get("service")
    if raw_spec is None:
        result = PreflightResult(
            ok=False, notes=["the current service spec could not be read, so no change can be rendered"]
        )
        return {"preflight": result.model_dump(mode="json"), "timeline": event("preflight", result.notes[0])}
    spec = ServiceSpec.model_validate(raw_spec)
    checked, new_spec, diff = preflight(plan, spec, policy=cfg.policy)
    # The diagnosis may have preflighted this plan already: keep each note once.
    checked.preflight.notes = list(dict.fromkeys(checked.preflight.notes))
    result = PreflightResult(
        ok=checked.preflight.ok,
        notes=list(checked.preflight.notes),
        diff=diff or "",
        new_spec=new_spec.model_dump(mode="json") if new_spec is not None else None,
        mutates=checked.mutates,
    )
    verdict = "accepted" if result.ok else "refused"
    msg = f"plan {verdict}" + (f": {'; '.join(result.notes)}" if result.notes else "")
    return {
        "plan": checked.model_dump(mode="json"),
        "preflight": result.model_dump(mode="json"),
        "timeline": event("preflight", msg),
    }
