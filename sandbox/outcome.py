"""What the physics decides about a revision when it is created (shared by the model and physics)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class LogLine:
    offset_s: float  # simulated seconds after the revision was created
    log_id: str  # e.g. run.googleapis.com/stdout
    severity: str
    text: str | None = None
    json_payload: dict[str, Any] | None = None


@dataclass
class StartupOutcome:
    ready: bool
    duration_s: float  # simulated seconds from creation until Ready (or failure)
    logs: list[LogLine] = field(default_factory=list)
    failure_message: str | None = None  # the revision's Ready condition message when it fails
    failure_reason: str = "HEALTH_CHECK_CONTAINER_ERROR"  # Condition.RevisionReason
    category: str | None = None  # the SPEC failure category the sandbox meant (not on the wire)
    sim_config: Any = None  # sandbox.vllm_sim.config.SimConfig for a ready revision
    notes: dict[str, Any] = field(default_factory=dict)  # figures behind the decision (debugging)


@dataclass
class RevisionContext:
    project: str
    location: str
    service: str
    revision: str
    template: dict[str, Any]  # the revision template as wire JSON (camelCase)
    time_scale: float = 60.0
    created_s: float = 0.0  # simulated POSIX time the revision was created
    zero_latency: bool = False
