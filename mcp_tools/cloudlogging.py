"""Cloud Logging entries for a Cloud Run service, through the official client (REST).

Filters are built only from validated or quoted values: service and revision names are checked
against Cloud Run's naming rules, free text is escaped inside a quoted string, severities come from
the LogSeverity list. Every query carries an explicit ``timestamp>=`` (the client silently adds a
24-hour one otherwise) and is bounded in time and count.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from mcp_tools.errors import UserError
from mcp_tools.google_api import ApiReader, call
from mcp_tools.incident import SEVERITIES, LogLine
from mcp_tools.names import validate_revision_name, validate_service_name
from mcp_tools.redact import redact

log = logging.getLogger(__name__)

MAX_LIMIT = 5000
MAX_WINDOW = timedelta(days=30)
MAX_TEXT_FILTER = 200
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def quote(value: str) -> str:
    """``value`` as a Logging-query string literal: quoted, backslashes and quotes escaped."""
    if not isinstance(value, str):
        raise UserError(f"expected text for a log filter, not {type(value).__name__}")
    cleaned = "".join(ch if ch.isprintable() else " " for ch in value)
    return '"' + cleaned.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_time(
    value: datetime | timedelta | str, *, now: datetime | None = None, what: str = "since"
) -> datetime:
    """An aware UTC datetime from a datetime, a timedelta back from now, '15m'/'2h'/'1d', or ISO 8601."""
    now = now or datetime.now(UTC)
    if isinstance(value, timedelta):
        return now - value
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        m = _DURATION_RE.fullmatch(value)
        if m:
            return now - timedelta(**{_UNITS[m.group(2)]: float(m.group(1))})
        try:
            dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            return dt if dt.tzinfo else dt.replace(tzinfo=UTC)
    raise UserError(
        f"bad '{what}' value {value!r}: use a duration like '15m', '2h', '1d' or an ISO 8601 time"
    )


def _rfc3339(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def build_filter(
    service: str,
    *,
    since: datetime,
    until: datetime | None = None,
    severity: str | None = None,
    text_filter: str | None = None,
    revision: str | None = None,
    location: str | None = None,
) -> str:
    """The Logging query for a Cloud Run service's entries; every value validated or quoted."""
    validate_service_name(service)
    if since.tzinfo is None:
        raise UserError("'since' must be a time with a timezone")
    parts = [
        'resource.type="cloud_run_revision"',
        f"resource.labels.service_name={quote(service)}",
    ]
    if location:
        if not re.fullmatch(r"[a-z0-9-]{1,63}", location):
            raise UserError(f"invalid region {location!r}")
        parts.append(f"resource.labels.location={quote(location)}")
    if revision:
        parts.append(f"resource.labels.revision_name={quote(validate_revision_name(revision))}")
    parts.append(f'timestamp>="{_rfc3339(since)}"')
    if until is not None:
        if until <= since:
            raise UserError("'until' must be later than 'since'")
        parts.append(f'timestamp<="{_rfc3339(until)}"')
    if severity:
        sev = severity.strip().upper()
        if sev == "WARN":
            sev = "WARNING"
        if sev not in SEVERITIES:
            raise UserError(f"unknown severity {severity!r} (one of {', '.join(SEVERITIES)})")
        parts.append(f"severity>={sev}")
    if text_filter:
        if len(text_filter) > MAX_TEXT_FILTER:
            raise UserError(f"text filter is longer than {MAX_TEXT_FILTER} characters")
        parts.append(text_restriction(text_filter))
    return "\n".join(parts)


#: What could be part of a request log's status or latency as shown ("503", "0.25", "1.5s").
_STATUS_OR_LATENCY = re.compile(r"[0-9.]*[0-9][0-9.]*s?")


def text_restriction(text: str) -> str:
    """The entries whose record text (``LogLine.record_text``) may contain ``text``: a text payload, a
    JSON payload (any field), or a request log's method, URL, status or latency, the fields
    ``entry_to_logline`` shows. Cloud Logging cannot search a status number or a latency duration for
    a substring, so for text that could be part of one, the status codes containing it are named and
    every request log with a latency is included: ``CloudLogging.list_entries`` keeps only the
    entries whose record text does contain ``text``."""
    q = quote(text)
    parts = [
        f"textPayload:{q}",
        f"jsonPayload:{q}",
        f"httpRequest.requestMethod:{q}",
        f"httpRequest.requestUrl:{q}",
    ]
    needle = text.strip()
    if needle.isdigit():
        codes = [str(c) for c in range(100, 600) if needle in str(c)]
        if codes:
            parts.append(f"httpRequest.status=({' OR '.join(codes)})")
    if _STATUS_OR_LATENCY.fullmatch(needle):
        parts.append("httpRequest.latency:*")
    return "(" + " OR ".join(parts) + ")"


