"""Which findings are the same incident across watch cycles: stable fingerprints and a small tracker.

A finding's fingerprint is its category, the service, and the *template* of its leading evidence
line: numbers, hex ids, UUIDs, timestamps, sizes and revision suffixes are replaced by placeholders,
so the same CUDA out-of-memory line seen in two cycles (with different timestamps, byte counts or
revision names) hashes the same. The tracker is pure: ``IncidentTracker.update(findings, ...)``
takes one cycle's findings and returns the events worth telling someone about:

- ``new``: a fingerprint not open before (or one that had resolved and came back: ``recurred``),
- ``escalated``: an open incident whose confidence rose by at least ``escalate_delta``, or that was
  seen at least ``escalate_factor`` times as often in one cycle as ever before,
- ``resolved``: an open incident not seen for ``quiet_cycles`` cycles (one cycle when the service
  was observed healthy).

An ongoing incident produces no event. The state is a pydantic model; ``TrackerStore`` keeps it as
JSON under the state directory (written atomically) so a restarted watch knows what it reported.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

log = logging.getLogger(__name__)

EventKind = Literal["new", "escalated", "resolved"]

# Order matters: the more specific shapes first.
_NORMALISERS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"), "<ts>"),
    (re.compile(r"\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<ts>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<uuid>"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.I), "<hex>"),
    (re.compile(r"\b[0-9a-f]{12,}\b", re.I), "<hex>"),
    # Cloud Run revision names: <service>-00012-abc
    (re.compile(r"\b([a-z][a-z0-9-]*?)-\d{5}-[a-z0-9]{3}\b"), r"\1-<rev>"),
    (re.compile(r"\b(?:pid|PID)[=: ]\s*\d+"), "pid=<n>"),
    (re.compile(r"\d+(?:\.\d+)?\s*(?:[KMGT]i?B|bytes)\b", re.I), "<size>"),
    (re.compile(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?%?"), "<n>"),
]
_SPACES = re.compile(r"\s+")


def evidence_template(text: str, *, limit: int = 240) -> str:
    """A log line with its variable parts replaced: the same message in two cycles maps to one template."""
    t = text.strip()
    for pattern, repl in _NORMALISERS:
        t = pattern.sub(repl, t)
    return _SPACES.sub(" ", t)[:limit]


def fingerprint(category: str, service: str, evidence: Iterable[str]) -> str:
    """``category:service:hash`` of the leading evidence line's template (stable across cycles)."""
    lead = next((evidence_template(e) for e in evidence if e and e.strip()), "")
    digest = hashlib.sha256(f"{category}\x1f{service}\x1f{lead}".encode()).hexdigest()[:12]
    return f"{category}:{service}:{digest}"


class TrackedFinding(BaseModel):
    """One cycle's finding, as the tracker needs it (built from an analyzer Finding or a diagnosis)."""

    category: str
    service: str
    confidence: float = 0.0
    summary: str = ""
    evidence: list[str] = Field(default_factory=list)
    occurrences: int = 1  # how many log lines showed it this cycle
    specific: bool = True  # False: a generic symptom (e.g. only a revision condition), not a root cause

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.category, self.service, self.evidence)

    @classmethod
    def from_finding(
        cls, finding: Mapping[str, Any], service: str, messages: Iterable[str] = ()
    ) -> TrackedFinding:
        """``messages``: the cycle's log lines; occurrences counts those sharing the template of the
        finding's lead evidence line (an analyzer cites only a few of them)."""
        raw = finding.get("evidence") or []
        ev = [str(e.get("text", "")) if isinstance(e, Mapping) else str(e) for e in raw]
        lead = next((evidence_template(e) for e in ev if e.strip()), None)
        same = sum(1 for m in messages if lead and evidence_template(m) == lead) if lead else 0
        return cls(
            category=str(finding.get("category") or "unknown"),
            service=service,
            confidence=float(finding.get("confidence") or 0.0),
            summary=str(finding.get("summary") or ""),
            evidence=ev,
            occurrences=max(1, same, len(ev)),
            specific=bool(finding.get("specific", True)),
        )


class TrackedIncident(BaseModel):
    fingerprint: str
    category: str
    service: str
    summary: str = ""
    first_seen: str
    last_seen: str
    status: Literal["open", "resolved"] = "open"
    cycles_seen: int = 1
    quiet_cycles: int = 0
    confidence: float = 0.0
    max_occurrences: int = 1
    recurrences: int = 0
    evidence: list[str] = Field(default_factory=list)  # the leading lines, for a notification
    resolved_at: str | None = None
    thread_id: str | None = None  # the graph thread handling it (plan, approval, outcome)
    outcome: str | None = None  # that thread's outcome status, once it has one


class IncidentEvent(BaseModel):
    kind: EventKind
    incident: TrackedIncident
    reason: str
    at: str


