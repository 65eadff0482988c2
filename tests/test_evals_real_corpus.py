"""The real corpus (evals/real): log lines copied verbatim from public sources, split blind.

Checks what makes it a fair test: every file says where its lines come from, the blind split is the
one the seeded rule gives (files cannot be moved to suit a result), and the corpus covers what real
logs look like: every category, healthy start-ups, layers other than vLLM, Gemma models.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from evals.harness import REAL_DIR, load_library
from evals.tools.split import misplaced, read_yaml
from mcp_tools.incident import Incident
from mcp_tools.remediation import RemediationKind
from mcp_tools.taxonomy import Category

FILES = sorted(REAL_DIR.rglob("*.yaml"))


@pytest.fixture(scope="module")
def corpus() -> list[Incident]:
    good, bad = load_library(REAL_DIR)
    assert bad == [], f"corpus files that do not load: {bad}"
    return good


def test_the_corpus_is_large_enough_and_split_by_the_seeded_rule(corpus: list[Incident]) -> None:
    assert len(corpus) >= 150
    assert misplaced(REAL_DIR) == [], "a file is not in the split the seeded hash of its id gives"
    blind = [i for i in corpus if i.path is not None and i.path.parent.name == "blind"]
    assert len(blind) >= 50
    assert len(blind) >= len(corpus) / 4


def test_every_file_is_real_named_after_its_id_and_cites_a_source(corpus: list[Incident]) -> None:
    for inc in corpus:
        assert inc.provenance == "real", inc.id
        assert inc.path is not None and inc.id == inc.path.stem
        assert inc.id.startswith("real-")
        assert inc.source and ("github.com/" in inc.source or "/" in inc.source), inc.id
        assert inc.logs, inc.id
        assert inc.expected is not None, inc.id


def test_ids_are_unique(corpus: list[Incident]) -> None:
    ids = Counter(i.id for i in corpus)
    assert [k for k, n in ids.items() if n > 1] == []


def test_every_category_six_times_and_ten_healthy_start_ups(corpus: list[Incident]) -> None:
    counts = Counter(i.expected.category for i in corpus if i.expected)
    assert {c: counts.get(c, 0) for c in Category if counts.get(c, 0) < 6} == {}
    assert counts["healthy"] >= 10


def test_layers_other_than_vllm_and_gemma(corpus: list[Incident]) -> None:
    meta = [read_yaml(p) for p in FILES]
    layers = Counter(m.get("layer") for m in meta)
    assert sum(n for layer, n in layers.items() if layer != "vllm") >= 20, layers
    gemma = [m for m in meta if "gemma" in f"{m.get('model', '')} {m.get('title', '')}".lower()]
    assert len(gemma) >= 15


def test_expected_evidence_is_a_verbatim_part_of_the_logs(corpus: list[Incident]) -> None:
    problems = []
    for inc in corpus:
        assert inc.expected is not None
        messages = [line.message for line in inc.logs]
        problems += [f"{inc.id}: {s!r}" for s in inc.expected.evidence if not any(s in m for m in messages)]
        assert set(inc.expected.remediation_kinds) <= {k.value for k in RemediationKind}, inc.id
        assert not set(inc.expected.remediation_kinds) & set(inc.expected.forbidden_kinds), inc.id
    assert problems == []


def test_the_split_tool_refuses_a_broken_file_in_one_line(tmp_path: Path) -> None:
    from evals.tools.split import main

    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "x.yaml").write_text('id: "unterminated\nlogs: [\n')
    assert main([str(tmp_path)]) == 2
