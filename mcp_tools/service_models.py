"""A Cloud Run service as our code describes it: its neutral spec (``ServiceSpec``, also what an incident
records) and what the Cloud Run API says of it (``ServiceInfo``, ``RevisionInfo``, a mutation's result).

Only pydantic models: ``gemma-sre mcp`` lists them in its tools' schemas at start, without importing the
Cloud Run client (``mcp_tools.cloudrun``) or the incident file reader (``mcp_tools.incident``), which
re-export them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class StartupProbe(_Lenient):
    """Cloud Run's startup probe (TCP on the container port unless ``http_path`` is set)."""

    initial_delay_seconds: int = 0
    period_seconds: int = 240
    timeout_seconds: int = 240
    failure_threshold: int = 1
    http_path: str | None = None

    @property
    def budget_seconds(self) -> int:
        """How long a container may take to start before the probe gives up."""
        return self.initial_delay_seconds + self.period_seconds * self.failure_threshold


class ServiceSpec(_Lenient):
    """The neutral description of a vLLM service on Cloud Run (also what an incident records)."""

    name: str = "vllm"
    region: str | None = None
    gpu_type: str | None = None
    gpu_count: int = Field(default=1, ge=0, le=16)
    cpu: float | int | str | None = None
    memory: str | None = None
    image: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    min_instances: int = Field(default=0, ge=0)
    max_instances: int | None = Field(default=None, ge=0)
    concurrency: int | None = Field(default=None, ge=0)
    startup_probe: StartupProbe | None = None
    gpu_zonal_redundancy: bool | None = None


# --- what the API says of a service --------------------------------------------------------------


class ConditionInfo(BaseModel):
    type: str
    state: str
    message: str = ""
    reason: str = ""
    severity: str = ""
    last_transition_time: str | None = None

    @property
    def failed(self) -> bool:
        """It failed and says why: a condition worth showing as a failure."""
        return self.state == "CONDITION_FAILED" and bool(self.message)


class TrafficEntry(BaseModel):
    revision: str | None = None  # short name (a LATEST target names the latest ready revision)
    percent: int = 0
    latest: bool = False
    tag: str | None = None
    uri: str | None = None  # a tagged target's own URL (``https://TAG---SERVICE-HASH.a.run.app``)


class RevisionInfo(BaseModel):
    name: str  # short name
    full_name: str
    create_time: str | None = None
    ready: bool = False
    conditions: list[ConditionInfo] = Field(default_factory=list)
    spec: ServiceSpec
    traffic_percent: int = 0


class ServiceInfo(BaseModel):
    name: str  # short name
    full_name: str
    spec: ServiceSpec
    uri: str | None = None
    latest_ready_revision: str | None = None
    latest_created_revision: str | None = None
    traffic: list[TrafficEntry] = Field(default_factory=list)
    conditions: list[ConditionInfo] = Field(default_factory=list)
    terminal_condition: ConditionInfo | None = None
    etag: str | None = None
    revisions: list[RevisionInfo] = Field(default_factory=list)

    @property
    def ready(self) -> bool:
        tc = self.terminal_condition
        return tc is not None and tc.state == "CONDITION_SUCCEEDED"

    @property
    def all_conditions(self) -> list[ConditionInfo]:
        """The terminal condition (when there is one), then the others."""
        return [*([self.terminal_condition] if self.terminal_condition else []), *self.conditions]

    def percent_of(self, revision: str) -> int:
        """The share of traffic ``revision`` gets (0 when it has none)."""
        return sum(t.percent for t in self.traffic if t.revision == revision)

    def tag_uri(self, tag: str) -> str | None:
        """The URL of a traffic tag (None when the service has no such tag)."""
        return next((t.uri for t in self.traffic if t.tag == tag), None)

    @property
    def serving_revision(self) -> str | None:
        """The revision that gets the largest traffic share (the latest ready one for a LATEST target)."""
        best: TrafficEntry | None = None
        for t in self.traffic:
            if best is None or t.percent > best.percent:
                best = t
        if best is None:
            return self.latest_ready_revision
        return best.revision if best.revision else self.latest_ready_revision


class MutationResult(BaseModel):
    service: str
    operation: str  # "update" | "rollback" | "create" | "delete"
    revision: str | None = None  # the revision the change produced (or routes to)
    ready: bool = False
    message: str = ""
    approval_id: str