class TrackerState(BaseModel):
    cycle: int = 0
    since: str | None = None  # the end of the last cycle's observation window
    incidents: dict[str, TrackedIncident] = Field(default_factory=dict)
    pending_thread: str | None = None  # a thread waiting for an approval (one plan at a time)

    def open_incidents(self, service: str | None = None) -> list[TrackedIncident]:
        return [
            i
            for i in self.incidents.values()
            if i.status == "open" and (service is None or i.service == service)
        ]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class IncidentTracker:
    """Pure bookkeeping over ``TrackerState``: feed each cycle's findings, get the events to report."""

    def __init__(
        self,
        state: TrackerState | None = None,
        *,
        quiet_cycles: int = 2,
        escalate_delta: float = 0.15,
        escalate_factor: float = 2.0,
        escalate_min_occurrences: int = 5,
    ) -> None:
        if quiet_cycles < 1:
            raise ValueError("quiet_cycles must be at least 1")
        self.state = state or TrackerState()
        self.quiet_cycles = quiet_cycles
        self.escalate_delta = escalate_delta
        self.escalate_factor = escalate_factor
        self.escalate_min_occurrences = escalate_min_occurrences

    def _match(self, f: TrackedFinding) -> TrackedIncident | None:
        """The incident this finding continues: same fingerprint, else an open one of the same
        category on the same service (the leading line can change while the incident goes on)."""
        inc = self.state.incidents.get(f.fingerprint)
        if inc is not None:
            return inc
        for i in self.state.incidents.values():
            if i.status == "open" and i.category == f.category and i.service == f.service:
                return i
        return None

    def update(
        self,
        findings: Iterable[TrackedFinding],
        *,
        service: str | None = None,
        healthy: bool | None = None,
        touch: Iterable[str] = (),
        at: str | None = None,
    ) -> list[IncidentEvent]:
        """One cycle. ``service`` limits resolution to that service's incidents; ``healthy`` is the
        cycle's health reading (True lets an unseen incident resolve after one quiet cycle);
        ``touch`` names open incidents that are still going on this cycle though no finding of
        theirs was seen (the caller judged a generic symptom to be theirs): no event, no quiet cycle."""
        now = at or _now()
        self.state.cycle += 1
        events: list[IncidentEvent] = []
        seen: set[str] = set()
        for fp in touch:
            inc = self.state.incidents.get(fp)
            if inc is not None and inc.status == "open":
                inc.quiet_cycles = 0
                inc.last_seen = now
                seen.add(fp)
        # One finding per incident per cycle: the most confident.
        best: dict[str, TrackedFinding] = {}
        for f in findings:
            if f.category in ("healthy", "none"):
                continue
            key = f.fingerprint
            if key not in best or f.confidence > best[key].confidence:
                best[key] = f
        for f in best.values():
            inc = self._match(f)
            if inc is None or inc.status == "resolved":
                recurred = inc is not None
                new = TrackedIncident(
                    fingerprint=inc.fingerprint if inc is not None else f.fingerprint,
                    category=f.category,
                    service=f.service,
                    summary=f.summary,
                    first_seen=now,
                    last_seen=now,
                    confidence=f.confidence,
                    max_occurrences=f.occurrences,
                    recurrences=(inc.recurrences + 1) if inc is not None else 0,
                    evidence=f.evidence[:3],
                )
                self.state.incidents[new.fingerprint] = new
                seen.add(new.fingerprint)
                reason = "recurred after it had resolved" if recurred else "first seen"
                events.append(IncidentEvent(kind="new", incident=new.model_copy(), reason=reason, at=now))
                continue
            if inc.fingerprint in seen:
                continue
            seen.add(inc.fingerprint)
            reasons: list[str] = []
            if f.confidence >= inc.confidence + self.escalate_delta:
                reasons.append(f"confidence {inc.confidence:.2f} -> {f.confidence:.2f}")
            if (
                f.occurrences >= self.escalate_min_occurrences
                and f.occurrences >= inc.max_occurrences * self.escalate_factor
            ):
                reasons.append(
                    f"{f.occurrences} occurrences in one cycle (was at most {inc.max_occurrences})"
                )
            inc.last_seen = now
            inc.cycles_seen += 1
            inc.quiet_cycles = 0
            inc.confidence = max(inc.confidence, f.confidence)
            inc.max_occurrences = max(inc.max_occurrences, f.occurrences)
            if f.summary:
                inc.summary = f.summary
            if reasons:
                why = "; ".join(reasons)
                events.append(IncidentEvent(kind="escalated", incident=inc.model_copy(), reason=why, at=now))
        for inc in self.state.open_incidents(service):
            if inc.fingerprint in seen:
                continue
            inc.quiet_cycles += 1
            if inc.quiet_cycles >= self.quiet_cycles or healthy is True:
                inc.status = "resolved"
                inc.resolved_at = now
                why = (
                    "not seen this cycle and the service is healthy"
                    if healthy is True and inc.quiet_cycles < self.quiet_cycles
                    else f"not seen for {inc.quiet_cycles} cycles"
                )
                if inc.outcome:
                    why += f" (remediation outcome: {inc.outcome})"
                events.append(IncidentEvent(kind="resolved", incident=inc.model_copy(), reason=why, at=now))
        return events

    def attach_thread(self, fingerprints: Iterable[str], thread_id: str, outcome: str | None = None) -> None:
        for fp in fingerprints:
            inc = self.state.incidents.get(fp)
            if inc is not None:
                inc.thread_id = thread_id
                if outcome is not None:
                    inc.outcome = outcome

    def set_outcome(self, thread_id: str, outcome: str) -> None:
        for inc in self.state.incidents.values():
            if inc.thread_id == thread_id:
                inc.outcome = outcome


class TrackerStore:
    """The tracker's state as one JSON file (atomic replace), e.g. ``<state_dir>/watch/<service>.json``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def for_service(cls, state_dir: Path, service: str) -> TrackerStore:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", service) or "default"
        return cls(state_dir / "watch" / f"{safe}.json")

    def load(self) -> TrackerState:
        if not self.path.exists():
            return TrackerState()
        try:
            return TrackerState.model_validate_json(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            # Keep the unreadable file for a person to look at; start afresh rather than crash.
            bad = self.path.with_suffix(".unreadable.json")
            log.warning("watch state %s is unreadable (%s); kept as %s", self.path, e, bad)
            with contextlib.suppress(OSError):
                os.replace(self.path, bad)
            return TrackerState()

    def save(self, state: TrackerState) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state.model_dump(mode="json"), indent=1), encoding="utf-8")
        os.replace(tmp, self.path)
