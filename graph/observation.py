"""What one observe step saw: the input of every analyzer, the diagnosis and the plan.

An ``Observation`` comes from a recorded incident file (``Observation.from_incident``) or from the
graph's observe node (Cloud Run spec and conditions, Cloud Logging entries, ``/health``,
``/metrics``). Log line numbers are 1-based indexes into ``logs``: analyzers, the compressed context
and the diagnosis all cite them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from mcp_tools.incident import Incident, LogLine, ServiceSpec


class Observation(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    id: str = "observation"
    title: str = ""
    service: ServiceSpec | None = None
    logs: list[LogLine] = Field(default_factory=list)  # oldest first
    metrics: str | None = None  # Prometheus text from vLLM's /metrics
    conditions: list[dict[str, Any]] = Field(default_factory=list)  # Cloud Run service/revision conditions
    health: bool | None = None  # /health answered 200 (None: not checked)
    model_config_: dict[str, Any] = Field(default_factory=dict, alias="model_config")
    source: str = ""
    # Revisions, when the observer knows them (a recorded incident usually does not).
    latest_ready_revision: str | None = None
    latest_created_revision: str | None = None
    serving_revision: str | None = None  # the revision that receives the traffic
    ready_revisions: list[str] = Field(default_factory=list)  # ready revisions, newest first

    _cache: dict[str, Any] = PrivateAttr(default_factory=dict)

    @classmethod
    def from_incident(cls, incident: Incident) -> Observation:
        """The observation an incident file records (no live health check: ``health`` stays None)."""
        return cls(
            id=incident.id,
            title=incident.title,
            service=incident.service,
            logs=list(incident.logs),
            metrics=incident.metrics,
            model_config=dict(incident.model_config_),
            source=incident.source or (str(incident.path) if incident.path else "incident"),
        )

    @property
    def failing_revision_is_latest(self) -> bool:
        """True when the latest created revision is not the latest ready one (it failed to start)."""
        return bool(
            self.latest_created_revision
            and self.latest_ready_revision
            and self.latest_created_revision != self.latest_ready_revision
        )

    def line_text(self, n: int) -> str | None:
        """The text of 1-based log line ``n`` (None when there is no such line)."""
        if 1 <= n <= len(self.logs):
            return self.logs[n - 1].message
        return None
