"""unknown (and any category without a remedy of its own): a person reads the cited lines.

The step's ``why`` is this remedy's own words and the cited line numbers: never the diagnosis
summary, which a model may have written from (hostile) log text.
"""

from __future__ import annotations

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import escalate
from graph.remedies.planner import Capacity
from mcp_tools.remediation import RemediationPlan


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    lines = sorted({e.line for e in diag.evidence if e.line > 0})
    cited = f"cited log lines: {', '.join(map(str, lines[:10]))}" if lines else "no log line was cited"
    return [
        escalate(
            "A person must read the cited lines: the evidence matches no known failure family.",
            f"no known failure family matches the evidence ({cited})",
        )
    ]
