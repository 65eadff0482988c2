"""Perturb incidents the way real logs differ from neat ones, and count where the diagnosis changes.

The same failure reaches us printed many ways: a terminal hard-wraps a long record at 80 or 120
columns, colour codes survive a copy, a markdown quote puts ``> `` before every line, several
processes (``(EngineCore_DP0 pid=..)``, ``(RayWorkerWrapper pid=..)``, ``[rank0]:``) print into one
stream, Cloud Run labels a whole stream alike or not at all, ``docker compose`` and ``kubectl
--timestamps`` add their own columns, tqdm leaves a bar glued in front of the next record, and the
cause sits among thousands of ordinary serving lines. None of that changes the root cause.

Each transformation maps an incident's log lines to new ones and says which original line each new
line came from (``None`` for a line it added), so a citation can be followed back. ``stability``
diagnoses every incident as it is and under each transformation, and counts how often the category,
the cited line (traced back to the original) and the plan's kinds stay the same. Everything is
seeded: the same incidents give the same figures.

    python -m evals.tools.perturb [--split dev] [--only wrap80,quote] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from mcp_tools.incident import Incident, LogLine

SEED = 20261201

#: (new lines, origin of each new line: an index into the original lines, or None for an added line)
Perturbed = tuple[list[LogLine], list[int | None]]
Transform = Callable[[Sequence[LogLine], random.Random], Perturbed]


def _line(src: LogLine, text: str, **update: Any) -> LogLine:
    return src.model_copy(update={"text": text, "json_payload": None, **update})


def _per_line(fn: Callable[[str, random.Random], str]) -> Transform:
    """A transformation of each physical line's text (a multi-line entry: of each of its lines)."""

    def run(lines: Sequence[LogLine], rng: random.Random) -> Perturbed:
        out = [
            _line(ln, "\n".join(fn(part, rng) for part in ln.message.split("\n"))) if ln.message else ln
            for ln in lines
        ]
        return out, list(range(len(lines)))

    return run


def wrap(width: int) -> Transform:
    """A terminal's hard wrap: a record longer than ``width`` becomes several physical lines, cut at
    the column (mid-word), the rest without any prefix of its own."""

    def run(lines: Sequence[LogLine], rng: random.Random) -> Perturbed:
        out: list[LogLine] = []
        origin: list[int | None] = []
        for i, ln in enumerate(lines):
            text = ln.message
            if "\n" in text or len(text) <= width:
                out.append(ln)
                origin.append(i)
                continue
            for k in range(0, len(text), width):
                out.append(_line(ln, text[k : k + width]))
                origin.append(i)
        return out, origin

    return run


_LEVEL_WORD = re.compile(r"^(?:\(\S+(?: \S+)*? pid=\d+\) )?(DEBUG|INFO|WARNING|ERROR|CRITICAL)\b")
_PROC_TAG = re.compile(r"^\((?:\S+ )*?pid=\d+\)")


def _ansi(text: str, rng: random.Random) -> str:
    """vLLM's and Ray's colour: the process tag cyan, the level coloured, a reset at the end."""
    m = _PROC_TAG.match(text)
    if m:
        text = f"\x1b[1;36m{m.group(0)}\x1b[0m{text[m.end() :]}"
    lv = re.search(
        r"(?<=\x1b\[0m )(DEBUG|INFO|WARNING|ERROR|CRITICAL)\b|^(DEBUG|INFO|WARNING|ERROR|CRITICAL)\b", text
    )
    if lv:
        colour = {"ERROR": "31", "CRITICAL": "31", "WARNING": "33"}.get(lv.group(0), "32")
        text = f"{text[: lv.start()]}\x1b[{colour}m{lv.group(0)}\x1b[0m{text[lv.end() :]}"
    if not m and not lv and text:
        text = f"\x1b[0m{text}\x1b[0m"
    return text


def tagged(tag: str) -> Transform:
    """Every record printed by one more process in the stream: its tag in front of each record's
    first line (unless it has one). The rest of a hard-wrapped record stays as the terminal cut it."""
    from graph.analyzers.base import LogView
    from graph.observation import Observation

    def one(text: str) -> str:
        if not text or _PROC_TAG.match(text) or text.startswith("[rank"):
            return text
        return f"{tag} {text}"

    def run(lines: Sequence[LogLine], rng: random.Random) -> Perturbed:
        rest = {ln.n - 1 for ln in LogView(Observation(logs=list(lines))).lines if ln.head}
        out = [
            ln
            if i in rest or not ln.message
            else _line(ln, "\n".join(one(p) for p in ln.message.split("\n")))
            for i, ln in enumerate(lines)
        ]
        return out, list(range(len(lines)))

    return run


