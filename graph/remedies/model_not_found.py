"""model_not_found: the catalog checkpoint a mistyped reference meant, else a person fixes --model."""

from __future__ import annotations

import logging

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import K, escalate, fact, plan
from graph.remedies.catalog import closest_model
from graph.remedies.planner import Capacity, predicted
from mcp_tools.remediation import PlanStep, RemediationPlan
from mcp_tools.spec_ops import get_model

log = logging.getLogger(__name__)


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    model = get_model(obs.service.args) if obs.service else None
    if fact(diag, "corrupt"):
        return [
            escalate(
                f"The checkpoint{f' {model!r}' if model else ''} is there but a weights file in it is cut "
                "short or corrupt (an interrupted download, a full disk): delete that copy (its Hugging Face "
                "cache or bucket files) and fetch it again, then redeploy.",
                "a weights file of the checkpoint cannot be read",
            )
        ]
    fix = closest_model(model or "")
    fixes = [_fixed_model_plan(cap, model, fix)] if fix and fix != model else []
    return fixes + [
        escalate(
            f"The model path or repo id{f' {model!r}' if model else ''} does not exist where the service "
            "looks: fix --model (typo, missing config.json, wrong bucket path) or upload the weights.",
            "the weights / config were not found",
        )
    ]


def _fixed_model_plan(cap: Capacity, model: str | None, fix: str) -> RemediationPlan:
    """set_model to the checkpoint meant; when the planner says it would not fit as configured, the
    planner's best fitting flag change goes with it (or its best fitting checkpoint instead)."""
    step = PlanStep(
        kind=K.SET_MODEL,
        change={"model": fix},
        why=f"{model!r} was not found; {fix!r} is the known checkpoint it most likely means",
    )
    if cap.flags is None or cap.spec is None or not cap.spec.gpu_type:
        return plan(step)
    try:
        from mcp_tools.capacity import plan_capacity

        p = plan_capacity(fix, gpu=cap.spec.gpu_type, gpu_count=cap.spec.gpu_count, flags=cap.flags)
    except Exception as e:  # noqa: BLE001
        log.debug("no plan for %s: %s", fix, e)
        return plan(step)
    step.predicted = predicted(p)
    if p.fits:
        return plan(step)
    for s in p.suggestions:  # a flag change keeps the checkpoint the service already has
        if s.fits and s.kind == "set_vllm_args":
            return plan(
                step,
                PlanStep(kind=K.SET_VLLM_ARGS, change=dict(s.change), why=s.summary, predicted=predicted(s)),
            )
    for s in p.suggestions:
        if s.fits and s.kind == "set_model":
            return plan(
                PlanStep(
                    kind=K.SET_MODEL,
                    change=dict(s.change),
                    why=f"{model!r} was not found and {fix!r} would not fit as configured: {s.summary}",
                    predicted=predicted(s),
                )
            )
    return plan(step)
