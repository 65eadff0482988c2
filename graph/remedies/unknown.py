"""unknown (and any category without a remedy of its own): a person reads the cited lines."""

from __future__ import annotations

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import escalate
from graph.remedies.planner import Capacity
from mcp_tools.remediation import RemediationPlan


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    return [
        escalate(
            "A person must read the cited lines: the evidence matches no known failure family.",
            diag.summary[:200],
        )
    ]