def entry_to_logline(entry: Any) -> LogLine:
    """A LogLine from a google.cloud.logging entry (text, structured or request-log)."""
    ts = entry.timestamp
    timestamp = _rfc3339(ts) if isinstance(ts, datetime) else (str(ts) if ts else None)
    severity = entry.severity or "DEFAULT"
    payload = entry.payload
    data: dict[str, Any] = {"timestamp": timestamp, "severity": severity}
    labels = getattr(getattr(entry, "resource", None), "labels", None) or {}
    if isinstance(labels, dict) and labels.get("revision_name"):
        data["revision"] = str(labels["revision_name"])
    if isinstance(payload, str):
        data["text"] = payload
    elif isinstance(payload, dict):
        data["json"] = payload
    else:
        req = getattr(entry, "http_request", None) or {}
        if req:
            status = req.get("status", "")
            data["text"] = " ".join(
                str(x)
                for x in (
                    req.get("requestMethod", ""),
                    req.get("requestUrl", ""),
                    status,
                    req.get("latency", ""),
                )
                if x != ""
            )
        elif payload is not None:
            data["text"] = str(payload)
        else:
            data["text"] = ""
    try:
        return LogLine.model_validate(data)
    except Exception:  # an odd severity from the API must not lose the line
        data["severity"] = "DEFAULT"
        return LogLine.model_validate(data)


class CloudLogging(ApiReader):
    """Read Cloud Run service logs from Cloud Logging."""

    @property
    def client(self) -> Any:
        return self.lazy_client(
            "logging",
            "google.cloud.logging",
            "Client",
            endpoint=self.settings.logging_api_endpoint,
            handwritten=True,
            timeout_s=self.policy.timeout_s,
            deadline=self.policy.deadline,
            project=self.project,
            _use_grpc=False,
        )

    def list_entries(
        self,
        service: str,
        *,
        since: datetime | timedelta | str,
        until: datetime | timedelta | str | None = None,
        severity: str | None = None,
        text_filter: str | None = None,
        revision: str | None = None,
        limit: int = 1000,
        newest: bool = True,
    ) -> list[LogLine]:
        """Entries of ``service`` in [since, until], oldest first, at most ``limit``.

        With ``newest`` (default) the newest ``limit`` entries in the window are kept; otherwise the
        oldest (useful for start-up failures). ``text_filter``: only entries whose record text
        (``LogLine.record_text``, what ``gemma-sre logs`` prints) contains it, case-insensitively; the
        query (``text_restriction``) may name more, so at most ``MAX_LIMIT`` entries are read to find them.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise UserError(f"limit must be a whole number from 1 to {MAX_LIMIT}, not {limit!r}")
        now = datetime.now(UTC)
        start = parse_time(since, now=now, what="since")
        end = parse_time(until, now=now, what="until") if until is not None else None
        if (end or now) - start > MAX_WINDOW:
            raise UserError(f"time window is longer than {MAX_WINDOW.days} days; narrow 'since'/'until'")
        filt = build_filter(
            service,
            since=start,
            until=end,
            severity=severity,
            text_filter=text_filter,
            revision=revision,
            location=self.settings.location,
        )
        order = "timestamp desc" if newest else "timestamp asc"
        log.debug("Cloud Logging filter:\n%s", filt)

        needle = text_filter.lower() if text_filter else None

        def read() -> list[LogLine]:
            out: list[LogLine] = []
            for e in self.client.list_entries(
                resource_names=[f"projects/{self.project}"],
                filter_=filt,
                order_by=order,
                max_results=limit if needle is None else MAX_LIMIT,
                page_size=min(limit, 1000),
            ):
                line = entry_to_logline(e)
                # matched as printed: redacted, so a filter cannot probe for a secret's presence
                if needle is None or needle in redact(line.record_text).lower():
                    out.append(line)
                    if len(out) >= limit:
                        break
            return out

        lines = call("Cloud Logging (list entries)", read, policy=self.policy)
        if newest:
            lines.reverse()
        return lines
