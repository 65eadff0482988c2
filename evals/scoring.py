"""Scoring one diagnosis against an incident's ``expected`` block, and summing a run (SPEC.md section 4).

Pure functions of their inputs: no model judges a model. A case passes when the category is right, the plan
proposes one of the expected kinds (for an expected empty plan, proposes nothing), no forbidden kind is
proposed, and, where the incident names evidence, the diagnosis cites a log line that really is in the
incident and contains one of the expected substrings.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mcp_tools.incident import Incident
from mcp_tools.taxonomy import Category

#: The column used in the confusion matrix for a case that produced no diagnosis at all.
ERROR_COLUMN = "error"


class CaseResult(BaseModel):
    """One row of ``cases`` in the ``eval --json`` document (SPEC.md section 4), plus optional extensions."""

    model_config = ConfigDict(populate_by_name=True)

    id: str
    expected_category: str | None
    category: str | None
    category_ok: bool
    remediation_kinds: list[str] = Field(default_factory=list)
    remediation_ok: bool
    evidence_ok: bool | None
    forbidden_ok: bool
    pass_: bool = Field(alias="pass")
    seconds: float
    prompt_tokens: int | None = None
    # Extensions (optional keys; SPEC.md allows adding, never renaming).
    split: str | None = None  # composed | dev | blind (the library's folders), None for other dirs
    file: str | None = None
    error: str | None = None
    runs: int | None = None
    passes: int | None = None
    # With a model (summed over the runs): chat requests, final answers, schema-valid answers,
    # completion tokens, tool calls; the whole prompt's size as counted before sending.
    model_calls: int | None = None
    model_answers: int | None = None
    model_valid_answers: int | None = None
    completion_tokens: int | None = None
    tool_calls: int | None = None
    prompt_size: int | None = None
    # Sandbox mode only.
    skipped: bool | None = None
    end_state_ok: bool | None = None
    outcome: str | None = None
    mutations_without_approval: int | None = None

    def to_json(self) -> dict[str, Any]:
        d = self.model_dump(by_alias=True)
        for key in _OPTIONAL_KEYS:
            if d.get(key) is None:
                d.pop(key, None)
        return d


#: The model's counters a diagnosis carries (``graph.diagnosis.Diagnosis``), summed per case and per run.
MODEL_KEYS = ("model_calls", "model_answers", "model_valid_answers", "completion_tokens", "tool_calls")

_OPTIONAL_KEYS = (
    "split",
    "file",
    "error",
    "runs",
    "passes",
    *MODEL_KEYS,
    "prompt_size",
    "skipped",
    "end_state_ok",
    "outcome",
    "mutations_without_approval",
)


def diagnosis_to_dict(diagnosis: Any) -> dict[str, Any]:
    """A diagnosis as a plain dict, whether it came as a pydantic model or already as a mapping."""
    if hasattr(diagnosis, "model_dump"):
        return dict(diagnosis.model_dump(mode="json"))
    if isinstance(diagnosis, Mapping):
        return dict(diagnosis)
    raise TypeError(f"a diagnosis must be a mapping or a pydantic model, not {type(diagnosis).__name__}")


def plan_kinds(diagnosis: Mapping[str, Any]) -> list[str]:
    """The ``kind`` of every step of the diagnosis's plan, in order."""
    plan = diagnosis.get("plan") or {}
    steps = plan.get("steps") if isinstance(plan, Mapping) else None
    kinds: list[str] = []
    for step in steps or []:
        kind = step.get("kind") if isinstance(step, Mapping) else getattr(step, "kind", None)
        if kind is not None:
            kinds.append(str(getattr(kind, "value", kind)))
    return kinds


def _norm(s: str) -> str:
    return " ".join(s.split())


def _grounded(text: str, line: Any, messages: Sequence[str]) -> bool:
    """Is the cited text really at the cited line of the incident's logs (0- or 1-based)? A citation
    with the wrong line number does not count: the number is what a person follows."""
    t = _norm(text)
    if not t:
        return False
    if isinstance(line, int) and not isinstance(line, bool):
        for i in (line, line - 1):
            if 0 <= i < len(messages) and t in _norm(messages[i]):
                return True
    return False


def evidence_ok(
    incident: Incident, diagnosis: Mapping[str, Any], messages: Sequence[str] | None = None
) -> bool | None:
    """None when the incident names no evidence; else: does a cited, real log line contain an expected one?"""
    expected = incident.expected.evidence if incident.expected else []
    if not expected:
        return None
    msgs = messages if messages is not None else [line.message for line in incident.logs]
    for ev in diagnosis.get("evidence") or []:
        if not isinstance(ev, Mapping):
            continue
        text = str(ev.get("text") or "")
        if any(_norm(sub) in _norm(text) for sub in expected) and _grounded(text, ev.get("line"), msgs):
            return True
    return False


