"""The watch tracker: stable fingerprints, one report per incident, escalation, resolution, restart."""

from __future__ import annotations

from pathlib import Path

from agent.incidents_tracker import (
    IncidentTracker,
    TrackedFinding,
    TrackerState,
    TrackerStore,
    evidence_template,
    fingerprint,
)

OOM_1 = (
    "2026-11-30T10:01:02.123Z torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
    "GPU 0 has a total capacity of 22.05 GiB of which 1.12 GiB is free (revision gemma-00003-abc, pid=412)"
)
OOM_2 = (
    "2026-11-30T10:02:09.900Z torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. "
    "GPU 0 has a total capacity of 22.05 GiB of which 0.31 GiB is free (revision gemma-00004-xyz, pid=977)"
)
KV = "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`."


def oom(text: str = OOM_1, confidence: float = 0.8, occurrences: int = 1) -> TrackedFinding:
    return TrackedFinding(
        category="weights_oom",
        service="gemma",
        confidence=confidence,
        summary="weights do not fit",
        evidence=[text],
        occurrences=occurrences,
    )


def test_template_drops_timestamps_sizes_ids_and_revisions() -> None:
    assert evidence_template(OOM_1) == evidence_template(OOM_2)
    t = evidence_template(OOM_1)
    assert "<ts>" in t and "<size>" in t and "gemma-<rev>" in t and "pid=<n>" in t
    assert "10:01:02" not in t and "2.00 GiB" not in t


def test_fingerprint_is_stable_and_distinguishes_category_service_and_message() -> None:
    a = fingerprint("weights_oom", "gemma", [OOM_1])
    assert a == fingerprint("weights_oom", "gemma", [OOM_2])
    assert a.startswith("weights_oom:gemma:")
    assert a != fingerprint("kv_cache_oom", "gemma", [OOM_1])
    assert a != fingerprint("weights_oom", "other", [OOM_1])
    assert a != fingerprint("weights_oom", "gemma", [KV])


def test_ongoing_incident_is_reported_once_then_resolved() -> None:
    tr = IncidentTracker(quiet_cycles=2)
    ev = tr.update([oom(OOM_1)], service="gemma")
    assert [e.kind for e in ev] == ["new"]
    assert ev[0].reason == "first seen"
    # Same incident, other timestamps and sizes: silent.
    assert tr.update([oom(OOM_2)], service="gemma") == []
    assert tr.update([oom(OOM_1)], service="gemma") == []
    inc = tr.state.open_incidents("gemma")[0]
    assert inc.cycles_seen == 3
    # Gone for one cycle, health unknown: not yet resolved; second quiet cycle resolves it.
    assert tr.update([], service="gemma") == []
    ev = tr.update([], service="gemma")
    assert [e.kind for e in ev] == ["resolved"]
    assert "2 cycles" in ev[0].reason
    assert tr.state.open_incidents() == []


def test_healthy_reading_resolves_after_one_quiet_cycle_and_names_outcome() -> None:
    tr = IncidentTracker(quiet_cycles=3)
    [new] = tr.update([oom()], service="gemma")
    tr.attach_thread([new.incident.fingerprint], "gemma-t1")
    tr.set_outcome("gemma-t1", "fixed")
    ev = tr.update([], service="gemma", healthy=True)
    assert [e.kind for e in ev] == ["resolved"]
    assert "healthy" in ev[0].reason and "fixed" in ev[0].reason
    assert ev[0].incident.thread_id == "gemma-t1"


def test_escalation_on_confidence_and_on_volume_reported_once_per_level() -> None:
    tr = IncidentTracker()
    tr.update([oom(confidence=0.5, occurrences=2)], service="gemma")
    ev = tr.update([oom(confidence=0.9, occurrences=2)], service="gemma")
    assert [e.kind for e in ev] == ["escalated"] and "0.50 -> 0.90" in ev[0].reason
    assert tr.update([oom(confidence=0.9, occurrences=2)], service="gemma") == []
    ev = tr.update([oom(confidence=0.9, occurrences=10)], service="gemma")
    assert [e.kind for e in ev] == ["escalated"] and "10 occurrences" in ev[0].reason
    assert tr.update([oom(confidence=0.9, occurrences=10)], service="gemma") == []


