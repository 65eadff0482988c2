"""What one observe step saw: the input of every analyzer, the diagnosis and the plan.

An ``Observation`` comes from a recorded incident file (``Observation.from_incident``) or from the
graph's observe node (Cloud Run spec and conditions, Cloud Logging entries, ``/health``,
``/metrics``, Cloud Monitoring's time series). Log line numbers are 1-based indexes into ``logs``:
analyzers, the compressed context and the diagnosis all cite them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from graph.progress import Probe
from graph.slo import Burn, SloConfig
from mcp_tools.incident import Incident, LogLine, ServiceSpec
from mcp_tools.monitoring import SeriesSet, SeriesSummary

#: What an observe step reads; each may be unread (a blind spot).
Source = Literal["logs", "service", "health", "metrics", "monitoring"]

#: Why a read failed: the dependency errored, it did not answer in time, or the cycle's deadline had
#: no time left for it (it was not tried, or was cut short).
UnreadReason = Literal["error", "timeout", "deadline", "no_url"]

#: How each source is named in a summary line (the service's label is the one faces match on).
LABELS: dict[str, str] = {
    "logs": "logs",
    "service": "service spec and revisions",
    "health": "/health",
    "metrics": "/metrics",
    "monitoring": "Cloud Monitoring",
}


class Unread(BaseModel):
    """One thing an observation could not read, and why (a blind spot: never filled by a guess)."""

    source: Source
    reason: UnreadReason = "error"
    why: str  # one line: the call and its failure ("Cloud Logging (list entries): unavailable ...")
    seconds: float | None = None  # time spent on the failed read

    @property
    def line(self) -> str:
        """The observation summary's line: "logs: <why>"."""
        return f"{LABELS[self.source]}: {self.why}"


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
    revisions: list[str] = Field(default_factory=list)  # every known revision, newest first
    # What could not be read (a live observation's blind spots; a recorded incident has none).
    unread: list[Unread] = Field(default_factory=list)
    window: tuple[str, str] | None = None  # the logs' [since, until] (RFC 3339), when live
    # Cloud Monitoring's series over the last ``series.period_s``-aligned window (None: not read, or
    # not meant to be: see ``blind_to("monitoring")``). Analyzers read the points; a model only ever
    # gets ``series_summaries()`` (a few numbers per series).
    series: SeriesSet | None = None
    # A 1-token completion asked while /health answered (None: not sent): a stuck engine hangs it.
    probe: Probe | None = None
    # The SLOs and time thresholds the analyzers judge the series by (None: the defaults).
    slo: SloConfig | None = None

    _cache: dict[str, Any] = PrivateAttr(default_factory=dict)

    @classmethod
    def from_incident(cls, incident: Incident) -> Observation:
        """The observation an incident file records (no live health check: ``health`` stays None).
        The service spec is redacted, as in every observation."""
        return cls(
            id=incident.id,
            title=incident.title,
            service=_redacted_spec(incident.service),
            logs=list(incident.logs),
            metrics=incident.metrics,
            series=incident.series.series_set(incident.service.name if incident.service else incident.id)
            if incident.series is not None
            else None,
            model_config=dict(incident.model_config_),
            source=incident.source or (str(incident.path) if incident.path else "incident"),
        )

    @classmethod
    def from_cloud_run(
        cls,
        name: str,
        info: Any,
        logs: list[LogLine],
        *,
        metrics: str | None = None,
        health: bool | None = None,
        unread: list[Unread] | None = None,
        window: tuple[str, str] | None = None,
        series: SeriesSet | None = None,
        probe: Probe | None = None,
        slo: SloConfig | None = None,
    ) -> Observation:
        """A live service's observation: ``info`` is ``mcp_tools.cloudrun.ServiceInfo`` (None when it
        could not be read). Conditions are tagged with their scope (the service, or a revision, so
        superseded revisions' failures read as history); log lines and the spec are redacted: an
        observation is stored and shown, so it never holds a secret (apply reads the real spec from
        Cloud Run)."""
        conditions: list[dict[str, Any]] = []
        if info is not None:
            conditions += [{"scope": "service", **c.model_dump(mode="json")} for c in info.conditions]
            for r in info.revisions[:3]:  # newest first: the failing revision is the latest created
                conditions += [
                    {"scope": f"revision/{r.name}", **c.model_dump(mode="json")} for c in r.conditions
                ]
        from mcp_tools.redact import redact_data

        conditions = redact_data(conditions)  # a condition's message may quote the container's output
        return cls(
            id=name,
            title=f"Cloud Run service {name}",
            service=_redacted_spec(info.spec) if info is not None else None,
            logs=redacted(logs),
            metrics=metrics,
            conditions=conditions,
            health=health,
            source=f"cloud-run:{name}",
            latest_ready_revision=info.latest_ready_revision if info is not None else None,
            latest_created_revision=info.latest_created_revision if info is not None else None,
            serving_revision=info.serving_revision if info is not None else None,
            ready_revisions=[r.name for r in info.revisions if r.ready] if info is not None else [],
            revisions=[r.name for r in info.revisions] if info is not None else [],
            unread=list(unread or []),
            window=window,
            series=series,
            probe=probe,
            slo=slo,
        )

    @property
    def slo_config(self) -> SloConfig:
        return self.slo or SloConfig()

    def series_summaries(self) -> list[SeriesSummary]:
        """The series compressed (level, trend, peak, when it changed), as a model sees them (cached)."""
        hit = self._cache.get("series_summaries")
        if hit is None:
            from mcp_tools.monitoring import summaries

            hit = summaries(self.series) if self.series is not None else []
            self._cache["series_summaries"] = hit
        return list(hit)

    def slo_burns(self) -> list[Burn]:
        """The SLOs burning over the series (``graph.slo.burns``), computed once per observation (cached):
        every analyzer that weighs them reads the same list."""
        hit = self._cache.get("slo_burns")
        if hit is None:
            from graph.slo import burns

            hit = burns(self.series, self.slo_config) if self.series is not None else []
            self._cache["slo_burns"] = hit
        return list(hit)

    def blind_to(self, source: Source) -> Unread | None:
        """The record of ``source`` being unread (None: it was read, or never meant to be)."""
        return next((u for u in self.unread if u.source == source), None)

    @property
    def degraded(self) -> bool:
        """True when something the observer meant to read could not be read."""
        return bool(self.unread)

    @property
    def failing_revision_is_latest(self) -> bool:
        """True when the latest created revision is not the latest ready one (it failed to start)."""
        return bool(
            self.latest_created_revision
            and self.latest_ready_revision
            and self.latest_created_revision != self.latest_ready_revision
        )

    # -- history: what superseded revisions left behind ------------------------------------------

    def _current_anchor(self) -> str | None:
        """The revision that stands for the service now: the serving one, else the latest ready."""
        return self.serving_revision or self.latest_ready_revision

    def _age(self, revision: str) -> int | None:
        """The revision's place, 0 = newest (from ``revisions``, else its ``-NNNNN-`` sequence)."""
        if revision in self.revisions:
            return self.revisions.index(revision)
        return None

    def _older(self, a: str, b: str) -> bool:
        """True when revision ``a`` was created before revision ``b``."""
        ia, ib = self._age(a), self._age(b)
        if ia is not None and ib is not None:
            return ia > ib
        na, nb = _sequence(a), _sequence(b)
        return na is not None and nb is not None and na < nb

    @property
    def failed_rollout(self) -> str | None:
        """The latest created revision when it failed to start and takes no traffic while an older,
        ready revision serves it all: a failed deploy that never took over. The service runs on the
        serving revision, so the failed one is history (not an open incident), and rolling back to
        the serving revision would change nothing. None when revisions are unknown."""
        latest, serving = self.latest_created_revision, self.serving_revision
        if not latest or not serving or latest == serving or latest in self.ready_revisions:
            return None
        if serving not in self.ready_revisions and serving != self.latest_ready_revision:
            return None
        return latest

    def superseded_revision(self, revision: str | None) -> bool:
        """True for a revision that no longer serves and is not the latest created, or a failed
        rollout (``failed_rollout``): its log lines are history, not evidence of a current fault.
        Unknown revisions (a recorded incident) never are."""
        if not revision:
            return False
        if revision == self.failed_rollout:
            return True
        current = {r for r in (self._current_anchor(), self.latest_created_revision) if r}
        if not current or revision in current:
            return False
        anchor = self._current_anchor()
        if anchor is None:
            return False
        return self._older(revision, anchor)

    def condition_is_history(self, condition: dict[str, Any]) -> bool:
        """A revision condition of a revision older than the serving (or latest ready) one, or of a
        failed rollout (the service's condition naming it included)."""
        scope = str(condition.get("scope") or "")
        failed = self.failed_rollout
        if scope == "service" and failed and f"'{failed}'" in str(condition.get("message") or ""):
            return True  # the service's "Revision 'X' is not ready" about the failed rollout
        if not scope.startswith("revision/"):
            return False
        revision = scope.split("/", 1)[1]
        if revision == self.failed_rollout:
            return True
        anchor = self._current_anchor()
        return bool(anchor) and revision != anchor and self._older(revision, str(anchor))

    def history_lines(self) -> set[int]:
        """1-based numbers of the log lines written by superseded revisions (cached)."""
        hit = self._cache.get("history")
        if hit is None:
            hit = {i for i, ln in enumerate(self.logs, start=1) if self.superseded_revision(ln.revision)}
            self._cache["history"] = hit
        return set(hit)

    def current_conditions(self) -> list[dict[str, Any]]:
        """The conditions that describe the current state (history conditions left out)."""
        return [c for c in self.conditions if not self.condition_is_history(c)]

    def history_revisions(self) -> list[str]:
        """The superseded revisions the observation holds lines or conditions of, oldest first."""
        seen: dict[str, None] = {}
        for ln in self.logs:
            if ln.revision and self.superseded_revision(ln.revision):
                seen.setdefault(ln.revision, None)
        for c in self.conditions:
            scope = str(c.get("scope") or "")
            if scope.startswith("revision/") and self.condition_is_history(c):
                seen.setdefault(scope.split("/", 1)[1], None)
        return sorted(seen, key=lambda r: (_sequence(r) or 0, r))

    def line_text(self, n: int) -> str | None:
        """The text of 1-based log line ``n`` (None when there is no such line)."""
        if 1 <= n <= len(self.logs):
            return self.logs[n - 1].message
        return None


