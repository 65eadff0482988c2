"""blind: an ``unknown`` diagnosis of an observation that could not read the logs.

Nothing is changed on a guess: a person reads, by hand, what the observation could not (the plan
names the service, the time window and the query), and everything else it missed.
"""

from __future__ import annotations

from graph.diagnosis import Diagnosis, read_by_hand
from graph.observation import Observation
from graph.remedies.base import escalate
from graph.remedies.planner import Capacity
from mcp_tools.remediation import RemediationPlan


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    blind = obs.blind_to("logs")
    assert blind is not None
    return [
        escalate(
            f"Read {read_by_hand(obs)}: gemma-sre could not, so it did not diagnose or change anything.",
            "the logs could not be read (" + blind.why[:160] + "); no fix is chosen without them",
            not_read=[u.line for u in obs.unread],
        )
    ]
