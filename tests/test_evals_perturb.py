"""The diagnosis holds when the same failure is printed differently (``evals.tools.perturb``).

Real logs reach us hard-wrapped, coloured, quoted, with several processes' tags, collectors' columns,
no or wrong severities, glued progress bars and thousands of ordinary lines around the cause. Each
transformation keeps what happened, so the category and the cited line must stay: a floor on the
dev split of the real corpus (the blind split is never tuned against) under the two composites that
apply every shape at once, and under the excerpt a paste makes when it leaves out traceback banners.
"""

from __future__ import annotations

import random

import pytest

from evals.tools import perturb
from mcp_tools.incident import LogLine
from mcp_tools.records import clean

LINES = [
    LogLine(
        text="(EngineCore_DP0 pid=7) INFO 05-01 10:00:00 [core.py:1] Starting to load model google/gemma-3"
    ),
    LogLine(
        text="(EngineCore_DP0 pid=7) ERROR 05-01 10:00:09 [core.py:708] torch.OutOfMemoryError: CUDA out of "
        "memory. Tried to allocate 240.00 MiB. GPU 0 has a total capacity of 22.03 GiB of which 95.06 MiB is "
        "free."
    ),
    LogLine(text="Container called exit(1)."),
]


@pytest.mark.parametrize("name", sorted(perturb.TRANSFORMS))
def test_every_transformation_keeps_the_words_and_says_where_each_line_came_from(name: str) -> None:
    new, origin = perturb.TRANSFORMS[name](LINES, random.Random(1))
    assert len(new) == len(origin)
    kept = [o for o in origin if o is not None]
    assert kept == sorted(kept) and set(kept) == {0, 1, 2}  # every line survives, in order
    for i, src in enumerate(LINES):
        # the words of each original line are still there, in the lines traced back to it
        words = " ".join(clean(ln.message).text for ln, o in zip(new, origin, strict=True) if o == i)
        joined = words.replace(" ", "")  # a wrap cuts inside words: compare without the spaces
        assert all(w in joined for w in clean(src.message).text.split()), (name, i)
        if name.startswith("wrap"):
            assert "".join(ln.message for ln, o in zip(new, origin, strict=True) if o == i) == src.message


def test_an_excerpt_leaves_out_only_the_traceback_banners() -> None:
    banner = [
        LogLine(text="Traceback (most recent call last):"),
        LogLine(
            text="(EngineCore_DP0 pid=7) ERROR 05-01 10:00:09 [core.py:708] "
            "Traceback (most recent call last):"
        ),
        LogLine(text='  File "/usr/lib/python3/vllm/config.py", line 260, in verify_with_parallel_config'),
        # a banner inside a record is the record's, and stays
        LogLine(text="Exception in worker VllmWorkerProcess: boom, Traceback (most recent call last):"),
    ]
    new, origin = perturb.EXCERPTS["no-traceback-banner"]([*LINES, *banner], random.Random(1))
    assert origin == [0, 1, 2, 5, 6]
    assert [ln.message for ln in new] == [ln.message for ln in [*LINES, banner[2], banner[3]]]


def test_the_same_run_gives_the_same_lines() -> None:
    inc = perturb.load("dev")[0]
    a, _ = perturb.perturbed(inc, "busy-stream")
    b, _ = perturb.perturbed(inc, "busy-stream")
    assert [x.message for x in a.logs] == [x.message for x in b.logs]


@pytest.mark.slow
def test_the_dev_diagnoses_hold_under_every_shape_at_once() -> None:
    rows = perturb.stability(perturb.load("dev"), (*perturb.COMPOSITES, *perturb.EXCERPTS))
    for row in rows:
        f = row.figures()
        assert f["category_kept"] >= 0.97, (f, row.changed)
        assert f["evidence_kept"] >= 0.95, (f, row.changed)
    # The worst error: a failure that a transformation turns into "healthy". A failure is one the
    # analyzers saw as it is (they cited a line): a log with nothing failed in it ("unknown@None", a silent
    # stall) buried among serving lines, a third of them after it, does show a server that served.
    before = {c: c.split(" -> ")[0].rsplit(": ", 1)[1] for r in rows for c in r.changed}
    healthy = [
        c
        for c, was in before.items()
        if " -> healthy@" in c and not was.startswith("healthy@") and was != "unknown@None"
    ]
    assert not healthy, healthy


def test_the_blind_split_is_refused() -> None:
    with pytest.raises(SystemExit):
        perturb.load("blind")
