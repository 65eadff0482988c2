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

    def describe(self) -> str:
        """The step in words, as a person reads it: ``set_vllm_args --quantization=fp8`` (never a repr)."""
        return " ".join([self.kind.value, *(change_words(k, v) for k, v in self.change.items())])


def change_words(key: str, value: Any) -> str:
    """One key of a step's change in words: ``--quantization=fp8``, ``--enforce-eager``, ``model=X``."""
    if isinstance(value, bool):
        if key.startswith("--"):
            return key if value else f"no {key}"
        return f"{key}={'yes' if value else 'no'}"
    if value is None:
        return f"{key}=(removed)"
    if isinstance(value, dict):
        inner = " ".join(change_words(str(k), v) for k, v in value.items())
        return f"{key}: {inner}" if inner else f"{key}: none"
    if isinstance(value, list | tuple):
        return f"{key}=" + ",".join(str(v) for v in value)
    return f"{key}={value}"


class Preflight(BaseModel):
    ok: bool = True
    notes: list[str] = Field(default_factory=list)


class RemediationPlan(BaseModel):
    steps: list[PlanStep] = Field(default_factory=list)
    preflight: Preflight = Field(default_factory=Preflight)

    @property
    def mutates(self) -> bool:
        return any(s.mutates for s in self.steps)