def test_same_category_with_a_new_leading_line_continues_the_open_incident() -> None:
    tr = IncidentTracker()
    tr.update([oom(OOM_1)], service="gemma")
    other = oom("RuntimeError: CUDA error: out of memory while loading shard 3 of 5")
    assert tr.update([other], service="gemma") == []
    assert len(tr.state.incidents) == 1


def test_recurrence_after_resolution_is_new_again_and_two_incidents_are_independent() -> None:
    tr = IncidentTracker(quiet_cycles=1)
    tr.update([oom()], service="gemma")
    assert [e.kind for e in tr.update([], service="gemma")] == ["resolved"]
    ev = tr.update([oom()], service="gemma")
    assert [e.kind for e in ev] == ["new"] and ev[0].reason.startswith("recurred")
    assert ev[0].incident.recurrences == 1
    kv = TrackedFinding(category="kv_cache_oom", service="gemma", confidence=0.7, evidence=[KV])
    ev = tr.update([oom(), kv], service="gemma")
    assert [(e.kind, e.incident.category) for e in ev] == [("new", "kv_cache_oom")]
    ev = tr.update([kv], service="gemma")
    assert [(e.kind, e.incident.category) for e in ev] == [("resolved", "weights_oom")]


def test_from_finding_reads_analyzer_json() -> None:
    f = TrackedFinding.from_finding(
        {
            "category": "kv_cache_oom",
            "confidence": 0.9,
            "summary": "s",
            "evidence": [{"line": 3, "text": KV}, {"line": 9, "text": KV}],
        },
        "gemma",
    )
    assert f.occurrences == 2 and f.evidence == [KV, KV]
    assert f.fingerprint == fingerprint("kv_cache_oom", "gemma", [KV])


def test_store_round_trip_survives_restart_and_unreadable_file(tmp_path: Path) -> None:
    store = TrackerStore.for_service(tmp_path, "gemma/4 12b")
    assert store.path.parent == tmp_path / "watch" and "/" not in store.path.name
    tr = IncidentTracker(store.load())
    tr.update([oom()], service="gemma")
    tr.state.since = "2026-11-30T10:00:00Z"
    store.save(tr.state)
    # A new process: the same incident is not new again.
    tr2 = IncidentTracker(store.load())
    assert tr2.state.cycle == 1 and tr2.state.since == "2026-11-30T10:00:00Z"
    assert tr2.update([oom(OOM_2)], service="gemma") == []
    store.path.write_text("{not json", encoding="utf-8")
    assert store.load() == TrackerState()
    assert store.path.with_suffix(".unreadable.json").exists()


def test_touched_incident_stays_open_without_an_event() -> None:
    tr = IncidentTracker(quiet_cycles=1)
    [new] = tr.update([oom()], service="gemma")
    fp = new.incident.fingerprint
    assert tr.update([], service="gemma", touch=[fp]) == []
    assert tr.state.incidents[fp].status == "open"
    assert [e.kind for e in tr.update([], service="gemma")] == ["resolved"]
    assert (
        TrackedFinding.from_finding({"category": "startup_timeout", "specific": False}, "g").specific is False
    )


def test_a_burst_of_the_same_error_escalates_from_real_analyzer_findings() -> None:
    """Occurrences come from every matching log line the analyzer saw, not from the few it cites."""
    from graph.analyzers import run_analyzers
    from graph.observation import Observation
    from mcp_tools.incident import LogLine

    def cycle_findings(n_errors: int) -> list[TrackedFinding]:
        lines = [LogLine(text="INFO: 10.0.0.1 - POST /v1/chat/completions 200 OK")] * 5
        lines += [
            LogLine(
                severity="ERROR",
                text="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            )
        ] * n_errors
        found = run_analyzers(Observation(logs=lines, source="test"))
        return [
            TrackedFinding.from_finding(f.model_dump(), "svc", [ln.message for ln in lines]) for f in found
        ]

    first = cycle_findings(3)
    assert first and max(f.occurrences for f in first) == 3
    tracker = IncidentTracker()
    assert [e.kind for e in tracker.update(first, service="svc")] == ["new"]
    burst = cycle_findings(40)
    assert max(f.occurrences for f in burst) == 40  # more than any evidence list holds
    assert "escalated" in [e.kind for e in tracker.update(burst, service="svc")]
