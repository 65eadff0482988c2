"""The loop's state: what one cycle has seen, decided and done.

The graph's channels hold plain JSON values (so a checkpoint written by one process resumes in
another, with any serializer and across versions); the pydantic models here give each part its type,
and nodes read and write through them (``Approval.model_validate(state["approval"])``).
"""

from __future__ import annotations

import operator
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from graph.approval_request import APPROVAL_QUESTION as APPROVAL_QUESTION
from graph.approval_request import ApprovalRequest as ApprovalRequest
from graph.approval_request import OptionView as OptionView


class _Model(BaseModel):
    """Built on first use: most of the loop's models are used by a run, not at import (a command that
    only imports this module, or the MCP server's start, does not build them)."""

    model_config = ConfigDict(defer_build=True)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TimelineEvent(_Model):
    at: str = Field(default_factory=now_iso)
    node: str
    message: str


class ObservationSummary(_Model):
    """What observe saw, in a few fields, and what it could not read (a degraded observation)."""

    service: str
    source: str = "cloud-run"
    uri: str | None = None
    latest_ready_revision: str | None = None
    latest_created_revision: str | None = None
    conditions: list[dict[str, Any]] = Field(default_factory=list)
    log_lines: int = 0
    logs_truncated: bool = False
    since: str | None = None
    until: str | None = None
    health: bool | None = None
    metrics_read: bool = False
    series_read: bool = False  # Cloud Monitoring's series were read
    series_points: int = 0
    unread: list[str] = Field(default_factory=list)  # "logs: 503 after 3 attempts", ...
    spec_etag: str | None = None  # the service's etag when observed: apply refuses a service changed since
    # The same, typed (graph.observation.Unread as JSON): source, reason, why, seconds.
    blind: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def degraded(self) -> bool:
        return bool(self.unread)


class PreflightResult(_Model):
    ok: bool
    notes: list[str] = Field(default_factory=list)
    diff: str = ""
    new_spec: dict[str, Any] | None = None
    mutates: bool = False
    option: int | None = None  # the plan's 1-based rank among the options (None: not one of them)


Decision = Literal["approve", "reject"]


class Approval(_Model):
    decision: Decision
    approver: str  # the authenticated identity (OS user, MCP token principal, policy:auto)
    at: str = Field(default_factory=now_iso)
    reason: str | None = None
    approval_id: str
    policy: str = "approve"
    note: str | None = None  # a name the person typed (--approver), beside the identity
    claim: str | None = None  # the recorded decision's claim (graph.checkpoint.Decisions)
    plan_key: str | None = None  # the decision's key: the plan that was offered (one decision each)
    option: int | None = None  # the option approved, when a person chose another than the offered one
    offered_option: int | None = None  # then: the option that was offered (the first that passed)


class Latency(_Model):
    """One short benchmark's figures (milliseconds), as the canary judges a URL by them."""

    url: str  # "service" (what users reach) or "canary" (the fix's tag URL)
    requests: int = 0
    ok: int = 0
    errors: int = 0  # 5xx, 429, timeouts, dropped connections
    ttft_p50_ms: float | None = None
    ttft_p95_ms: float | None = None
    itl_p50_ms: float | None = None  # inter-token latency: each request's time per token after the first
    itl_p95_ms: float | None = None
    at: str = Field(default_factory=now_iso)
    error: str | None = None  # the benchmark itself could not run

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0


class CanaryStep(_Model):
    """One traffic step: the share the fix had, and what was measured while it had it."""

    percent: int
    service: Latency | None = None  # users' view at this share
    canary: Latency | None = None  # the fix's own URL at this share
    breaches: list[str] = Field(default_factory=list)  # empty: the step passed
    resumed: bool = False  # the traffic was already at this share (a resumed run): not sent again
    at: str = Field(default_factory=now_iso)


