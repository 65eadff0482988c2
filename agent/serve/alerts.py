"""Alert webhooks, parsed: Cloud Monitoring alerting (schema version 1.2) and Prometheus Alertmanager
(webhook version 4), each into ``AlertEvent`` s naming the Cloud Run service they are about.

Cloud Monitoring sends one incident per request: ``incident.state`` is ``open`` or ``closed``, the
resource is in ``incident.resource`` (a ``cloud_run_revision`` carries ``project_id``,
``service_name``, ``revision_name``, ``location``), the alert's identity is ``incident_id`` (the same
for the open and the close). Alertmanager sends a group: each of ``alerts[]`` has a ``status``
(``firing`` / ``resolved``), ``labels`` and a ``fingerprint`` (the same while it fires and once it
resolves); the service is read from the labels (``service_name`` or ``service``, ``project_id`` or
``project``, ``location`` or ``region``), falling back to the group's ``commonLabels``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcp_tools.errors import UserError

AlertState = Literal["open", "closed"]


class AlertEvent(BaseModel):
    """One alert, as either source says it, for one service (``service`` None: it names none)."""

    source: Literal["cloud-monitoring", "alertmanager"]
    alert_id: str  # Cloud Monitoring's incident_id, Alertmanager's fingerprint
    state: AlertState
    policy: str = ""  # the alerting policy / the alertname
    summary: str = ""
    project: str | None = None
    location: str | None = None
    service: str | None = None
    revision: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    url: str | None = None


def _epoch(v: Any) -> str | None:
    if v in (None, "", 0):
        return None
    try:
        return datetime.fromtimestamp(float(v), UTC).isoformat().replace("+00:00", "Z")
    except (TypeError, ValueError, OverflowError, OSError):
        return None


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Resource(_Loose):
    type: str = ""
    labels: dict[str, str] = Field(default_factory=dict)


class _Incident(_Loose):
    incident_id: str = Field(min_length=1, max_length=500)
    state: str
    policy_name: str = ""
    summary: str = ""
    url: str | None = None
    started_at: int | float | str | None = None
    ended_at: int | float | str | None = None
    scoping_project_id: str | None = None
    resource: _Resource = Field(default_factory=_Resource)
    resource_name: str | None = None


class CloudMonitoringPayload(_Loose):
    """What a Cloud Monitoring webhook notification channel POSTs (``version`` "1.2")."""

    version: str = ""
    incident: _Incident


class _AMAlert(_Loose):
    status: Literal["firing", "resolved"]
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: str | None = None  # noqa: N815 - the wire names
    endsAt: str | None = None  # noqa: N815
    generatorURL: str | None = None  # noqa: N815
    fingerprint: str = Field(min_length=1, max_length=500)


class AlertmanagerPayload(_Loose):
    """What an Alertmanager ``webhook_config`` receiver POSTs (``version`` "4")."""

    version: str
    status: str = ""
    receiver: str = ""
    groupKey: str = ""  # noqa: N815
    commonLabels: dict[str, str] = Field(default_factory=dict)  # noqa: N815
    commonAnnotations: dict[str, str] = Field(default_factory=dict)  # noqa: N815
    externalURL: str | None = None  # noqa: N815
    alerts: list[_AMAlert] = Field(max_length=1000)


def _first(labels: dict[str, str], *names: str) -> str | None:
    for n in names:
        if labels.get(n):
            return labels[n]
    return None


def _problem(e: ValidationError, what: str) -> UserError:
    first = e.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "body"
    return UserError(f"{what}: {where}: {first.get('msg', 'invalid')}")


def parse_cloud_monitoring(doc: Any) -> list[AlertEvent]:
    """The incident of a Cloud Monitoring webhook (UserError: not that shape)."""
    try:
        p = CloudMonitoringPayload.model_validate(doc)
    except ValidationError as e:
        raise _problem(e, "Cloud Monitoring payload") from None
    inc = p.incident
    state = inc.state.strip().lower()
    if state not in ("open", "closed"):
        raise UserError(f"Cloud Monitoring payload: incident.state: {inc.state!r} is not open or closed")
    labels = inc.resource.labels
    service = labels.get("service_name") if inc.resource.type.startswith("cloud_run") else None
    return [
        AlertEvent(
            source="cloud-monitoring",
            alert_id=inc.incident_id,
            state=state,  # type: ignore[arg-type]
            policy=inc.policy_name,
            summary=inc.summary[:2000],
            project=labels.get("project_id") or inc.scoping_project_id,
            location=_first(labels, "location", "region"),
            service=service,
            revision=labels.get("revision_name"),
            started_at=_epoch(inc.started_at),
            ended_at=_epoch(inc.ended_at),
            url=inc.url,
        )
    ]


def parse_alertmanager(doc: Any) -> list[AlertEvent]:
    """Every alert of an Alertmanager webhook group (UserError: not that shape)."""
    try:
        p = AlertmanagerPayload.model_validate(doc)
    except ValidationError as e:
        raise _problem(e, "Alertmanager payload") from None
    if p.version != "4":
        raise UserError(f"Alertmanager payload: version: {p.version!r}; this receiver reads version 4")
    out = []
    for a in p.alerts:
        labels = {**p.commonLabels, **a.labels}
        notes = {**p.commonAnnotations, **a.annotations}
        ended = a.endsAt if a.status == "resolved" and a.endsAt and not a.endsAt.startswith("0001") else None
        out.append(
            AlertEvent(
                source="alertmanager",
                alert_id=a.fingerprint,
                state="closed" if a.status == "resolved" else "open",
                policy=labels.get("alertname", ""),
                summary=(notes.get("summary") or notes.get("description") or "")[:2000],
                project=_first(labels, "project_id", "project"),
                location=_first(labels, "location", "region"),
                service=_first(labels, "service_name", "service"),
                revision=labels.get("revision_name"),
                started_at=a.startsAt,
                ended_at=ended,
                url=a.generatorURL,
            )
        )
    return out