def _lead_ts(formats: Sequence[str]) -> Transform:
    """A timestamp column in front of every line (kubectl --timestamps, docker logs -t, a console)."""

    def run(lines: Sequence[LogLine], rng: random.Random) -> Perturbed:
        t = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
        fmt = rng.choice(list(formats))
        out = []
        for ln in lines:
            t += timedelta(milliseconds=rng.randint(1, 900))
            stamp = t.strftime(fmt.replace("{ms}", f"{t.microsecond // 1000:03d}"))
            out.append(
                _line(ln, "\n".join(f"{stamp} {p}" if p else p for p in ln.message.split("\n")))
                if ln.message
                else ln
            )
        return out, list(range(len(lines)))

    return run


def severity(choose: Callable[[LogLine, random.Random], str]) -> Transform:
    def run(lines: Sequence[LogLine], rng: random.Random) -> Perturbed:
        return [ln.model_copy(update={"severity": choose(ln, rng)}) for ln in lines], list(range(len(lines)))

    return run


_BENIGN = [
    "INFO {ts} [loggers.py:127] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
    "0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%",
    "INFO {ts} [metrics.py:96] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s",
    'INFO:     127.0.0.1:{port} - "GET /health HTTP/1.1" 200 OK',
    # (not the API server's "Waiting for N local ... core engine proc(s) to start": that says a start is
    # under way, which the diagnosis must see completing: no line of an ordinary stream)
    "DEBUG {ts} [core.py:418] EngineCore waiting for work.",
    "INFO {ts} [shm_broadcast.py:289] vLLM message queue communication handle: "
    "Handle(local_reader_ranks=[0])",
]


def interleave(tag: str, every: int = 3) -> Transform:
    """Another process's ordinary lines between this one's, about every ``every`` lines."""

    def run(lines: Sequence[LogLine], rng: random.Random) -> Perturbed:
        out: list[LogLine] = []
        origin: list[int | None] = []
        for i, ln in enumerate(lines):
            out.append(ln)
            origin.append(i)
            if rng.random() < 1 / every:
                text = rng.choice(_BENIGN).format(ts="05-01 12:00:00", port=rng.randint(30000, 60000))
                out.append(LogLine(timestamp=None, severity="DEFAULT", text=f"{tag} {text}"))
                origin.append(None)
        return out, origin

    return run


