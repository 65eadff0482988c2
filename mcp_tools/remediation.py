"""Typed remediation steps (SPEC.md section 2). Free-form commands do not exist here."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field


class RemediationKind(StrEnum):
    SET_VLLM_ARGS = "set_vllm_args"
    SET_MODEL = "set_model"
    SET_RESOURCES = "set_resources"
    SET_SCALING = "set_scaling"
    SET_PROBE = "set_probe"
    ROLLBACK = "rollback"
    RESTART = "restart"
    ESCALATE = "escalate"


#: Which kinds change the service. The tool layer decides this, never a model's own flag.
MUTATING_KINDS: frozenset[RemediationKind] = frozenset(
    k for k in RemediationKind if k != RemediationKind.ESCALATE
)


class PlanStep(BaseModel):
    kind: RemediationKind
    change: dict[str, Any] = Field(default_factory=dict)
    why: str = ""
    predicted: dict[str, Any] | None = None  # e.g. the planner's figures for the changed spec

    @property
    def mutates(self) -> bool:
        return self.kind in MUTATING_KINDS


class Preflight(BaseModel):
    ok: bool = True
    notes: list[str] = Field(default_factory=list)


class RemediationPlan(BaseModel):
    steps: list[PlanStep] = Field(default_factory=list)
    preflight: Preflight = Field(default_factory=Preflight)

    @property
    def mutates(self) -> bool:
        return any(s.mutates for s in self.steps)
