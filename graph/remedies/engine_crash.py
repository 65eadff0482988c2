"""engine_crash: a fresh revision; eager mode when the crash is a CUDA fault."""

from __future__ import annotations

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import fact
from graph.remedies.engine_hung import restart
from graph.remedies.planner import Capacity, flags_option
from mcp_tools.remediation import RemediationPlan


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    out = [restart("the engine died for a reason its configuration does not explain: start a fresh revision")]
    if fact(diag, "cuda_fault"):
        out.append(
            flags_option(
                cap, {"--enforce-eager": True}, "CUDA faults often come from graph capture: run eagerly"
            )
        )
    return out