class Canary(_Model):
    """A fix deployed with no traffic, checked on its tag's URL, then given traffic in steps."""

    revision: str
    tag: str
    url: str | None = None  # the tag's URL
    baseline_revision: str | None = None  # the revision that served before: rollback's target
    kv_cache_tokens: int | None = None  # vLLM's own "GPU KV cache size: N tokens" line of the revision
    kv_predicted: list[int] | None = None  # the planner's kv_cache_tokens_range for the revision's spec
    kv_ok: bool | None = None  # None: not checked (see kv_note)
    kv_note: str | None = None
    baseline: Latency | None = None  # the serving revision before the change (measured by apply)
    before: Latency | None = None  # the fix's tag URL with no traffic yet
    steps: list[CanaryStep] = Field(default_factory=list)
    promoted: bool = False  # the fix has all traffic
    breached_at: int | None = None  # the share at which a breach sent traffic back
    chart: str | None = None  # the PNG of these figures, when one was asked for


class ApplyResult(_Model):
    key: str
    revision: str | None = None
    already_applied: bool = False  # the service already carried this plan's key: nothing was sent
    error: str | None = None
    at: str = Field(default_factory=now_iso)
    previous_ready_revision: str | None = None
    # A canary: the revision was deployed with no traffic under ``tag``; ``previous_ready_revision``
    # is the revision that served (and still does), ``baseline`` its figures before the change.
    canary: bool = False
    tag: str | None = None
    baseline: Latency | None = None


class Verification(_Model):
    ok: bool
    revision: str | None = None
    ready: bool | None = None
    health: bool | None = None
    smoke: bool | None = None
    progress: bool | None = None  # tokens generated after the fix (checked for a hung engine)
    reasons: list[str] = Field(default_factory=list)
    seconds: float = 0.0
    canary: Canary | None = None  # how the fix was given traffic (None: it took all of it once Ready)
    # The service could not be read by the deadline (a change made before this run): no verdict, no
    # rollback; the report hands it to a person.
    undetermined: bool = False


class RollbackResult(_Model):
    attempted: bool
    ok: bool = False
    to_revision: str | None = None
    reason: str = ""
    error: str | None = None


OutcomeStatus = Literal[
    "healthy",  # nothing wrong, nothing to do
    "diagnosed",  # read-only: diagnosis only
    "suggested",  # suggest policy: a plan, never applied
    "no_action",  # no applicable plan (escalation, or preflight refused it)
    "awaiting_approval",
    "rejected",
    "fixed",  # applied and verified
    "rolled_back",  # applied, verification failed, traffic back on the last good revision
    "failed",  # applied, verification failed, and no rollback was possible
    "undetermined",  # applied, the service could not be read to verify it: not rolled back, for a person
]


class Outcome(_Model):
    status: OutcomeStatus
    summary: str


class RunMeta(_Model):
    """The serializable configuration of a thread, kept in the state so another process can resume it."""

    thread_id: str
    started_at: str = Field(default_factory=now_iso)
    config: dict[str, Any] = Field(default_factory=dict)


class SREState(TypedDict, total=False):
    meta: dict[str, Any]  # RunMeta
    cycle: int
    since: str | None  # logs are read from here (the end of the previous cycle's window)
    observation: dict[str, Any]  # graph.observation.Observation, as JSON
    observation_summary: dict[str, Any]  # ObservationSummary
    diagnosis: dict[str, Any]  # graph.diagnosis.Diagnosis, as JSON (with the analyzers' findings)
    options: list[dict[str, Any]]  # propose's candidate RemediationPlans, best first
    plan: dict[str, Any]  # mcp_tools.remediation.RemediationPlan: the option preflight chose
    alternatives: list[dict[str, Any]]  # the other options, as preflight checked them
    ranked: list[dict[str, Any]]  # every option as preflight checked them, in rank order
    preflight: dict[str, Any]  # PreflightResult
    approval: dict[str, Any] | None  # Approval
    applied: dict[str, Any] | None  # ApplyResult
    verification: dict[str, Any] | None  # Verification
    rollback: dict[str, Any] | None  # RollbackResult
    outcome: dict[str, Any]  # Outcome
    report: dict[str, str]  # {"markdown": path, "json": path}
    timeline: Annotated[list[dict[str, Any]], operator.add]


def event(node: str, message: str) -> list[dict[str, Any]]:
    """A one-entry timeline update (the channel appends)."""
    return [TimelineEvent(node=node, message=message).model_dump()]
