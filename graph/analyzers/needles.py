"""The literal words a pattern cannot match without: a substring test that skips the regex.

Most log lines match none of the failure patterns, and Python's ``re`` tries every branch of a long
alternation at every position of a line. ``needles(pattern)`` reads the pattern's parse tree once and
returns lower-cased literals such that every match contains at least one of them (ripgrep's
literal extraction, in small): ``any(n in text.lower() for n in needles)`` is then a necessary
condition, tested at ``str.__contains__`` speed. ``None`` when the pattern has no such literals of
useful length (a branch made only of classes or wildcards): such a pattern is always run.

The test is one-sided by construction: it may let through a line the regex then rejects, never
reject a line the regex would match (``tests/test_graph_analyzers_needles.py`` checks this on
generated patterns and lines). Case: needles and text are both lower-cased, so a case-sensitive
pattern is gated as if it ignored case (looser, still correct). A text that is not ASCII is never
gated: Unicode case folding (``re.IGNORECASE`` matches the Kelvin sign for ``k``) is not
``str.lower()``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

# The parser behind ``re.compile`` (CPython 3.11+; ``sre_parse`` before). Private: where it is missing,
# nothing is gated and every regex runs, as before the gate.
try:
    import re._constants as C
    import re._parser as P
except ImportError:  # pragma: no cover - another interpreter
    C = P = None  # type: ignore[assignment]

MIN_NEEDLE = 3  # a shorter literal gates almost nothing: run the regex instead

_REPEATS = {C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT} if C else set()
_ZERO_WIDTH = {C.AT, C.ASSERT_NOT} if C else set()  # consume nothing: a literal run goes on across them


def _best(options: list[frozenset[str]]) -> frozenset[str] | None:
    """Of several sets each of which a match must hit, the most selective (longest shortest needle)."""
    good = [o for o in options if o and min(map(len, o)) >= MIN_NEEDLE]
    if not good:
        return None
    return max(good, key=lambda o: (min(map(len, o)), -len(o)))


def _seq(items: Any) -> frozenset[str] | None:
    """Needles of a sequence: each literal run is necessary, and so is each necessary sub-part."""
    options: list[frozenset[str]] = []
    run: list[str] = []

    def close() -> None:
        if run:
            options.append(frozenset({"".join(run).lower()}))
            run.clear()

    for op, av in items:
        if op is C.LITERAL:
            run.append(chr(av))
            continue
        if op in _ZERO_WIDTH:
            continue
        close()
        sub: frozenset[str] | None = None
        if op is C.SUBPATTERN:
            sub = _seq(av[-1])
        elif op is C.BRANCH:
            sub = _alt(av[1])
        elif op in _REPEATS and av[0] >= 1:
            sub = _seq(av[2])
        elif op is C.ASSERT and av[0] == 1:  # a lookahead's text is in the line too
            sub = _seq(av[1])
        if sub is not None:
            options.append(sub)
    close()
    return _best(options)


def _alt(branches: Any) -> frozenset[str] | None:
    """Needles of an alternation: every branch must bring its own, else nothing gates it."""
    out: set[str] = set()
    for b in branches:
        got = _seq(b)
        if got is None:
            return None
        out |= got
    return frozenset(out)


@lru_cache(maxsize=1024)
def _needles(source: str, flags: int) -> tuple[str, ...] | None:
    if P is None:
        return None
    try:
        tree = P.parse(source, flags)
    except (re.error, TypeError, ValueError):
        return None
    got = _seq(tree)
    if not got or not all(n.isascii() for n in got):
        return None  # re.IGNORECASE folds some non-ASCII letters to ASCII ones (the Kelvin sign)
    # A needle that holds a shorter one adds nothing: a text with it has the shorter one too.
    got = frozenset(n for n in got if not any(m != n and m in n for m in got))
    return tuple(sorted(got, key=len, reverse=True))


def needles(pattern: re.Pattern[str]) -> tuple[str, ...] | None:
    """Lower-cased literals one of which is in every text ``pattern`` matches (cached per pattern)."""
    return _needles(pattern.pattern, pattern.flags)


def may_match(needs: tuple[str, ...] | None, text: str, lowered: str) -> bool:
    """False only when ``text`` certainly cannot match the pattern ``needs`` came from."""
    if needs is None or not text.isascii():
        return True
    return any(map(lowered.__contains__, needs))  # no generator frame: about twice as fast
