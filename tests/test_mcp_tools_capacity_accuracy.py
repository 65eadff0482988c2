"""The planner against real vLLM start-up figures (tests/data/vllm_startup_cases.yaml), every point
with its source, scored on a dev and a blind split (tests/data/vllm_startup_split.yaml).

The split was chosen by a seeded hash of each case id before the planner was changed; changes are
judged on dev only, so the thresholds below gate dev. The blind split's figures are printed by
benchmarks/capacity_accuracy.py and stated in the README, never tuned against."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_tools.capacity.accuracy import BLIND_FRACTION, CaseResult, evaluate, load_cases, split_of, summary

DATA = Path(__file__).parent / "data"
TABLE = DATA / "vllm_startup_cases.yaml"
SPLIT = DATA / "vllm_startup_split.yaml"


@pytest.fixture(scope="module")
def cases() -> list[dict[str, Any]]:
    return load_cases(TABLE)


@pytest.fixture(scope="module")
def results() -> list[CaseResult]:
    return evaluate(TABLE)


@pytest.fixture(scope="module")
def dev(results: list[CaseResult]) -> list[CaseResult]:
    return [r for r in results if r.split == "dev"]


def _table(rows: list[CaseResult], attr: str) -> str:
    return "\n".join(f"  {r.id}: {getattr(r, attr)}" for r in rows)


def test_table_has_at_least_forty_real_start_ups_with_sources(cases: list[dict[str, Any]]) -> None:
    assert len(cases) >= 40
    assert len({c["id"] for c in cases}) == len(cases)
    for c in cases:
        assert c.get("reported") and c.get("quote"), c["id"]
        if c.get("source_kind") == "reference":
            assert c.get("assumed"), c["id"]  # the reference deployment states what it assumed
        elif c.get("source_kind") == "indexed-file":
            assert c["source"].startswith("index:"), c["id"]  # a public file whose repository is unnamed
        else:
            assert c["source"].startswith("https://"), c["id"]
        if "config" in c:
            assert str(c.get("config_source", "")).startswith("https://huggingface.co/"), c["id"]


def test_the_table_spans_releases_formats_and_architectures(cases: list[dict[str, Any]]) -> None:
    versions = {
        tuple(int(x) for x in str(c["vllm_version"]).split(".")[:2]) for c in cases if c.get("vllm_version")
    }
    assert min(versions) <= (0, 4) and max(versions) >= (0, 21)
    assert any(v < (0, 8) for v in versions) and any(v >= (0, 8) for v in versions)  # V0 and V1
    args = [" ".join(c.get("args") or []) for c in cases]
    assert any("--kv-cache-dtype fp8" in a for a in args)
    assert {1, 2, 4, 8} <= {int(c.get("gpu_count", 1)) for c in cases}
    models = " ".join(c["model"].lower() for c in cases)
    for needle in ("awq", "gptq", "w4a16", "fp8", "nvfp4", "gemma-2", "gemma-3", "gemma-4", "mixtral", "a3b"):
        assert needle in models, needle


def test_the_blind_split_is_the_committed_seeded_hash(cases: list[dict[str, Any]]) -> None:
    committed = set(yaml.safe_load(SPLIT.read_text())["blind"])
    computed = {c["id"] for c in cases if split_of(c["id"]) == "blind"}
    assert committed == computed
    assert len(computed) >= len(cases) / 3
    assert BLIND_FRACTION == 0.4


def test_every_point_is_evaluated_and_none_refused(
    results: list[CaseResult], cases: list[dict[str, Any]]
) -> None:
    assert [r.id for r in results] == [c["id"] for c in cases]
    refused = [r for r in results if r.refused]
    assert not refused, _table(refused, "refused")


def test_dev_kv_tokens_within_10_percent_in_at_least_90_percent(dev: list[CaseResult]) -> None:
    s = summary(dev)
    assert s["kv_cases"] >= 20, s
    assert s["kv_within"] >= 0.9 * s["kv_cases"], "dev KV tokens:\n" + _table(
        [r for r in dev if r.kv_tokens_error is not None], "kv_tokens_signed"
    )
    assert s["kv_median_error"] <= 0.02, s


def test_dev_over_predictions_beyond_15_percent_are_only_the_known_v0_tp_miss(dev: list[CaseResult]) -> None:
    """Over-predicting is the dangerous direction. One dev case over-predicts: Llama-2-70B at TP 4
    on vLLM 0.2.5, where the fixed profiler saw ~12.7 GiB per worker that the thread does not
    explain (vllm-project/vllm#2031); the pessimistic end of the range covers it."""
    over = [r for r in dev if (r.kv_tokens_signed or 0) > 0.15]
    assert [r.id for r in over] == ["a100-80gb-x4-llama2-70b-tp4-defaults"], _table(over, "kv_tokens_signed")
    for r in over:
        assert r.kv_tokens_low is not None and r.kv_tokens_reported is not None
        assert r.kv_tokens_low <= r.kv_tokens_reported


def test_dev_pessimistic_end_does_not_over_predict(dev: list[CaseResult]) -> None:
    """`fits` is judged at the low end of kv_cache_tokens_range: it stays at or below vLLM's figure
    (within 1% where the source rounds or predates the profiler fix)."""
    rows = [r for r in dev if r.kv_tokens_low is not None and r.kv_tokens_reported]
    assert len(rows) >= 20
    bad = [r for r in rows if (r.kv_tokens_low or 0) > 1.01 * (r.kv_tokens_reported or 0)]
    assert not bad, _table(bad, "kv_tokens_low")


def test_dev_weights_within_5_percent(dev: list[CaseResult]) -> None:
    rows = [r for r in dev if r.weights_error is not None]
    assert len(rows) >= 15
    bad = [r for r in rows if (r.weights_error or 0) > 0.05]
    assert not bad, "weights off by more than 5%:\n" + _table(bad, "weights_error")
    # Counted as vLLM allocates them (towers, projector, RoPE tables), every dev point is within 1%.
    loose = [r for r in rows if (r.weights_error or 0) > 0.01]
    assert not loose, "weights off by more than 1%:\n" + _table(loose, "weights_error")


def test_dev_kv_budget_within_10_percent(dev: list[CaseResult]) -> None:
    rows = [r for r in dev if r.available_error is not None]
    assert len(rows) >= 15
    bad = [r for r in rows if (r.available_error or 0) > 0.10]
    assert not bad, "available KV memory:\n" + _table(bad, "available_error")


def test_dev_kv_layout_from_vllms_own_budget(dev: list[CaseResult]) -> None:
    """Given the memory vLLM said it had for the cache, the token count follows vLLM's layout."""
    rows = [r for r in dev if r.layout_error is not None]
    assert len(rows) >= 15
    good = [r for r in rows if (r.layout_error or 0) <= 0.02]
    assert len(good) >= 0.9 * len(rows), "layout:\n" + _table(rows, "layout_error")


def test_dev_fit_verdicts_match_where_vllm_said(dev: list[CaseResult]) -> None:
    rows = [r for r in dev if r.fits_reported is not None]
    assert rows
    for r in rows:
        assert r.fits_predicted == r.fits_reported, r.id


def test_reported_tokens_follow_concurrency_times_length(cases: list[dict[str, Any]]) -> None:
    """vLLM's 'GPU KV cache size' = max concurrency x max_model_len (a property of vLLM's own lines)."""
    checked = 0
    for c in cases:
        rep = c.get("reported") or {}
        if "max_concurrency" not in rep or "kv_cache_tokens" not in rep:
            continue
        args = c.get("args") or []
        length = int(args[args.index("--max-model-len") + 1]) if "--max-model-len" in args else 262144
        assert rep["kv_cache_tokens"] == pytest.approx(rep["max_concurrency"] * length, rel=0.01), c["id"]
        checked += 1
    assert checked >= 20


def test_dev_kv_needed_and_estimated_max_len_match_vllm(dev: list[CaseResult]) -> None:
    """vLLM's own 'X GiB KV cache is needed' and 'estimated maximum model length is N' errors."""
    needed = [r for r in dev if r.kv_needed_error is not None]
    lengths = [r for r in dev if r.max_len_error is not None]
    assert needed and lengths
    for r in needed:
        assert (r.kv_needed_error or 0) <= 0.01, (r.id, r.kv_needed_predicted_gib, r.kv_needed_reported_gib)
    for r in lengths:
        assert (r.max_len_error or 0) <= 0.01, (r.id, r.max_len_predicted, r.max_len_reported)


def test_the_blind_split_is_scored_on_the_same_checks(results: list[CaseResult]) -> None:
    """Blind points run through the same evaluation (their figures are printed, not gated)."""
    blind = summary([r for r in results if r.split == "blind"])
    assert blind["kv_cases"] >= 15 and blind["weight_cases"] >= 10
