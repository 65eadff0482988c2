"""The loop's middle as one function, for the faces that run no graph: observe (from an incident file,
or an observation given) -> diagnose -> propose -> preflight, chaining the same step functions the
graph's nodes call (``graph.diagnosis.diagnose``, ``graph.propose.propose_options``,
``graph.preflight.choose_plan``). ``gemma-sre diagnose``, the evals' replay and the MCP agent tools use
it; nothing applies here.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from graph.diagnosis import Diagnosis, ModelEndpoint, diagnose
from graph.observation import Observation
from graph.preflight import choose_plan
from graph.propose import propose_options
from mcp_tools.incident import Incident
from mcp_tools.remediation import RemediationPlan


class Assessment(Diagnosis):
    """A diagnosis with its checked plan: the SPEC.md section 4 ``diagnose --json`` document."""

    plan: RemediationPlan = Field(default_factory=RemediationPlan)
    alternatives: list[RemediationPlan] = Field(default_factory=list)  # other ranked plans, checked
    diff: str = ""  # the spec diff of the plan, when the observation has a spec

    def to_spec_json(self) -> dict[str, Any]:
        """The SPEC section 4 document (steps carry ``predicted`` when the planner computed one)."""
        steps = []
        for s in self.plan.steps:
            d: dict[str, Any] = {"kind": s.kind.value, "change": s.change, "why": s.why}
            if s.predicted is not None:
                d["predicted"] = s.predicted
            steps.append(d)
        return {
            "id": self.id,
            "category": self.category,
            "confidence": round(self.confidence, 2),
            "summary": self.summary,
            "evidence": [e.model_dump() for e in self.evidence],
            "plan": {"steps": steps, "preflight": self.plan.preflight.model_dump()},
            "prompt_tokens": self.prompt_tokens,
            "model_used": self.model_used,
            "notes": self.notes,
        }


def assess(
    obs: Observation,
    *,
    model: ModelEndpoint | str | Any = None,
    tools: list[Any] | None = None,
    max_steps: int = 4,
    policy: Any = None,
) -> Assessment:
    """diagnose -> propose -> preflight on one observation (``policy``: what preflight checks against,
    default: settings; the other arguments are ``graph.diagnosis.diagnose``'s)."""
    diag = diagnose(obs, model=model, tools=tools, max_steps=max_steps)
    choice = choose_plan(propose_options(diag, obs), obs.service, policy=policy)
    return Assessment(**dict(diag), plan=choice.plan, alternatives=choice.alternatives, diff=choice.diff)


def assess_incident(incident: Incident, **kwargs: Any) -> Assessment:
    """``assess`` (same keyword arguments) on the observation an incident file records."""
    return assess(Observation.from_incident(incident), **kwargs)


__all__ = ["Assessment", "assess", "assess_incident"]
