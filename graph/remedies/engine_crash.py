"""engine_crash: a fresh revision; eager mode when the crash is a CUDA fault."""

from __future__ import annotations

import re

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import evidence_text
from graph.remedies.engine_hung import restart
from graph.remedies.planner import Capacity, flags_option
from mcp_tools.remediation import RemediationPlan


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    out = [restart("the engine died for a reason its configuration does not explain: start a fresh revision")]
    if re.search(r"illegal memory access|CUDA error|cudaError", evidence_text(diag)):
        out.append(
            flags_option(
                cap, {"--enforce-eager": True}, "CUDA faults often come from graph capture: run eagerly"
            )
        )
    return out
