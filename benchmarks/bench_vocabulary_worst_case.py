"""The failure vocabulary's slowest search on one hostile 20,000-character line: does any pattern backtrack?

Every compiled pattern of ``mcp_tools/vocabulary.py`` is searched in lines made of one token repeated
(its own literal words, letters, digits, spaces, ``Worker``, frame heads ...): the shapes that make a
``\\w*`` followed by ``\\S*`` or ``.*`` retry at every position. A line that long is ordinary in real logs
(an engine config dump, a repr). Prints the slowest searches, and the worst; a linear pattern takes a few
milliseconds. (``CRASH_DIED``'s unbounded Ray alternative took 28 s on one such line before it was
bounded.)

Run: .venv/bin/python benchmarks/bench_vocabulary_worst_case.py [--length N] [--top K]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from graph.analyzers.needles import needles  # noqa: E402
from mcp_tools import vocabulary  # noqa: E402

TOKENS = ["a", "aB_1", "0", " ", "-", "(", "x=", "Worker", "Error: ", 'File "']


def patterns() -> list[re.Pattern[str]]:
    seen: dict[tuple[str, int], re.Pattern[str]] = {}
    for value in vars(vocabulary).values():
        items = (
            list(value.values())
            if isinstance(value, dict)
            else value
            if isinstance(value, list | tuple)
            else [value]
        )
        for item in items:
            for p in item if isinstance(item, tuple) else (item,):
                if isinstance(p, re.Pattern) and isinstance(p.pattern, str):
                    seen[(p.pattern, p.flags)] = p
    return list(seen.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--length", type=int, default=20_000, help="characters per hostile line")
    ap.add_argument("--top", type=int, default=5, help="how many of the slowest searches to print")
    args = ap.parse_args()
    if args.length < 1 or args.top < 1:
        ap.error("--length and --top must be positive")
    timings: list[tuple[float, str, str]] = []
    pats = patterns()
    for p in pats:
        for token in [*(needles(p) or ())[:5], *TOKENS]:
            line = (token * (args.length // len(token) + 1))[: args.length]
            t0 = time.perf_counter()
            p.search(line)
            timings.append((time.perf_counter() - t0, p.pattern[:70], token))
    timings.sort(reverse=True)
    print(f"{len(pats)} patterns, {len(timings)} searches of {args.length:,}-character lines")
    for dt, source, token in timings[: args.top]:
        print(f"  {dt * 1000:8.1f} ms  {token!r:<12} {source}")
    print(f"worst: {timings[0][0] * 1000:.1f} ms")


if __name__ == "__main__":
    main()
