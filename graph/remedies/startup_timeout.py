"""startup_timeout: a startup probe that allows the start-up, within Cloud Run's probe limits."""

from __future__ import annotations

import math

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import K, escalate, plan
from graph.remedies.planner import Capacity
from mcp_tools.cloudrun_limits import PROBE_MAX_DELAY_S, PROBE_MAX_PERIOD_S, probe_max_window_s
from mcp_tools.incident import StartupProbe
from mcp_tools.remediation import PlanStep, RemediationPlan


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    probe = (obs.service.startup_probe if obs.service else None) or StartupProbe()
    budget = probe.budget_seconds
    max_window = probe_max_window_s(bool(obs.service and obs.service.gpu_type))
    period = PROBE_MAX_PERIOD_S
    max_threshold = max(1, max_window // period)
    target = max(2 * budget, 900)
    initial = min(PROBE_MAX_DELAY_S, probe.initial_delay_seconds)
    threshold = max(1, math.ceil((target - initial) / period))
    if threshold > max_threshold:  # the window is at its limit: the initial delay adds the rest
        threshold = max_threshold
        initial = min(PROBE_MAX_DELAY_S, max(initial, target - period * threshold))
    new_budget = initial + period * threshold
    if new_budget <= budget:
        return [
            escalate(
                f"vLLM needs more than the {budget} s Cloud Run's startup probe can allow: make loading "
                "faster (a smaller or quantized checkpoint, weights on a Cloud Storage volume with "
                "streaming, or baked into the image), or keep an instance warm with min_instances=1.",
                "the start-up is longer than the longest startup probe",
            )
        ]
    return [
        plan(
            PlanStep(
                kind=K.SET_PROBE,
                change={
                    "initial_delay_seconds": initial,
                    "period_seconds": period,
                    "timeout_seconds": period,
                    "failure_threshold": threshold,
                },
                why=f"vLLM was still loading when the startup probe gave up after {budget} s; "
                f"allow {new_budget} s",
                predicted={"startup_budget_seconds": new_budget},
            )
        )
    ]
