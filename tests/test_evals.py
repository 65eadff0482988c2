"""The eval harness: scoring on hand-built diagnoses, bad files as error cases, CLI JSON and exit codes."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from evals.harness import LIBRARY_DIR, load_library, run_cases, run_eval
from evals.report import markdown_report
from evals.scoring import (
    confusion_matrix,
    error_case,
    pass_all_k,
    pass_at_k,
    per_category,
    score_case,
    summarize,
)
from mcp_tools.errors import UserError
from mcp_tools.incident import Incident, parse_incident

SPEC_CASE_KEYS = {
    "id", "expected_category", "category", "category_ok", "remediation_kinds", "remediation_ok",
    "evidence_ok", "forbidden_ok", "pass", "seconds", "prompt_tokens",
}  # fmt: skip
SPEC_SUMMARY_KEYS = {
    "cases", "passed", "category_accuracy", "remediation_accuracy", "evidence_accuracy",
    "forbidden_violations", "mutations_without_approval",
}  # fmt: skip

OOM_LINE = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 240.00 MiB."


def _incident(**expected: Any) -> Incident:
    exp = {"category": "weights_oom", "remediation_kinds": ["set_model", "set_vllm_args"]}
    exp.update(expected)
    return parse_incident(
        {
            "id": "t-oom",
            "title": "test",
            "logs": [
                {"severity": "INFO", "text": "vLLM API server version 0.11.0"},
                {"severity": "ERROR", "text": OOM_LINE},
                {"severity": "WARNING", "text": "Container called exit(1)."},
            ],
            "expected": exp,
        },
        "t-oom.yaml",
    )


def _diag(
    category: str = "weights_oom", kinds: tuple[str, ...] = ("set_model",), evidence: Any = None
) -> dict:
    ev = [{"line": 1, "text": OOM_LINE}] if evidence is None else evidence
    return {
        "id": "t-oom",
        "category": category,
        "confidence": 0.9,
        "summary": "s",
        "evidence": ev,
        "plan": {"steps": [{"kind": k, "change": {}, "why": "w"} for k in kinds], "preflight": {"ok": True}},
    }


# --- scoring ---------------------------------------------------------------------------------------


def test_right_diagnosis_passes() -> None:
    c = score_case(
        _incident(evidence=["CUDA out of memory"], forbidden_kinds=["restart"]), _diag(), seconds=0.25
    )
    assert (c.category_ok, c.remediation_ok, c.evidence_ok, c.forbidden_ok, c.pass_) == (
        True,
        True,
        True,
        True,
        True,
    )
    assert c.remediation_kinds == ["set_model"]
    assert c.seconds == 0.25 and c.prompt_tokens is None
    assert set(c.to_json()) >= SPEC_CASE_KEYS and c.to_json()["pass"] is True


def test_wrong_category_fails_even_with_a_good_plan() -> None:
    c = score_case(_incident(), _diag(category="engine_crash"))
    assert c.category_ok is False and c.remediation_ok is True and c.pass_ is False
    assert c.category == "engine_crash" and c.expected_category == "weights_oom"


def test_any_one_expected_kind_counts_and_other_kinds_do_not() -> None:
    assert score_case(_incident(), _diag(kinds=("escalate", "set_vllm_args"))).remediation_ok is True
    wrong = score_case(_incident(), _diag(kinds=("set_resources",)))
    assert wrong.remediation_ok is False and wrong.pass_ is False


def test_forbidden_kind_fails_the_case() -> None:
    c = score_case(_incident(forbidden_kinds=["restart"]), _diag(kinds=("set_model", "restart")))
    assert c.remediation_ok is True and c.forbidden_ok is False and c.pass_ is False
    assert summarize([c])["forbidden_violations"] == 1


def test_missing_evidence_fails_and_no_expected_evidence_is_null() -> None:
    inc = _incident(evidence=["CUDA out of memory"])
    missing = score_case(inc, _diag(evidence=[]))
    assert missing.evidence_ok is False and missing.pass_ is False
    unrelated = score_case(inc, _diag(evidence=[{"line": 0, "text": "vLLM API server version 0.11.0"}]))
    assert unrelated.evidence_ok is False
    none_expected = score_case(_incident(), _diag(evidence=[]))
    assert none_expected.evidence_ok is None and none_expected.pass_ is True
    assert summarize([none_expected])["evidence_accuracy"] == 0.0  # no case with evidence: nothing to average


def test_cited_evidence_must_really_be_in_the_logs() -> None:
    inc = _incident(evidence=["CUDA out of memory"])
    made_up = [{"line": 1, "text": "RuntimeError: CUDA out of memory while loading (invented)"}]
    assert score_case(inc, _diag(evidence=made_up)).evidence_ok is False
    one_based = [{"line": 2, "text": OOM_LINE}]
    assert score_case(inc, _diag(evidence=one_based)).evidence_ok is True
    # real text, wrong line number: a person following the citation finds another line, so it fails
    wrong_index_but_real = [{"line": 0, "text": "CUDA out of memory. Tried to allocate 240.00 MiB."}]
    assert score_case(inc, _diag(evidence=wrong_index_but_real)).evidence_ok is False


def test_healthy_needs_an_empty_plan() -> None:
    inc = _incident(category="healthy", remediation_kinds=[], forbidden_kinds=["restart", "set_scaling"])
    assert score_case(inc, _diag(category="healthy", kinds=(), evidence=[])).pass_ is True
    acting = score_case(inc, _diag(category="healthy", kinds=("escalate",), evidence=[]))
    assert acting.remediation_ok is False and acting.forbidden_ok is True and acting.pass_ is False
    restarting = score_case(inc, _diag(category="healthy", kinds=("restart",), evidence=[]))
    assert restarting.forbidden_ok is False


def test_pydantic_diagnosis_and_prompt_tokens_are_accepted() -> None:
    class Step(BaseModel):
        kind: str
        change: dict = {}
        why: str = ""

    class Plan(BaseModel):
        steps: list[Step]

    class Diagnosis(BaseModel):
        id: str
        category: str
        evidence: list[dict]
        plan: Plan
        prompt_tokens: int | None = None

    d = Diagnosis(
        id="t-oom", category="weights_oom", evidence=[{"line": 1, "text": OOM_LINE}],
        plan=Plan(steps=[Step(kind="set_vllm_args")]), prompt_tokens=1234,
    )  # fmt: skip
    c = score_case(_incident(evidence=["CUDA out of memory"]), d)
    assert c.pass_ is True and c.prompt_tokens == 1234


def test_summary_matrix_and_per_category() -> None:
    inc = _incident(evidence=["CUDA out of memory"])
    cases = [
        score_case(inc, _diag()),
        score_case(inc, _diag(category="runtime_oom", evidence=[])),
        error_case("bad", "bad.yaml: missing required key 'title'", file="bad.yaml"),
    ]
    s = summarize(cases, mutations_without_approval=0)
    assert set(s) >= SPEC_SUMMARY_KEYS
    assert s["cases"] == 3 and s["passed"] == 1 and s["errors"] == 1
    assert s["category_accuracy"] == pytest.approx(1 / 3, abs=1e-3)
    assert s["evidence_accuracy"] == 0.5  # two cases name evidence; the error case names none
    assert confusion_matrix(cases) == {
        "weights_oom": {"weights_oom": 1, "runtime_oom": 1},
        "error": {"error": 1},
    }
    pc = per_category(cases)
    assert pc["weights_oom"] == {"cases": 2, "passed": 1, "category_ok": 1, "category_accuracy": 0.5}
    assert list(pc) == ["weights_oom", "error"]


def test_pass_at_k_and_pass_all_k() -> None:
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 5) == 1.0 and pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_all_k(5, 5, 5) == 1.0 and pass_all_k(5, 4, 5) == 0.0
    assert pass_all_k(5, 4, 2) == pytest.approx(0.6)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


# --- harness ---------------------------------------------------------------------------------------


@functools.cache
def _library(folder: Path) -> tuple[list[Incident], list[tuple[Path, str]]]:
    """``load_library(folder)``, read once for the module (the composed library: half a second)."""
    return load_library(folder)


def _write(d: Path, name: str, text: str) -> Path:
    p = d / name
    p.write_text(text, encoding="utf-8")
    return p


@pytest.fixture
def mixed_dir(tmp_path: Path) -> Path:
    for name in ("l4-gemma4-12b-bf16-weights-oom.yaml", "l4-gemma4-12b-qat-healthy.yaml"):
        _write(tmp_path, name, (LIBRARY_DIR / name).read_text(encoding="utf-8"))
    _write(tmp_path, "no-title.yaml", "id: no-title\nlogs: []\nexpected: {category: healthy}\n")
    _write(tmp_path, "broken.yaml", "id: broken\ntitle: [unclosed\n")
    _write(
        tmp_path,
        "bad-kind.yml",
        "id: bad-kind\ntitle: t\nlogs: []\nexpected: {category: healthy, forbidden_kinds: [delete]}\n",
    )
    return tmp_path


def test_a_malformed_file_is_an_error_case_and_the_others_still_score(mixed_dir: Path) -> None:
    from eval_diagnosers import oracle

    result = run_eval(mixed_dir, diagnose=oracle)
    by_id = {c.id: c for c in result.cases}
    assert by_id["l4-gemma4-12b-bf16-weights-oom"].pass_ is True
    assert by_id["l4-gemma4-12b-qat-healthy"].pass_ is True
    assert "no-title.yaml" in (by_id["no-title"].error or "") and "'title'" in (by_id["no-title"].error or "")
    assert "not valid YAML at line" in (by_id["broken"].error or "")
    assert "expected.forbidden_kinds" in (by_id["bad-kind"].error or "")
    assert result.summary["cases"] == 5 and result.summary["passed"] == 2 and result.summary["errors"] == 3
    assert not result.all_passed
    assert result.confusion["error"] == {"error": 3}
    md = markdown_report(result)
    assert "## Confusion matrix" in md and "| no-title | - | - |" in md and "2/5" in md


def test_a_diagnosis_that_raises_fails_only_its_case(tmp_path: Path) -> None:
    from eval_diagnosers import oracle

    good, bad = _library(LIBRARY_DIR)
    calls: list[str] = []

    def flaky(incident: Incident, *, model: Any = None) -> dict:
        calls.append(incident.id)
        if incident.id == good[0].id:
            raise RuntimeError("analyzer crashed")
        return oracle(incident, model=model)

    cases = run_cases(good[:3], bad, flaky)
    assert len(calls) == 3
    assert cases[0].error == "diagnosis failed: RuntimeError: analyzer crashed" and cases[0].pass_ is False
    assert cases[0].expected_category == good[0].expected.category  # type: ignore[union-attr]
    assert all(c.pass_ for c in cases[1:])


def test_duplicate_ids_and_missing_expected_are_error_cases(tmp_path: Path) -> None:
    from eval_diagnosers import oracle

    body = "title: t\nlogs: [{severity: ERROR, text: boom}]\n"
    _write(
        tmp_path,
        "a.yaml",
        "id: same\n" + body + "expected: {category: unknown, remediation_kinds: [escalate]}\n",
    )
    _write(
        tmp_path,
        "b.yaml",
        "id: same\n" + body + "expected: {category: unknown, remediation_kinds: [escalate]}\n",
    )
    _write(tmp_path, "c.yaml", "id: no-expected\n" + body)
    result = run_eval(tmp_path, diagnose=oracle)
    errors = sorted(c.error or "" for c in result.cases if c.error)
    assert len(errors) == 2
    assert "duplicate id 'same'" in errors[0] and "missing required key 'expected'" in errors[1]


def test_repeat_reports_pass_at_k(tmp_path: Path) -> None:
    from eval_diagnosers import oracle

    _write(tmp_path, "x.yaml", (LIBRARY_DIR / "cr-image-tag-not-found.yaml").read_text(encoding="utf-8"))
    flips = iter([True, False, True])

    def sometimes(incident: Incident, *, model: Any = None) -> dict:
        d = oracle(incident, model=model)
        if not next(flips):
            d["category"] = "unknown"
        d["prompt_tokens"] = 1000
        return d

    result = run_eval(tmp_path, diagnose=sometimes, repeat=3)
    (case,) = result.cases
    assert case.runs == 3 and case.passes == 2 and case.prompt_tokens == 1000
    assert result.summary["pass_at_1"] == pytest.approx(2 / 3, abs=1e-3)
    assert result.summary["pass_at_3"] == 1.0 and result.summary["pass_all_3"] == 0.0
    assert result.summary["prompt_tokens_per_incident"] == 1000


def test_bad_harness_input_is_a_user_error(tmp_path: Path) -> None:
    from eval_diagnosers import oracle

    with pytest.raises(UserError, match="not a directory"):
        run_eval(tmp_path / "nope", diagnose=oracle)
    with pytest.raises(UserError, match="no incident files"):
        run_eval(tmp_path, diagnose=oracle)
    with pytest.raises(UserError, match="--repeat"):
        run_eval(LIBRARY_DIR, diagnose=oracle, repeat=0)
    with pytest.raises(UserError, match="--mode"):
        run_eval(LIBRARY_DIR, diagnose=oracle, mode="live")


def test_sandbox_mode_takes_no_alternative_diagnoser() -> None:
    from eval_diagnosers import oracle

    with pytest.raises(UserError, match="--diagnose applies to replay only"):
        run_eval(LIBRARY_DIR, diagnose=oracle, mode="sandbox")


# --- the CLI ---------------------------------------------------------------------------------------


def _cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    from agent.cli import main

    monkeypatch.setattr(sys, "argv", ["gemma-sre", "eval", *args])
    with pytest.raises(SystemExit) as e:
        main()
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out, err


def test_cli_json_shape_and_exit_0_when_all_pass(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = tmp_path / "report.md"
    code, out, _ = _cli(
        monkeypatch, capsys, "--diagnose", "eval_diagnosers:oracle", "--json", "--report", str(report)
    )
    assert code == 0
    doc = json.loads(out)  # exactly one JSON document on stdout
    assert set(doc["summary"]) >= SPEC_SUMMARY_KEYS
    assert doc["summary"]["cases"] == len(doc["cases"]) >= 40
    assert doc["summary"]["passed"] == doc["summary"]["cases"]
    assert doc["summary"]["mutations_without_approval"] == 0
    for case in doc["cases"]:
        assert set(case) >= SPEC_CASE_KEYS
        assert isinstance(case["pass"], bool) and isinstance(case["remediation_kinds"], list)
        assert case["prompt_tokens"] is None  # no model was called
    assert "## Per category" in report.read_text(encoding="utf-8")


def test_cli_exit_1_when_a_case_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], mixed_dir: Path
) -> None:
    code, out, _ = _cli(
        monkeypatch, capsys, "--incidents", str(mixed_dir), "--diagnose", "eval_diagnosers:oracle", "--json"
    )
    assert code == 1
    doc = json.loads(out)
    assert doc["summary"]["errors"] == 3 and doc["summary"]["passed"] == 2
    monkeypatch.setenv("COLUMNS", "200")  # rich sizes its tables to the terminal
    code, out, _ = _cli(
        monkeypatch, capsys, "--incidents", str(mixed_dir), "--diagnose", "eval_diagnosers:oracle"
    )
    assert code == 1 and "FAIL" in out and "no-title" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--incidents", "/nonexistent/incidents"], "not a directory"),
        (["--mode", "live"], "--mode must be"),
        (["--repeat", "0"], "Invalid value for '--repeat': 0 is out of range"),
        (["--model-url", "ftp://x"], "Invalid value for '--model-url': 'ftp://x' is not an http(s) URL"),
        (["--diagnose", "nocolon"], "--diagnose must be MODULE:FUNCTION"),
    ],
)
def test_cli_exit_2_on_bad_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    extra = [] if "--diagnose" in args else ["--diagnose", "eval_diagnosers:oracle"]
    code, out, err = _cli(monkeypatch, capsys, *args, *extra, "--json")
    assert code == 2
    assert message in err and "Traceback" not in err
    assert json.loads(out) == {"error": err.removeprefix("error: ").strip(), "exit_code": 2}  # one document


# --- the real diagnosis ----------------------------------------------------------------------------


def test_replay_of_the_whole_library_with_the_real_diagnosis() -> None:
    """Runs once graph.diagnosis has landed: every incident gets a diagnosis (no crash, no error case)."""
    pytest.importorskip("graph.diagnosis", reason="graph.diagnosis.diagnose_incident has not landed yet")
    result = run_eval(LIBRARY_DIR)
    files = [*LIBRARY_DIR.glob("*.yaml"), *LIBRARY_DIR.glob("*.yml")]
    assert result.summary["cases"] == len(files)
    assert [c.error for c in result.cases if c.error] == []
    assert result.summary["mutations_without_approval"] == 0
    for c in result.cases:
        assert c.category is not None and c.prompt_tokens is None  # no model: replay is deterministic


# --- sandbox mode: the whole loop on the local sandbox, judged by end state -----------------------


def test_sandbox_mode_runs_the_loop_and_judges_end_state(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The reference weights OOM gets fixed after the harness's approval, the healthy service is left
    alone, and an image-pull incident (which the sandbox cannot reproduce) is listed as skipped."""
    for name in (
        "l4-gemma4-12b-bf16-weights-oom.yaml",
        "l4-gemma4-12b-qat-healthy.yaml",
        "cr-image-tag-not-found.yaml",
    ):
        _write(tmp_path, name, (LIBRARY_DIR / name).read_text(encoding="utf-8"))
    report = tmp_path / "sandbox.md"
    code, out, err = _cli(monkeypatch, capsys, "--incidents", str(tmp_path), "--mode", "sandbox", "--json",
                          "--report", str(report))  # fmt: skip
    doc = json.loads(out)
    by_id = {c["id"]: c for c in doc["cases"]}
    oom = by_id["l4-gemma4-12b-bf16-weights-oom"]
    assert oom["outcome"] == "fixed" and oom["end_state_ok"] is True and oom["pass"] is True
    assert oom["category"] == "weights_oom" and oom["mutations_without_approval"] == 0
    assert set(oom["remediation_kinds"]) & {"set_model", "set_vllm_args"}
    healthy = by_id["l4-gemma4-12b-qat-healthy"]
    assert healthy["remediation_kinds"] == [] and healthy["end_state_ok"] is True and healthy["pass"] is True
    skipped = by_id["cr-image-tag-not-found"]
    assert skipped["skipped"] is True and "does not simulate image_pull" in skipped["error"]
    assert doc["mode"] == "sandbox"
    assert doc["summary"]["cases"] == 2 and doc["summary"]["passed"] == 2 and doc["summary"]["skipped"] == 1
    assert doc["summary"]["mutations_without_approval"] == 0
    assert code == 0, err
    md = report.read_text(encoding="utf-8")
    assert "## Skipped (1)" in md and "cr-image-tag-not-found" in md


