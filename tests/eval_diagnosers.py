"""Diagnosers used to test the eval harness's plumbing (loading, scoring, exit codes, reports).

They stand in for ``graph.diagnosis.diagnose_incident`` only in tests that exercise the harness itself; the
library's real accuracy is measured with the real diagnosis (tests/test_evals.py, benchmarks/eval_replay.py).
"""

from __future__ import annotations

from typing import Any

from mcp_tools.incident import Incident


def oracle(incident: Incident, *, model: Any = None) -> dict[str, Any]:
    """Answers what the incident expects, citing the first real log line carrying the expected evidence."""
    assert incident.expected is not None
    exp = incident.expected
    evidence = []
    for i, line in enumerate(incident.logs):
        if any(sub in line.message for sub in exp.evidence):
            evidence.append({"line": i, "text": line.message})
            break
    steps = (
        [{"kind": exp.remediation_kinds[0], "change": {}, "why": "expected"}] if exp.remediation_kinds else []
    )
    return {
        "id": incident.id,
        "category": exp.category,
        "confidence": 1.0,
        "summary": "oracle",
        "evidence": evidence,
        "plan": {"steps": steps, "preflight": {"ok": True, "notes": []}},
        "prompt_tokens": None,
    }


def always_healthy(incident: Incident, *, model: Any = None) -> dict[str, Any]:
    return {
        "id": incident.id,
        "category": "healthy",
        "confidence": 0.5,
        "summary": "nothing to see",
        "evidence": [],
        "plan": {"steps": [], "preflight": {"ok": True, "notes": []}},
        "prompt_tokens": None,
    }


def boom(incident: Incident, *, model: Any = None) -> dict[str, Any]:
    raise RuntimeError("the diagnosis blew up")
