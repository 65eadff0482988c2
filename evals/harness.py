"""The eval harness: replay a directory of incidents through the diagnosis and score every case.

``replay`` diagnoses from each incident file alone (logs, metrics, service spec), with no sandbox
and, unless a model is given, no model. A bad incident file becomes a failing case that names the
file and the key; the rest still run. Pass or fail is decided by :mod:`evals.scoring`, never by a model.

Use from code::

    from evals.harness import run_eval
    result = run_eval("evals/incidents")          # replay, deterministic analyzers only
    print(result.summary["passed"], "/", result.summary["cases"])
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from evals import scoring
from evals.scoring import MODEL_KEYS, CaseResult
from mcp_tools.errors import UserError
from mcp_tools.incident import Incident, load_incident_dir

log = logging.getLogger(__name__)

Mode = Literal["replay", "sandbox"]
#: ``diagnose(incident, model=...)`` -> the SPEC.md section 4 ``diagnose`` shape (dict or pydantic model).
DiagnoseFn = Callable[..., Any]

LIBRARY_DIR = Path(__file__).resolve().parent / "incidents"
#: The real corpus: log lines copied verbatim from public sources, split by ``evals.tools.split``.
REAL_DIR = Path(__file__).resolve().parent / "real"
#: The library's parts, reported apart: composed incidents, and the real corpus's dev and blind splits.
SPLITS: dict[str, Path] = {"composed": LIBRARY_DIR, "dev": REAL_DIR / "dev", "blind": REAL_DIR / "blind"}
SPLIT_CHOICES = ("all", "composed", "dev", "blind", "real")


def split_dirs(split: str) -> list[tuple[str, Path]]:
    """The (split, folder) pairs ``--split`` names."""
    if split not in SPLIT_CHOICES:
        raise UserError(f"--split must be one of {', '.join(SPLIT_CHOICES)}, not {split!r}")
    if split == "all":
        return list(SPLITS.items())
    if split == "real":
        return [("dev", SPLITS["dev"]), ("blind", SPLITS["blind"])]
    return [(split, SPLITS[split])]


class EvalResult(BaseModel):
    """Everything one run produced. ``to_json()`` is the ``eval --json`` document (SPEC.md section 4)."""

    mode: Mode = "replay"
    repeat: int = 1
    incidents_dir: str
    cases: list[CaseResult] = Field(default_factory=list)
    summary: dict[str, Any] = Field(default_factory=dict)
    per_category: dict[str, dict[str, Any]] = Field(default_factory=dict)
    confusion: dict[str, dict[str, int]] = Field(default_factory=dict)
    splits: dict[str, dict[str, Any]] = Field(default_factory=dict)  # per split: its own summary
    seconds: float = 0.0
    warnings: list[str] = Field(default_factory=list)  # e.g. a model given that never answered

    @property
    def all_passed(self) -> bool:
        scored = [c for c in self.cases if not c.skipped]
        return bool(scored) and all(c.pass_ for c in scored)

    def to_json(self) -> dict[str, Any]:
        # ``cases`` and ``summary`` are the SPEC shape; the other keys are optional extensions.
        return {
            "cases": [c.to_json() for c in self.cases],
            "summary": self.summary,
            "per_category": self.per_category,
            "confusion": self.confusion,
            "splits": self.splits,
            "mode": self.mode,
            "repeat": self.repeat,
            "warnings": self.warnings,
        }


def load_library(directory: Path | str) -> tuple[list[Incident], list[tuple[Path, str]]]:
    """Every ``*.yaml`` / ``*.yml`` below ``directory``: the good incidents, and (path, error) for the bad."""
    return load_incident_dir(directory)


def load_diagnose() -> DiagnoseFn:
    """The diagnosis the harness scores: ``graph.pipeline.assess_incident`` (diagnose, propose,
    preflight: the loop's own steps)."""
    from graph.pipeline import assess_incident

    return assess_incident


def _diagnose_once(
    diagnose: DiagnoseFn, incident: Incident, model: Any, messages: Sequence[str]
) -> tuple[CaseResult, int | None]:
    started = time.perf_counter()
    try:
        raw = diagnose(incident, model=model)
        diagnosis = scoring.diagnosis_to_dict(raw)
    except Exception as e:  # one broken case must not stop the run; the case fails and says why
        log.warning("diagnosis of %s failed: %s: %s", incident.id, e.__class__.__name__, e)
        return (
            scoring.error_case(
                incident.id,
                f"diagnosis failed: {e.__class__.__name__}: {e}",
                file=str(incident.path) if incident.path else None,
                expected_category=incident.expected.category if incident.expected else None,
                seconds=time.perf_counter() - started,
            ),
            None,
        )
    case = scoring.score_case(incident, diagnosis, seconds=time.perf_counter() - started, messages=messages)
    return case, case.prompt_tokens


def _sandbox_once(incident: Incident, model: Any) -> tuple[CaseResult, int | None]:
    from evals.sandbox_mode import run_sandbox_case

    started = time.perf_counter()
    try:
        case = run_sandbox_case(incident, model=model)
    except Exception as e:  # one broken case must not stop the run
        log.warning("sandbox run of %s failed: %s: %s", incident.id, e.__class__.__name__, e)
        case = scoring.error_case(
            incident.id,
            f"sandbox run failed: {e.__class__.__name__}: {e}",
            file=str(incident.path) if incident.path else None,
            expected_category=incident.expected.category if incident.expected else None,
            seconds=time.perf_counter() - started,
        )
    return case, case.prompt_tokens


def run_cases(
    incidents: Sequence[Incident],
    bad_files: Sequence[tuple[Path, str]],
    diagnose: DiagnoseFn | None,
    *,
    model: Any = None,
    repeat: int = 1,
    mode: str = "replay",
    on_case: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Diagnose and score each incident ``repeat`` times; bad files and unscorable ones become error cases.
    ``on_case`` is told of each scored case as it finishes (progress)."""
    if repeat < 1:
        raise UserError(f"--repeat must be at least 1, not {repeat}")
    cases: list[CaseResult] = [scoring.error_case(p.stem, err, file=str(p)) for p, err in bad_files]
    seen: dict[str, Path | None] = {}
    for inc in incidents:
        file = str(inc.path) if inc.path else None
        if inc.id in seen:
            cases.append(
                scoring.error_case(
                    inc.id, f"{file}: duplicate id '{inc.id}' (also in {seen[inc.id]})", file=file
                )
            )
            continue
        seen[inc.id] = inc.path
        if inc.expected is None:
            cases.append(
                scoring.error_case(
                    inc.id, f"{file}: missing required key 'expected' (needed to score)", file=file
                )
            )
            continue
        if mode == "sandbox":
            runs = [_sandbox_once(inc, model) for _ in range(repeat)]
        else:
            assert diagnose is not None
            messages = [line.message for line in inc.logs]
            runs = [_diagnose_once(diagnose, inc, model, messages) for _ in range(repeat)]
        if runs[0][0].skipped:
            cases.append(runs[0][0])
            continue
        first = runs[0][0]
        if repeat > 1:
            tokens = [t for _, t in runs if t is not None]
            spent = {
                k: sum(getattr(c, k) or 0 for c, _ in runs)
                for k in MODEL_KEYS
                if any(getattr(c, k) is not None for c, _ in runs)
            }
            first = first.model_copy(
                update={
                    **spent,
                    "runs": repeat,
                    "passes": sum(c.pass_ for c, _ in runs),
                    "prompt_tokens": round(sum(tokens) / len(tokens)) if tokens else None,
                    "seconds": round(sum(c.seconds for c, _ in runs) / repeat, 4),
                }
            )
        cases.append(first)
        if on_case is not None:
            on_case(first)
    return cases


def _repeat_summary(
    cases: Sequence[CaseResult], repeat: int, *, model_silent: bool = False
) -> dict[str, Any]:
    """Prompt tokens per incident and, over ``repeat`` runs, pass@k; not when a model was asked and
    never answered (``model_silent``): the runs would only repeat the analyzers."""
    scored = [c for c in cases if c.error is None and c.runs]
    tokens = [c.prompt_tokens for c in cases if c.prompt_tokens is not None]
    out: dict[str, Any] = {
        "prompt_tokens_per_incident": round(sum(tokens) / len(tokens), 1) if tokens else None,
    }
    if repeat > 1 and not model_silent:
        n = len(cases)
        out.update(
            {
                "pass_at_1": round(sum(scoring.pass_at_k(repeat, c.passes or 0, 1) for c in scored) / n, 4)
                if n
                else 0.0,
                f"pass_at_{repeat}": round(
                    sum(scoring.pass_at_k(repeat, c.passes or 0, repeat) for c in scored) / n, 4
                )
                if n
                else 0.0,
                f"pass_all_{repeat}": round(
                    sum(scoring.pass_all_k(repeat, c.passes or 0, repeat) for c in scored) / n, 4
                )
                if n
                else 0.0,
            }
        )
    return out


def run_eval(
    incidents_dir: Path | str | None = None,
    *,
    mode: str = "replay",
    model: Any = None,
    repeat: int = 1,
    diagnose: DiagnoseFn | None = None,
    split: str = "all",
    on_case: Callable[[CaseResult], None] | None = None,
) -> EvalResult:
    """Replay a directory of incidents (default: the library's ``split``) and score every case
    (``on_case``: told of each case as it finishes)."""
    if mode not in ("replay", "sandbox"):
        raise UserError(f"--mode must be 'replay' or 'sandbox', not {mode!r}")
    if mode == "sandbox" and diagnose is not None:
        raise UserError(
            "--diagnose applies to replay only: sandbox mode runs the agent graph's own diagnosis"
        )
    if repeat < 1:
        raise UserError(f"--repeat must be at least 1, not {repeat}")
    parts = [("", Path(incidents_dir))] if incidents_dir is not None else split_dirs(split)
    started = time.perf_counter()
    fn = None if mode == "sandbox" else (diagnose if diagnose is not None else load_diagnose())
    cases: list[CaseResult] = []
    for name, directory in parts:
        if not name and not directory.is_dir():
            raise UserError(f"{directory}: not a directory of incident files")
        if name and not directory.is_dir():
            continue  # a split with no folder here (a trimmed install): nothing to run
        incidents, bad = load_library(directory)
        found = run_cases(incidents, bad, fn, model=model, repeat=repeat, mode=mode, on_case=on_case)
        label = name or _split_of_dir(directory)
        cases += [c.model_copy(update={"split": label}) for c in found] if label else found
    if not cases:
        where = ", ".join(str(d) for _, d in parts)
        raise UserError(f"{where}: no incident files (*.yaml, *.yml) found")
    directory = parts[0][1] if len(parts) == 1 else parts[0][1].parent
    summary = scoring.summarize(cases)  # replay never touches a service; sandbox cases count their journal
    warnings: list[str] = []
    silent = model is not None and not summary["model_valid_answers"]
    if silent:
        warnings.append(
            f"the model was given but no usable answer came back ({summary['model_calls']} model calls, "
            f"{summary['model_answers']} answers, none valid): these are the analyzers' figures"
            + ("; pass@k is not reported" if repeat > 1 else "")
        )
    summary.update(_repeat_summary(cases, repeat, model_silent=silent))
    by_split: dict[str, list[CaseResult]] = {}
    for c in cases:
        if c.split:
            by_split.setdefault(c.split, []).append(c)
    return EvalResult(
        mode="sandbox" if mode == "sandbox" else "replay",
        repeat=repeat,
        incidents_dir=str(directory),
        cases=cases,
        summary=summary,
        per_category=scoring.per_category(cases),
        confusion=scoring.confusion_matrix(cases),
        splits={k: scoring.summarize(v) for k, v in by_split.items()},
        seconds=round(time.perf_counter() - started, 3),
        warnings=warnings,
    )


def _split_of_dir(directory: Path) -> str | None:
    """``dev`` / ``blind`` for a folder of the real corpus given by path, else None."""
    return directory.name if directory.name in ("dev", "blind") and directory.parent.name == "real" else None
