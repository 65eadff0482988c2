"""The planner against real vLLM start-up figures (tests/data/vllm_startup_cases.yaml).

Targets from the issue: predicted KV-cache tokens within 10% of vLLM's report in at least 8 of 10
cases, weights within 5%. Every figure comes from the table; nothing is tuned per case."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_tools.capacity.accuracy import CaseResult, evaluate, load_cases, summary

TABLE = Path(__file__).parent / "data" / "vllm_startup_cases.yaml"


@pytest.fixture(scope="module")
def results() -> list[CaseResult]:
    return evaluate(TABLE)


def _table(rows: list[CaseResult], attr: str) -> str:
    return "\n".join(f"  {r.id}: {getattr(r, attr)}" for r in rows)


def test_table_has_at_least_ten_real_logs_with_sources() -> None:
    cases = load_cases(TABLE)
    assert len(cases) >= 10
    for c in cases:
        assert c["source"].startswith("https://"), c["id"]
        assert c.get("reported"), c["id"]
    assert len({c["id"] for c in cases}) == len(cases)


def test_weights_within_5_percent(results: list[CaseResult]) -> None:
    rows = [r for r in results if r.weights_error is not None]
    assert len(rows) >= 5
    bad = [r for r in rows if (r.weights_error or 0) > 0.05]
    assert not bad, "weights off by more than 5%:\n" + _table(bad, "weights_error")


def test_kv_cache_tokens_within_10_percent_in_at_least_80_percent(results: list[CaseResult]) -> None:
    rows = [r for r in results if r.kv_tokens_error is not None]
    assert len(rows) >= 5
    good = [r for r in rows if (r.kv_tokens_error or 0) <= 0.10]
    assert len(good) >= 0.8 * len(rows), "KV tokens:\n" + _table(rows, "kv_tokens_error")


def test_end_to_end_target_on_at_least_ten_real_logs(results: list[CaseResult]) -> None:
    """The issue's target on the real table: at least 10 start-ups that state GPU, flags and vLLM's
    KV-token figure; predicted kv_cache_tokens within 10% in at least 8 of 10 (80%) of them, and
    every reported weight figure within 5%."""
    s = summary(results)
    assert s["kv_cases"] >= 10, s
    assert s["kv_within"] >= 0.8 * s["kv_cases"], s
    assert s["weight_cases"] >= 5 and s["weights_within"] == s["weight_cases"], s


def test_kv_budget_within_10_percent(results: list[CaseResult]) -> None:
    rows = [r for r in results if r.available_error is not None]
    assert len(rows) >= 5
    good = [r for r in rows if (r.available_error or 0) <= 0.10]
    assert len(good) >= 0.8 * len(rows), "available KV memory:\n" + _table(rows, "available_error")


def test_kv_layout_from_vllms_own_budget(results: list[CaseResult]) -> None:
    """Given the memory vLLM said it had for the cache, the token count follows vLLM's layout."""
    rows = [r for r in results if r.layout_error is not None]
    assert len(rows) >= 5
    good = [r for r in rows if (r.layout_error or 0) <= 0.02]
    assert len(good) >= 0.8 * len(rows), "layout:\n" + _table(rows, "layout_error")


def test_fit_verdicts_match_where_vllm_said(results: list[CaseResult]) -> None:
    rows = [r for r in results if r.fits_reported is not None]
    assert rows
    for r in rows:
        assert r.fits_predicted == r.fits_reported, r.id


def test_reported_tokens_follow_concurrency_times_length() -> None:
    """vLLM's 'GPU KV cache size' = max concurrency x max_model_len (what the planner reports)."""
    checked = 0
    for c in load_cases(TABLE):
        rep = c.get("reported") or {}
        if "max_concurrency" not in rep or "kv_cache_tokens" not in rep:
            continue
        args = c.get("args") or []
        length = int(args[args.index("--max-model-len") + 1]) if "--max-model-len" in args else 262144
        assert rep["kv_cache_tokens"] == pytest.approx(rep["max_concurrency"] * length, rel=0.01), c["id"]
        checked += 1
    assert checked >= 3


def test_kv_needed_for_one_request_and_estimated_max_len_match_vllm(results: list[CaseResult]) -> None:
    """vLLM's own 'X GiB KV cache is needed' and 'estimated maximum model length is N' errors."""
    needed = [r for r in results if r.kv_needed_error is not None]
    lengths = [r for r in results if r.max_len_error is not None]
    assert len(needed) >= 2 and len(lengths) >= 2
    for r in needed:
        assert (r.kv_needed_error or 0) <= 0.01, (r.id, r.kv_needed_predicted_gib, r.kv_needed_reported_gib)
    for r in lengths:
        assert (r.max_len_error or 0) <= 0.01, (r.id, r.max_len_predicted, r.max_len_reported)