def bury(n_lines: int) -> Transform:
    """The incident among ``n_lines`` ordinary serving lines (access lines, engine stats, scanner 404s,
    a harmless warning): two thirds before it, one third after (``make_long_incidents.noise_line``)."""
    from evals.tools.make_long_incidents import Clock, noise_line

    def run(lines: Sequence[LogLine], rng: random.Random) -> Perturbed:
        clock = Clock(datetime(2026, 5, 1, 11, 0, 0, tzinfo=UTC))
        # The noise is another server's: it never speaks as a process of the incident's own (answers
        # from the process that failed, after it failed, would change what happened).
        own = " ".join(ln.text or "" for ln in lines)
        pid = next(p for p in range(1, 10_000) if f"pid={p})" not in own and f"pid={p}," not in own)

        def noise(k: int) -> list[LogLine]:
            out = []
            for _ in range(k):
                e = noise_line(rng, clock, tag=f"(APIServer pid={pid})")
                out.append(LogLine(severity=e["severity"], text=e["text"]))
            return out

        before, after = noise(n_lines * 2 // 3), noise(n_lines - n_lines * 2 // 3)
        new = [*before, *lines, *after]
        origin: list[int | None] = [None] * len(before) + list(range(len(lines))) + [None] * len(after)
        return new, origin

    return run


_TQDM = [
    "Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:03<00:00,  1.21it/s]",
    "Capturing CUDA graph shapes: 100%|██████████| 67/67 [00:21<00:00,  3.12it/s]",
    "Processed prompts: 100%|██████████| 1/1 [00:00<00:00,  2.01it/s, est. speed input: 12.1 toks/s]",
]


def tqdm_glue(p: float = 0.35) -> Transform:
    """A progress bar left without its newline, the next record printed right after it."""

    def fn(text: str, rng: random.Random) -> str:
        if text and text[:1].strip() and rng.random() < p:
            return rng.choice(_TQDM) + text
        return text

    return _per_line(fn)


def compose(*steps: Transform) -> Transform:
    """Transformations one after another; origins followed back through each."""

    def run(lines: Sequence[LogLine], rng: random.Random) -> Perturbed:
        cur: list[LogLine] = list(lines)
        origin: list[int | None] = list(range(len(lines)))
        for step in steps:
            cur, o = step(cur, rng)
            origin = [origin[j] if j is not None else None for j in o]
        return cur, origin

    return run


#: The transformations, by name. None of them changes what happened.
TRANSFORMS: dict[str, Transform] = {
    "wrap80": wrap(80),
    "wrap120": wrap(120),
    "wrap160": wrap(160),
    "ansi": _per_line(_ansi),
    "quote": _per_line(lambda t, r: f"> {t}" if t else ">"),
    "engine-tag": tagged("(EngineCore_DP0 pid=1234)"),
    "ray-tag": tagged("(RayWorkerWrapper pid=5678, ip=10.0.0.3)"),
    "rank-tag": tagged("[rank0]:"),
    "severity-default": severity(lambda ln, r: "DEFAULT"),
    "severity-stderr": severity(lambda ln, r: "ERROR"),
    "severity-scrambled": severity(lambda ln, r: r.choice(("DEFAULT", "INFO", "ERROR"))),
    "compose-prefix": _per_line(lambda t, r: f"gemma-1  | {t}" if t else t),
    "kubectl-ts": _lead_ts(["%Y-%m-%dT%H:%M:%S.{ms}000000Z"]),
    "console-ts": _lead_ts(["%Y-%m-%d %H:%M:%S,{ms}", "[%Y-%m-%d %H:%M:%S]"]),
    "interleave": interleave("(APIServer pid=1)"),
    "bury-3000": bury(3000),
    "tqdm-glue": tqdm_glue(),
    "pasted-thread": compose(
        severity(lambda ln, r: "DEFAULT"), wrap(120), _per_line(_ansi), _per_line(lambda t, r: f"> {t}")
    ),
    "busy-stream": compose(
        severity(lambda ln, r: "ERROR"),
        tagged("(EngineCore_DP0 pid=1234)"),
        interleave("(APIServer pid=1)"),
        tqdm_glue(0.1),
        _lead_ts(["%Y-%m-%dT%H:%M:%S.{ms}000000Z"]),
        bury(600),
    ),
}
#: What ``tests/test_evals_perturb.py`` holds a floor for: every shape at once, in two streams.
COMPOSITES = ("pasted-thread", "busy-stream")


#: A traceback's banner alone on its line (after any logger or process prefix), as a paste leaves it out.
_BANNER = re.compile(
    r"^(?:.*\] |\(\S+ pid=\d+[^)]*\) |\[rank\d+\]: ?)?\s*Traceback \(most recent call last\):\s*$"
)


def _without_banners(lines: Sequence[LogLine], rng: random.Random) -> Perturbed:
    """A paste that leaves out each traceback's ``Traceback (most recent call last):`` line (it starts
    at the frames, or quotes only them): the banner carries no fact of what failed."""
    keep: list[int | None] = [
        i for i, ln in enumerate(lines) if not (ln.message and _BANNER.match(ln.message))
    ]
    return [lines[i] for i in keep if i is not None], keep


#: Excerpts: what a paste leaves out without changing what happened (unlike ``TRANSFORMS``, lines go).
EXCERPTS: dict[str, Transform] = {"no-traceback-banner": _without_banners}


# --------------------------------------------------------------------------------------------------
# Stability: the diagnosis under each transformation versus the incident as it is
# --------------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    category: str
    first_cited: int | None  # the first cited log line, as an index into the ORIGINAL lines
    kinds: tuple[str, ...]


@dataclass
class Row:
    transform: str
    cases: int = 0
    failures: int = 0  # cases diagnosed as something other than healthy (evidence is counted on them)
    category_kept: int = 0
    evidence_kept: int = 0
    plan_kept: int = 0
    changed: list[str] = field(default_factory=list)  # "id: before -> after"

    def figures(self) -> dict[str, Any]:
        d = max(1, self.cases)
        return {
            "transform": self.transform,
            "cases": self.cases,
            "category_kept": round(self.category_kept / d, 3),
            "evidence_kept": round(self.evidence_kept / max(1, self.failures), 3),
            "plan_kept": round(self.plan_kept / d, 3),
        }


def _rng(transform: str, incident_id: str) -> random.Random:
    h = hashlib.sha256(f"{SEED}:{transform}:{incident_id}".encode()).digest()
    return random.Random(int.from_bytes(h[:8], "big"))


def _outcome(incident: Incident, origin: Sequence[int | None] | None = None) -> Outcome:
    from evals.scoring import diagnosis_to_dict, plan_kinds
    from graph.pipeline import assess_incident

    d = diagnosis_to_dict(assess_incident(incident, model=None))
    first = next(
        (
            e.get("line")
            for e in d.get("evidence") or []
            if isinstance(e.get("line"), int) and 0 < e.get("line") <= len(incident.logs)
        ),
        None,
    )
    if first is not None and origin is not None:
        first = origin[first - 1]
    elif first is not None:
        first -= 1
    return Outcome(category=str(d.get("category")), first_cited=first, kinds=tuple(plan_kinds(d)))


def perturbed(incident: Incident, name: str) -> tuple[Incident, list[int | None]]:
    """``incident`` under the named transformation, and the origin of each of its lines."""
    lines, origin = (TRANSFORMS | EXCERPTS)[name](incident.logs, _rng(name, incident.id))
    return incident.model_copy(update={"logs": lines}), origin


def stability(incidents: Iterable[Incident], names: Sequence[str] | None = None) -> list[Row]:
    names = list(names or TRANSFORMS | EXCERPTS)
    rows = {n: Row(n) for n in names}
    for inc in incidents:
        base = _outcome(inc)
        for name in names:
            new, origin = perturbed(inc, name)
            got = _outcome(new, origin)
            row = rows[name]
            row.cases += 1
            row.category_kept += got.category == base.category
            # The cause's line: a healthy answer cites where the server came up, which burying it
            # among another instance's answers rightly moves.
            if base.category != "healthy":
                row.failures += 1
                row.evidence_kept += got.first_cited == base.first_cited
            row.plan_kept += got.kinds == base.kinds
            if got.category != base.category or (
                base.category != "healthy" and got.first_cited != base.first_cited
            ):
                row.changed.append(
                    f"{inc.id}: {base.category}@{base.first_cited} -> {got.category}@{got.first_cited}"
                )
    return [rows[n] for n in names]


def table(rows: Sequence[Row]) -> str:
    out = [
        f"{'transformation':<20} {'cases':>5} {'category kept':>14} {'evidence kept':>14} {'plan kept':>10}"
    ]
    for r in rows:
        f = r.figures()
        out.append(
            f"{r.transform:<20} {r.cases:>5} {f['category_kept']:>14.1%} {f['evidence_kept']:>14.1%} "
            f"{f['plan_kept']:>10.1%}"
        )
    return "\n".join(out)


def load(split: str) -> list[Incident]:
    from evals.harness import split_dirs
    from mcp_tools.incident import load_incident_dir

    if split in ("blind", "real", "all"):
        raise SystemExit("perturb: the blind split is never tuned against; use --split dev or composed")
    out: list[Incident] = []
    for _name, folder in split_dirs(split):
        good, _bad = load_incident_dir(folder)
        out.extend(i for i in good if i.logs)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evals.tools.perturb", description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="dev", choices=("dev", "composed"))
    ap.add_argument("--only", default="", help="comma-separated transformation names")
    ap.add_argument("--changed", action="store_true", help="list the cases whose diagnosis changed")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    known = TRANSFORMS | EXCERPTS
    names = [n for n in a.only.split(",") if n] or list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        print(
            f"perturb: unknown transformation(s) {', '.join(unknown)}; one of {', '.join(known)}",
            file=sys.stderr,
        )
        return 2
    started = time.perf_counter()
    rows = stability(load(a.split), names)
    if a.json:
        print(json.dumps([r.figures() for r in rows], indent=2))
    else:
        print(table(rows))
        print(f"({time.perf_counter() - started:.1f} s)")
    if a.changed:
        for r in rows:
            for c in r.changed:
                print(f"{r.transform}: {c}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