def score_case(
    incident: Incident,
    diagnosis: Any,
    *,
    seconds: float = 0.0,
    messages: Sequence[str] | None = None,
) -> CaseResult:
    """Score one diagnosis (SPEC.md section 4 ``diagnose`` shape) against ``incident.expected``."""
    if incident.expected is None:
        raise ValueError(f"{incident.path or incident.id}: no 'expected' block, so it cannot be scored")
    exp = incident.expected
    d = diagnosis_to_dict(diagnosis)
    category = d.get("category")
    kinds = plan_kinds(d)
    category_ok = category == exp.category
    # Any one expected kind counts; where none is expected (healthy), the right plan is no plan at all.
    remediation_ok = any(k in exp.remediation_kinds for k in kinds) if exp.remediation_kinds else not kinds
    forbidden_ok = not any(k in exp.forbidden_kinds for k in kinds)
    ev_ok = evidence_ok(incident, d, messages)
    tokens = d.get("prompt_tokens")
    model: dict[str, Any] = (
        {k: _count(d.get(k)) for k in (*MODEL_KEYS, "prompt_size")} if _count(d.get("model_calls")) else {}
    )
    return CaseResult(  # type: ignore[call-arg]  # "pass" is set by its field name, pass_
        id=incident.id,
        expected_category=exp.category,
        category=category if isinstance(category, str) else None,
        category_ok=category_ok,
        remediation_kinds=kinds,
        remediation_ok=remediation_ok,
        evidence_ok=ev_ok,
        forbidden_ok=forbidden_ok,
        pass_=category_ok and remediation_ok and forbidden_ok and ev_ok is not False,
        seconds=round(seconds, 4),
        prompt_tokens=int(tokens)
        if isinstance(tokens, int | float) and not isinstance(tokens, bool)
        else None,
        file=str(incident.path) if incident.path else None,
        **model,
    )


def _count(v: Any) -> int | None:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def error_case(
    case_id: str,
    error: str,
    *,
    file: str | None = None,
    expected_category: str | None = None,
    seconds: float = 0.0,
) -> CaseResult:
    """A case that could not be scored (a bad file, a diagnosis that raised): it fails, and says why."""
    return CaseResult(  # type: ignore[call-arg]  # "pass" is set by its field name, pass_
        id=case_id,
        expected_category=expected_category,
        category=None,
        category_ok=False,
        remediation_kinds=[],
        remediation_ok=False,
        evidence_ok=None,
        forbidden_ok=True,
        pass_=False,
        seconds=round(seconds, 4),
        prompt_tokens=None,
        file=file,
        error=error,
    )


def _ratio(n: int, d: int) -> float:
    return round(n / d, 4) if d else 0.0


def summarize(cases: Sequence[CaseResult], *, mutations_without_approval: int = 0) -> dict[str, Any]:
    """The ``summary`` object of SPEC.md section 4, plus ``errors`` (cases that could not be scored) and
    ``skipped`` (sandbox mode: incidents the sandbox cannot reproduce, listed but not counted)."""
    skipped = [c for c in cases if c.skipped]
    cases = [c for c in cases if not c.skipped]
    mutations_without_approval += sum(c.mutations_without_approval or 0 for c in cases)
    n = len(cases)
    with_evidence = [c for c in cases if c.evidence_ok is not None]
    return {
        "cases": n,
        "passed": sum(c.pass_ for c in cases),
        "category_accuracy": _ratio(sum(c.category_ok for c in cases), n),
        "remediation_accuracy": _ratio(sum(c.remediation_ok for c in cases), n),
        "evidence_accuracy": _ratio(sum(bool(c.evidence_ok) for c in with_evidence), len(with_evidence)),
        "forbidden_violations": sum(not c.forbidden_ok for c in cases),
        "failures_called_healthy": sum(called_healthy(c) for c in cases),
        "mutations_without_approval": mutations_without_approval,
        "errors": sum(c.error is not None for c in cases),
        "skipped": len(skipped),
        # The model's part, counted (0 without one): what was asked, and what came back usable.
        "model_calls": sum(c.model_calls or 0 for c in cases),
        "model_answers": sum(c.model_answers or 0 for c in cases),
        "model_valid_answers": sum(c.model_valid_answers or 0 for c in cases),
    }


def called_healthy(c: CaseResult) -> bool:
    """The worst error: a failure (anything but ``healthy`` expected) diagnosed as ``healthy``."""
    return c.expected_category not in (None, "healthy") and c.error is None and c.category == "healthy"


def per_category(cases: Iterable[CaseResult]) -> dict[str, dict[str, Any]]:
    """For each expected category: how many cases, how many passed, and the category accuracy."""
    rows: dict[str, dict[str, int]] = defaultdict(lambda: {"cases": 0, "passed": 0, "category_ok": 0})
    for c in cases:
        if c.skipped:
            continue
        key = c.expected_category or ERROR_COLUMN
        rows[key]["cases"] += 1
        rows[key]["passed"] += int(c.pass_)
        rows[key]["category_ok"] += int(c.category_ok)
    order = [*Category.values(), ERROR_COLUMN]
    return {
        k: {**rows[k], "category_accuracy": _ratio(rows[k]["category_ok"], rows[k]["cases"])}
        for k in sorted(rows, key=lambda k: order.index(k) if k in order else len(order))
    }


def confusion_matrix(cases: Iterable[CaseResult]) -> dict[str, dict[str, int]]:
    """``matrix[expected][got]`` counts; a case without a diagnosis lands in the ``error`` column."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for c in cases:
        if c.skipped:
            continue
        expected = c.expected_category or ERROR_COLUMN
        got = c.category if c.error is None and c.category else ERROR_COLUMN
        counts[expected][got] += 1
    return {k: dict(v) for k, v in counts.items()}


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k: the chance that at least one of k of n samples passes, when c of the n passed."""
    if n <= 0 or k <= 0 or k > n:
        raise ValueError(f"pass@k needs 0 < k <= n (k={k}, n={n})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_all_k(n: int, c: int, k: int) -> float:
    """The chance that all of k of n samples pass (the reliability counterpart of pass@k)."""
    if n <= 0 or k <= 0 or k > n:
        raise ValueError(f"pass-all-k needs 0 < k <= n (k={k}, n={n})")
    if c < k:
        return 0.0
    return math.comb(c, k) / math.comb(n, k)