def test_sandbox_journal_counts_unapproved_mutations() -> None:
    """The journal check is real: a PATCH sent without an approval id is counted (and a DELETE too)."""
    from evals.sandbox_mode import _journal
    from sandbox.journal import JournalEntry

    class FakeSandbox:  # only the journal attribute is read
        def __init__(self, entries: list[JournalEntry]) -> None:
            from sandbox.journal import Journal

            self.journal = Journal()
            for e in entries:
                self.journal.record(e)

    res = "projects/p/locations/l/services/s"
    sb = FakeSandbox(
        [
            JournalEntry(method="PATCH", resource=res, time="t", approval="apr-1"),
            JournalEntry(method="PATCH", resource=res, time="t"),
            JournalEntry(method="PATCH", resource=res, time="t", validate_only=True),
            JournalEntry(method="DELETE", resource=res, time="t"),
            JournalEntry(method="POST", resource=res, time="t", status=400),
        ]
    )
    assert _journal(sb) == (3, 2, 1)


# --- with a model: the scripted OpenAI-compatible server, over real HTTP --------------------------


def test_model_url_and_repeat_report_pass_at_k_and_prompt_tokens(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from tests.scripted_openai import ScriptedOpenAI, diagnosis_reply

    name = "l4-gemma4-12b-bf16-weights-oom.yaml"
    _write(tmp_path, name, (LIBRARY_DIR / name).read_text(encoding="utf-8"))
    reply = diagnosis_reply(evidence=[9])
    with ScriptedOpenAI([reply]) as script:
        url = script.root
        code, out, err = _cli(
            monkeypatch, capsys, "--incidents", str(tmp_path), "--model-url", url, "--repeat", "2", "--json"
        )
    doc = json.loads(out)
    (case,) = doc["cases"]
    assert case["runs"] == 2 and isinstance(case["prompt_tokens"], int) and case["prompt_tokens"] > 0
    assert len(script.requests) >= 2  # the model was really asked, once per run
    s = doc["summary"]
    assert {"pass_at_1", "pass_at_2", "pass_all_2"} <= set(s) and s["prompt_tokens_per_incident"] > 0
    assert s["pass_at_2"] >= s["pass_all_2"]
    assert code == (0 if case["pass"] else 1), err
    # the model's part is counted: two runs, one request and one schema-valid answer each
    assert case["model_calls"] == 2 and case["model_valid_answers"] == 2 and case["completion_tokens"] > 0
    assert s["model_calls"] == 2 and s["model_answers"] == 2 and s["model_valid_answers"] == 2
    assert doc["warnings"] == [] and "warning" not in err


def test_a_model_that_never_answers_reports_no_pass_at_k(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An unreachable model used to yield ``pass_at_1: 1.0`` (the analyzers' figure, over "model" runs)."""
    from tests.scripted_openai import free_port

    name = "l4-gemma4-12b-bf16-weights-oom.yaml"
    _write(tmp_path, name, (LIBRARY_DIR / name).read_text(encoding="utf-8"))
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    code, out, err = _cli(
        monkeypatch, capsys, "--incidents", str(tmp_path), "--model-url", url, "--repeat", "2", "--json"
    )
    s = json.loads(out)["summary"]
    assert s["model_calls"] == 0 and s["model_valid_answers"] == 0
    assert not [k for k in s if k.startswith("pass_")], s
    (line,) = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert "no usable answer came back (0 model calls" in line and "pass@k is not reported" in line
    assert code == 0  # the analyzers' diagnosis itself passed


def test_sandbox_mode_keeps_its_state_out_of_the_users_state_dir(tmp_path: Path) -> None:
    """A sandbox-mode case checkpoints, audits and reports in a scratch folder that it removes."""
    from evals.sandbox_mode import run_sandbox_case
    from mcp_tools.incident import load_incident
    from mcp_tools.settings import get_settings

    incident = load_incident(LIBRARY_DIR / "l4-gemma4-12b-bf16-weights-oom.yaml")
    case = run_sandbox_case(incident)
    assert case.pass_ and case.outcome == "fixed", case
    state_dir = get_settings().state_dir
    assert not state_dir.exists() or not any(state_dir.iterdir())


# --- a weak or hostile model never makes the result worse than the analyzers alone ----------------


def _listed_findings(prompt: str) -> dict[str, tuple[float, int]]:
    """The analyzers' findings as the prompt lists them: category -> (confidence, first cited line)."""
    import re

    out: dict[str, tuple[float, int]] = {}
    for cat, conf, cites in re.findall(r"^- (\w+) \(confidence ([0-9.]+), cites ([^)]*)\)", prompt, re.M):
        line = re.search(r"L(\d+)", cites)
        if line and cat not in out:
            out[cat] = (float(conf), int(line.group(1)))
    return out


def _says_unknown(prompt: str) -> dict[str, Any]:
    return {"category": "unknown", "confidence": 0.9, "summary": "Nothing here is clear.", "evidence": []}


def _cites_other_wording(prompt: str) -> dict[str, Any]:
    """Claims, at 0.95, the first family whose wording some log line has and no finding names."""
    import re

    from mcp_tools.records import clean
    from mcp_tools.vocabulary import FAMILY_WORDING

    found = _listed_findings(prompt)
    for n, text in re.findall(r"^L(\d+) (.*)$", prompt, re.M):
        for cat, patterns in FAMILY_WORDING.items():
            if (
                cat not in found
                and cat not in ("healthy", "unknown")
                and any(p.search(clean(text).text) for p in patterns)
            ):
                return {
                    "category": cat,
                    "confidence": 0.95,
                    "summary": "The cited line.",
                    "evidence": [int(n)],
                }
    return _says_unknown(prompt)


def _picks_the_weakest_finding(prompt: str) -> dict[str, Any]:
    found = _listed_findings(prompt)
    if len(found) < 2:
        return _says_unknown(prompt)
    cat = min(found, key=lambda c: found[c][0])
    return {"category": cat, "confidence": 0.95, "summary": "The cited line.", "evidence": [found[cat][1]]}


@functools.cache
def _a_fifth_and_the_analyzers_alone() -> tuple[list[Incident], dict[str, Any]]:
    """A fixed fifth of the composed library and of the real dev split, and the analyzers' answers
    on it (read once for the three hostile models)."""
    from evals.harness import SPLITS, load_diagnose

    incidents = []
    for split in ("composed", "dev"):
        found, _ = _library(SPLITS[split])
        incidents += sorted(found, key=lambda i: str(i.path))[::5]
    return incidents, {c.id: c for c in run_cases(incidents, [], load_diagnose())}


@pytest.mark.slow
@pytest.mark.parametrize("model", [_says_unknown, _cites_other_wording, _picks_the_weakest_finding])
def test_a_hostile_model_never_makes_the_analyzers_worse(model: Any) -> None:
    """Three scripted models that read the prompt and answer schema-valid but wrong on purpose, over a
    fixed fifth of the composed library and of the real dev split: no right answer turns wrong."""
    from evals.harness import load_diagnose
    from mcp_tools.model_endpoint import ModelEndpoint
    from tests.scripted_openai import ScriptedOpenAI

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        prompt = "\n".join(str(m.get("content") or "") for m in body["messages"])
        return {"content": json.dumps(model(prompt))}

    incidents, base = _a_fifth_and_the_analyzers_alone()
    with ScriptedOpenAI([{"respond": respond}], model="hostile") as srv:
        ep = ModelEndpoint(base_url=srv.url, timeout_s=10, max_retries=0)
        with_model = run_cases(incidents, [], load_diagnose(), model=ep)
    assert sum(c.model_valid_answers or 0 for c in with_model) == len(incidents)  # it really answered
    worse = [c.id for c in with_model if base[c.id].category_ok and not c.category_ok]
    assert not worse, worse
