"""The needle gate in front of the analyzers' regexes never hides a line the regex matches."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graph.analyzers import needles as nd
from mcp_tools import vocabulary


def _vocabulary_patterns() -> list[re.Pattern[str]]:
    seen: dict[tuple[str, int], re.Pattern[str]] = {}
    for value in vars(vocabulary).values():
        items = value if isinstance(value, list | tuple | dict) else [value]
        if isinstance(items, dict):
            items = list(items.values())
        for v in items:
            for p in v if isinstance(v, tuple) else (v,):
                if isinstance(p, re.Pattern) and isinstance(p.pattern, str):
                    seen[(p.pattern, p.flags)] = p
    return list(seen.values())


VOCABULARY = _vocabulary_patterns()


def test_the_vocabulary_is_read_and_most_of_it_is_gated() -> None:
    assert len(VOCABULARY) >= 40
    gated = [p for p in VOCABULARY if nd.needles(p) is not None]
    # Most failure patterns are alternations of words: the gate is worth having only if it applies.
    assert len(gated) >= len(VOCABULARY) // 2


@pytest.mark.parametrize(
    ("source", "flags", "want"),
    [
        (r"CUDA out of memory|OutOfMemoryError", 0, {"cuda out of memory", "outofmemoryerror"}),
        (r"Quota '[A-Z_]+' exceeded", 0, {"' exceeded"}),  # the longest run a match must hold
        (r"(?i)Invalid (?:token|credentials)", 0, {"invalid "}),
        (r"CUDA error: (?!out of )", 0, {"cuda error: "}),  # a negative lookahead consumes nothing
        (r"exit code:? 137\b", 0, {"exit code"}),
        (r"(?:foo)?bar|\d+ baz", 0, {"bar", " baz"}),
        (r"\d+|abc", 0, None),  # a branch without a literal: nothing gates the pattern
        (r"ab|abcdef", 0, None),  # a needle too short to be worth a test
        (r"[Kk]elvin", re.IGNORECASE, {"elvin"}),
        (r"\u212a", re.IGNORECASE, None),  # the Kelvin sign folds to an ASCII k: never gated
    ],
)
def test_needles_of_small_patterns(source: str, flags: int, want: set[str] | None) -> None:
    got = nd.needles(re.compile(source, flags))
    assert (None if got is None else set(got)) == want


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_text_a_vocabulary_pattern_matches_passes_its_gate(data: st.DataObject) -> None:
    pattern = data.draw(st.sampled_from([p for p in VOCABULARY if nd.needles(p) is not None]))
    text = data.draw(st.from_regex(pattern, alphabet=st.characters(codec="ascii")))
    assert pattern.search(text)
    assert nd.may_match(nd.needles(pattern), text, text.lower()), (pattern.pattern, text)


_PIECES = st.sampled_from(
    [
        "ab",
        "Cd",
        "xyz",
        "abc",
        "a",
        r"\d+",
        r"\s",
        ".",
        "[a-c]",
        "(?:ab|cde)",
        "(?:xyz)?",
        "(?!q)",
        r"\b",
        "^",
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    pieces=st.lists(st.lists(_PIECES, min_size=1, max_size=5), min_size=1, max_size=3),
    ignore_case=st.booleans(),
    text=st.text(alphabet="abcdeqxyzABCDXYZ 0123\n", max_size=40),
)
def test_the_gate_never_rejects_what_a_random_pattern_matches(
    pieces: list[list[str]], ignore_case: bool, text: str
) -> None:
    pattern = re.compile("|".join("".join(p) for p in pieces), re.IGNORECASE if ignore_case else 0)
    if pattern.search(text):
        assert nd.may_match(nd.needles(pattern), text, text.lower()), (pattern.pattern, text)


def test_a_text_that_is_not_ascii_is_never_gated() -> None:
    need = nd.needles(re.compile("kelvin", re.IGNORECASE))
    assert need is not None
    assert not nd.may_match(need, "no such word", "no such word")
    assert nd.may_match(need, "\u212aelvin", "\u212aelvin".lower())  # the regex matches it: so must the gate
    assert re.compile("kelvin", re.IGNORECASE).search("\u212aelvin")