def _sequence(revision: str) -> int | None:
    """The sequence number Cloud Run puts in a generated revision name (``svc-00002-abc`` -> 2)."""
    import re

    m = re.search(r"-(\d{5})-[a-z0-9]+$", revision) or re.search(r"-(\d+)(?:-[a-z0-9]+)?$", revision)
    return int(m.group(1)) if m else None


def _redacted_spec(spec: ServiceSpec | None) -> ServiceSpec | None:
    from mcp_tools.redact import redact_spec

    return redact_spec(spec) if spec is not None else None


def redacted(lines: list[LogLine]) -> list[LogLine]:
    """Log lines with credentials masked: what the state, the checkpoints, a model and a report see."""
    import json

    from mcp_tools.redact import redact

    out: list[LogLine] = []
    for ln in lines:
        if ln.text is not None:
            clean = redact(ln.text)
            out.append(ln if clean == ln.text else ln.model_copy(update={"text": clean}))
        elif ln.json_payload is not None:
            raw = json.dumps(ln.json_payload, sort_keys=True)
            clean = redact(raw)
            if clean == raw:
                out.append(ln)
                continue
            try:
                payload = json.loads(clean)
            except ValueError:  # the mask broke the JSON: keep it as text
                payload = {"message": clean}
            out.append(ln.model_copy(update={"json_payload": payload}))
        else:
            out.append(ln)
    return out
