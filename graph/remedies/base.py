"""What every remedy shares: the remedy signature, plan builders, and the diagnosis's facts."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcp_tools.remediation import PlanStep, RemediationKind, RemediationPlan

if TYPE_CHECKING:
    from graph.diagnosis import Diagnosis
    from graph.observation import Observation
    from graph.remedies.planner import Capacity

K = RemediationKind

#: ``remedy(diagnosis, observation, capacity) -> candidate plans, best first``.
Remedy = Callable[["Diagnosis", "Observation", "Capacity"], list[RemediationPlan]]


def plan(*steps: PlanStep) -> RemediationPlan:
    return RemediationPlan(steps=list(steps))


def escalate(action: str, why: str, **details: Any) -> RemediationPlan:
    """A plan asking a person to act: exactly what to do, and why."""
    change: dict[str, Any] = {"human_action": action}
    change.update({k: v for k, v in details.items() if v is not None})
    return plan(PlanStep(kind=K.ESCALATE, change=change, why=why))


def distinct_plans(plans: list[RemediationPlan]) -> list[RemediationPlan]:
    """``plans`` without the ones whose steps repeat an earlier plan's changes, in order."""
    seen: set[str] = set()
    out = []
    for p in plans:
        key = repr([(s.kind, sorted(s.change.items(), key=str)) for s in p.steps])
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def fact(diag: Diagnosis, key: str) -> Any:
    """A fact the analyzers extracted for the diagnosed category (None when absent)."""
    for f in diag.findings:
        if f.category == diag.category and key in f.facts:
            return f.facts[key]
    return None
