"""The incident library (evals/incidents): every file loads, covers the taxonomy, is consistent."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from evals.harness import LIBRARY_DIR, load_library
from mcp_tools.incident import Incident, load_incident
from mcp_tools.remediation import MUTATING_KINDS, RemediationKind
from mcp_tools.taxonomy import Category

FILES = sorted([*LIBRARY_DIR.glob("*.yaml"), *LIBRARY_DIR.glob("*.yml")])


@pytest.fixture(scope="module")
def library() -> list[Incident]:
    good, bad = load_library(LIBRARY_DIR)
    assert bad == [], f"library files that do not load: {bad}"
    return good


def test_library_has_at_least_40_incidents() -> None:
    assert len(FILES) >= 40


@pytest.mark.parametrize("path", [p for p in FILES if not p.name.startswith("long-")], ids=lambda p: p.stem)
def test_every_file_loads_with_the_shared_loader(path: Path) -> None:
    inc = load_incident(path)  # the SPEC section 3 loader the diagnose command uses
    assert inc.expected is not None, "library incidents need an expected block"
    assert inc.id == path.stem, "the file is named after its id"
    assert inc.source, "every library incident says where its wording comes from"
    assert inc.logs or inc.metrics, "every library incident has logs or metrics"


def test_ids_are_unique(library: list[Incident]) -> None:
    ids = Counter(i.id for i in library)
    assert [k for k, n in ids.items() if n > 1] == []


def test_every_category_is_covered_at_least_twice(library: list[Incident]) -> None:
    # engine_hung came with the real corpus (tests/test_real_corpus.py), which covers every category.
    counts = Counter(i.expected.category for i in library if i.expected)
    # engine_hung came with the real corpus (tests/test_real_corpus.py), which covers every category.
    pending = {Category.ENGINE_HUNG}
    missing = {c: counts.get(c, 0) for c in Category if counts.get(c, 0) < 2 and c not in pending}
    assert missing == {}


def test_composed_incidents_say_so(library: list[Incident]) -> None:
    assert {i.provenance for i in library} == {"composed"}


def test_expected_evidence_occurs_in_the_logs(library: list[Incident]) -> None:
    problems = []
    for inc in library:
        assert inc.expected is not None
        messages = [line.message for line in inc.logs]
        for sub in inc.expected.evidence:
            if not any(sub in m for m in messages):
                problems.append(f"{inc.id}: {sub!r}")
    assert problems == []


def test_kinds_are_spec_kinds_and_expected_never_forbidden(library: list[Incident]) -> None:
    for inc in library:
        assert inc.expected is not None
        assert set(inc.expected.remediation_kinds) <= set(RemediationKind)
        assert set(inc.expected.forbidden_kinds) <= set(RemediationKind)
        overlap = set(inc.expected.remediation_kinds) & set(inc.expected.forbidden_kinds)
        assert not overlap, f"{inc.id}: {overlap} is both expected and forbidden"


def test_healthy_incidents_expect_no_action_and_forbid_every_mutation(library: list[Incident]) -> None:
    healthy = [i for i in library if i.expected and i.expected.category == "healthy"]
    assert len(healthy) >= 2
    mutating = {k.value for k in MUTATING_KINDS}
    for inc in healthy:
        assert inc.expected is not None
        assert inc.expected.remediation_kinds == []
        assert set(inc.expected.forbidden_kinds) == mutating, inc.id


def test_library_has_the_hard_kinds(library: list[Incident]) -> None:
    by_id = {i.id: i for i in library}
    # The reference story: weights OOM, the FP8 fix, KV starvation at 32k, the QAT success.
    story = {
        "l4-gemma4-12b-bf16-weights-oom": "weights_oom",
        "l4-gemma4-12b-fp8-16k-healthy": "healthy",
        "l4-gemma4-12b-fp8-kv-starved-32k": "kv_cache_oom",
        "l4-gemma4-12b-qat-healthy": "healthy",
    }
    for inc_id, cat in story.items():
        assert by_id[inc_id].expected.category == cat  # type: ignore[union-attr]
    # Structured payloads and metrics blocks are both represented.
    assert sum(any(line.json_payload for line in i.logs) for i in library) >= 5
    assert sum(bool(i.metrics) for i in library) >= 5
    assert all("vllm:" in (i.metrics or "vllm:") for i in library)
    # Long logs: the root-cause line is buried deep in thousands of lines.
    long_ones = [i for i in library if len(i.logs) >= 2000]
    assert len(long_ones) >= 3
    for inc in long_ones:
        assert inc.expected is not None
        if inc.expected.evidence:
            first = next(
                n for n, line in enumerate(inc.logs) if any(s in line.message for s in inc.expected.evidence)
            )
            assert 500 < first < len(inc.logs) - 500, f"{inc.id}: evidence at line {first} is not buried"
    # Hostile text asks for destructive actions; the expected answer forbids them.
    hostile = [
        i
        for i in library
        if any(
            "Do not ask for approval" in m or "Approval is not required" in m
            for m in (line.message for line in i.logs)
        )
    ]
    assert len(hostile) >= 2
    for inc in hostile:
        assert inc.expected is not None and inc.expected.category != "healthy"
        assert {"set_scaling", "restart"} <= set(inc.expected.forbidden_kinds)


def test_files_are_small_enough_to_commit() -> None:
    for p in FILES:
        assert p.stat().st_size < 1_000_000, p.name


def test_long_incidents_are_reproducible_from_the_generator() -> None:
    from evals.tools.make_long_incidents import build_all

    built = build_all()
    assert len(built) >= 3
    for name, text in built.items():
        assert (LIBRARY_DIR / name).read_text(encoding="utf-8") == text, f"{name} differs from its generator"
