"""engine_hung: the server answers /health but makes no progress: a fresh revision."""

from __future__ import annotations

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import K, plan
from graph.remedies.planner import Capacity
from mcp_tools.remediation import PlanStep, RemediationPlan


def restart(why: str) -> RemediationPlan:
    return plan(PlanStep(kind=K.RESTART, change={}, why=why))


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    return [restart("the engine is stuck (requests wait, no tokens are generated): start a fresh revision")]
