"""The common result type of every analyzer and the indexed view of the logs they share.

Analyzers are pure functions ``analyze(obs) -> list[Finding]`` (k8sgpt's pkg/analyzer style: one
failure family per module, one result type, one registry in ``__init__``). They cite 1-based log
line numbers. ``LogView`` is built once per observation: the lines are classified by *shape*
(digits collapsed), so the regexes run once per distinct line shape, not once per line.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from pydantic import BaseModel, Field

from graph.analyzers.needles import may_match, needles
from graph.observation import Observation
from mcp_tools.records import Clean, clean, continues, cut_at_width, told_severity
from mcp_tools.vocabulary import (
    ANY_MILESTONE,
    BARE_EXCEPTION,
    CHAINED,
    ENGINE_START_FAILED,
    EXCEPTION,
    FAMILY_CHECK_FRAMES,
    FRAME,
    FRAME_PHASES,
    HUNG_STATS,
    LOADED,
    MILESTONES,
    OVERLOAD_STATS,
    RESTARTED,
    SERVER_ERROR_STATUS,
    SHUTDOWN,
    START_MARK,
    STARTED,
    STEP_FRAMES,
    TRACEBACK_HEAD,
    UP_PHASES,
    WORKER_TEARDOWN,
    Phase,
)

__all__ = ["LOADED", "RESTARTED", "SHUTDOWN", "START_MARK", "STARTED"]


class Evidence(BaseModel):
    line: int  # 1-based log line; 0 = not a log line (a metric, a Cloud Run condition, the spec)
    text: str


class Finding(BaseModel):
    category: str
    confidence: float
    summary: str
    evidence: list[Evidence] = Field(default_factory=list)
    analyzer: str = ""
    first_line: int = 0  # the earliest line of the cause (orders findings in time)
    last_line: int = 0  # the last line showing it (a later successful start means it recovered)
    specific: bool = True  # False for generic symptoms (a probe gave up, "engine died") that yield to causes
    facts: dict[str, object] = Field(default_factory=dict)  # figures read from the evidence

    @property
    def cited_lines(self) -> list[int]:
        return [e.line for e in self.evidence if e.line > 0]


@dataclass(slots=True)
class Line:
    n: int
    text: str  # the record's own words (``mcp_tools.records.clean``: prefixes, colour, quote marks gone)
    severity: str  # as the text says, else as its shape says, else the field (``records.severity_of``)
    raw: str = ""  # the physical line as logged
    proc: str = ""  # the process that printed it, when its prefix says
    #: A hard-wrapped record: the physical lines after this one that continue it (its ``text`` is the
    #: whole record; each continuation line is also a line of its own).
    cont: tuple[tuple[int, str], ...] = ()
    head: int = 0  # for a continuation line: the line whose record it continues
    #: The text itself says it is an error (its level or its shape), not only the entry's field, which
    #: a platform sets for a whole stream (Cloud Run: everything on stderr is ERROR).
    said_error: bool = False


_SHAPE = re.compile(r"\d[\da-f]*")
_HAS_DIGIT = re.compile(
    r"(?<![\\{,])\d(?![\d,]*\})"
)  # a literal digit in a pattern: matching depends on the numbers


#: Severities that give advice: a line at one of them reports no failure of its own.
ADVICE = frozenset({"WARNING", "DEBUG"})


class Window(TypedDict, total=False):
    """Where ``LogView.grep`` / ``first`` / ``last`` look: lines with ``after`` < n < ``before``;
    ``prefilter``, the digit-free gate ``LogView.matching`` takes."""

    after: int
    before: int | None
    prefilter: re.Pattern[str] | None


class LogView:
    """The observation's log lines grouped by shape (digits and hex collapsed).

    ``grep`` tests a pattern once per shape and returns every line of the matching shapes, so an
    analyzer costs the number of distinct line shapes, not the number of lines. A pattern that
    names a number (``exit code 137``, ``429``) is tested line by line.
    """

    def __init__(self, obs: Observation) -> None:
        self.lines: list[Line] = []
        head: Line | None = None
        last_ts: str | None = None
        prev: Clean | None = None
        joined = ""  # the head's words and its continuations, as printed
        head_told = ""  # the severity the head's own line told (its level, or its shape)
        for i, entry in enumerate(obs.logs, start=1):
            raw = entry.message
            c = clean(raw)
            told = told_severity(c)
            line = Line(
                n=i,
                text=c.text,
                severity=told or entry.severity,
                raw=raw,
                proc=c.proc,
                said_error=told in ("ERROR", "CRITICAL"),
            )
            joinable = entry.json_payload is None and (entry.timestamp is None or entry.timestamp == last_ts)
            last_ts = entry.timestamp
            if (
                head is not None
                and prev is not None
                and len(head.cont) < 8
                and joinable
                and continues(prev, c)
            ):
                # Cut at a terminal's width the record goes on mid-word; cut elsewhere, at a space.
                rest = c.body.rstrip()
                glue = "" if rest.startswith(" ") or (cut_at_width(prev, c) and not prev.spaced) else " "
                head.cont += ((i, raw),)
                # Cleaned whole again: what the head's cut hid (a tqdm bar glued in front) shows now.
                joined = f"{joined}{glue}{rest}"
                whole = clean(joined)
                head.text = whole.text
                if not head_told:  # a head that told nothing: the whole record may (an assert's "failed.")
                    said = told_severity(whole)
                    if said:
                        head.severity, head.said_error = said, said in ("ERROR", "CRITICAL")
                line.severity, line.said_error = head.severity, head.said_error
                line.head = head.n
            else:
                head = line
                joined = c.body
                head_told = told
            prev = c
            self.lines.append(line)
        self.total = len(self.lines)
        # Lines of superseded revisions are history: kept (numbered, in windows) but never matched.
        self.history = obs.history_lines()
        groups: dict[str, list[Line]] = {}
        for ln in self.lines:
            if ln.n in self.history or ln.head:
                continue  # history is never matched; the rest of a wrapped record is in its head's text
            groups.setdefault(_SHAPE.sub("0", ln.text[:4000]), []).append(ln)
        self._groups = list(groups.values())
        self._cache: dict[tuple[str, int, str], tuple[list[Line], list[int]]] = {}
        self._lower: dict[int, str] = {}
        self._head_texts: list[tuple[list[Line], str, str]] | None = None
        self._milestones: list[tuple[int, Phase]] | None = None
        self._first_served: int | None = None
        #: What the module's functions derive from the whole view once (``_once``): answered per call
        #: by a lookup, never by a scan (they are asked once per failing line of a 50,000-line log).
        self._derived: dict[object, Any] = {}

    def matching(
        self, pattern: re.Pattern[str], prefilter: re.Pattern[str] | None = None
    ) -> tuple[list[Line], list[int]]:
        """Every line that matches, in order, and their numbers (cached per pattern).

        A pattern with a literal digit is tested line by line, within the shapes that match the
        digit-free ``prefilter`` when one is given (else within every shape: correct but slow).
        """
        key = (pattern.pattern, pattern.flags, prefilter.pattern if prefilter else "")
        hit = self._cache.get(key)
        if hit is None:
            out: list[Line] = []
            need, gate = needles(pattern), needles(prefilter) if prefilter is not None else None
            low = self._lowered
            if prefilter is not None or _HAS_DIGIT.search(pattern.pattern):
                for g in self._groups:
                    head = g[0]
                    if prefilter is None or (
                        may_match(gate, head.text, low(head)) and prefilter.search(head.text)
                    ):
                        out.extend(
                            ln for ln in g if may_match(need, ln.text, low(ln)) and pattern.search(ln.text)
                        )
            else:  # this loop runs for every pattern over every shape
                search = pattern.search
                for g, text, lowered in self._heads():
                    if may_match(need, text, lowered) and search(text):
                        out.extend(g)
            out.sort(key=lambda x: x.n)
            self._cache[key] = hit = (out, [ln.n for ln in out])
        return hit

    def _heads(self) -> list[tuple[list[Line], str, str]]:
        """Each shape's lines, its first line's text and that text lower-cased, made once per view."""
        if self._head_texts is None:
            self._head_texts = [(g, g[0].text, self._lowered(g[0])) for g in self._groups]
        return self._head_texts

    def _lowered(self, ln: Line) -> str:
        """The line's text lower-cased, once per line (what ``needles.may_match`` compares)."""
        got = self._lower.get(ln.n)
        if got is None:
            got = self._lower[ln.n] = ln.text.lower()
        return got

    def grep(self, pattern: re.Pattern[str], **where: Unpack[Window]) -> Iterator[Line]:
        """Lines whose text matches, optionally only those with after < n < before."""
        after, before = where.get("after", 0), where.get("before")
        lines, nums = self.matching(pattern, where.get("prefilter"))
        i = bisect_right(nums, after) if after else 0
        for ln in lines[i:]:
            if before is not None and ln.n >= before:
                break
            yield ln

    def first(self, pattern: re.Pattern[str], **where: Unpack[Window]) -> Line | None:
        return next(self.grep(pattern, **where), None)

    def last(self, pattern: re.Pattern[str], **where: Unpack[Window]) -> Line | None:
        after, before = where.get("after", 0), where.get("before")
        lines, nums = self.matching(pattern, where.get("prefilter"))
        idx = bisect_left(nums, before) if before is not None else len(lines)
        if idx > 0 and lines[idx - 1].n > after:
            return lines[idx - 1]
        return None

    # The server's life -----------------------------------------------------------------------------

    @property
    def milestones(self) -> list[tuple[int, Phase]]:
        """(line, phase) for every milestone line of the current revision, in order (cached)."""
        if self._milestones is None:
            # The phase depends on the words, not the numbers: decided once per line shape.
            out: list[tuple[int, Phase]] = []
            for g in self._groups:
                if not ANY_MILESTONE.search(g[0].text):
                    continue
                phase = max((ph for ph, p in MILESTONES if p.search(g[0].text)), default=None)
                if phase is None:
                    continue
                for ln in g:
                    if phase is Phase.SERVING and SERVER_ERROR_STATUS.search(ln.text):
                        continue  # a 5xx answer is not service
                    out.append((ln.n, phase))
            out.sort()
            self._milestones = out
        return self._milestones

    def served_before(self, n: int) -> bool:
        """Requests were answered before line ``n`` (by this process or, on Cloud Run, maybe another
        instance): where nothing of a start-up was seen, the life the log shows was serving."""
        if self._first_served is None:  # the first answer's line, found once (0: none)
            self._first_served = next((m for m, ph in self.milestones if ph is Phase.SERVING), 0)
        return 0 < self._first_served < n

    def served_through(self, n: int) -> bool:
        """Every process that answered requests before line ``n`` answered them after it too: what failed
        at ``n`` stopped none of them (their lives, or instances, are not the one that failed)."""
        served = [m for m, ph in self.milestones if ph is Phase.SERVING]
        before = {self.lines[m - 1].proc for m in served if m < n}
        after = {self.lines[m - 1].proc for m in served if m > n}
        return bool(before) and before <= after

    def phase_at(self, n: int) -> Phase:
        """How far the current start-up had come when line ``n`` was written: the furthest start-up
        milestone since the server last started. A start-up milestone earlier in the order than one
        already passed means a new start (the life begins again). Answered traffic is not a
        milestone of the start-up: on Cloud Run another instance may be serving while this one loads."""
        reached = Phase.NONE
        for m, ph in self.milestones:
            if m >= n:
                break
            if ph is Phase.SERVING:
                continue
            if ph is Phase.SHUTDOWN:
                if reached >= Phase.API_UP:
                    reached = ph
                continue
            reached = ph if ph < reached else max(reached, ph)
        return reached

    def phase_of_stack(self, n: int, reach: int = 400) -> Phase:
        """Where in the start-up the traceback that ends at line ``n`` was, by the functions on its
        stack (``FRAME_PHASES``): the deepest frame that names a step, in the last traceback of the
        chain (``During handling of the above exception``) that names one. ``Phase.NONE`` when the
        stack names none, or ``n`` ends no traceback. Only the process that printed line ``n`` is read
        (tracebacks of several ranks interleave)."""
        proc = self.lines[n - 1].proc if 0 < n <= self.total else ""
        head = next(
            (
                i
                for i in range(n, max(0, n - reach), -1)
                if TRACEBACK_HEAD.search(self.lines[i - 1].text) and self.lines[i - 1].proc == proc
            ),
            None,
        ) or self._frames_start(n, reach)
        if head is None:
            return Phase.NONE
        found = Phase.NONE
        end = n
        while True:
            current = Phase.NONE
            for ln in self.lines[head - 1 : end]:
                if ln.proc != proc:
                    continue
                m = FRAME.match(ln.text)
                if m is not None:
                    current = next((ph for ph, p in FRAME_PHASES if p.search(m.group("fn"))), current)
            found = current or found
            # The chain goes on: a connector right after this traceback, then the next one.
            nxt = next(
                (i for i in self._records_after(end, 3) if CHAINED.search(self.lines[i - 1].text)), None
            )
            if nxt is None:
                return found
            head = next(  # the next traceback's banner, or its first frame where the paste cut the banner
                (
                    i
                    for i in self._records_after(nxt, 3)
                    if TRACEBACK_HEAD.search(self.lines[i - 1].text) or FRAME.match(self.lines[i - 1].text)
                ),
                None,
            )
            if head is None:
                return found
            end = next(
                (
                    i
                    for i in range(head + 1, min(self.total, head + reach) + 1)
                    if EXCEPTION.match(self.lines[i - 1].text)
                ),
                min(self.total, head + reach),
            )

    def _frames_start(self, n: int, reach: int) -> int | None:
        """A paste that begins inside a traceback (its ``Traceback (most recent call last):`` cut
        off): the first frame of the run of frames that ends at line ``n`` (a frame's source line and
        carets stand between two frames). None when no frame comes right before ``n``."""
        start, gap = None, 0
        for i in range(n - 1, max(0, n - reach), -1):
            if FRAME.match(self.lines[i - 1].text):
                start, gap = i, 0
            else:
                gap += 1
                if gap > 4:
                    break
        return start

    def chain_end(self, n: int, reach: int = 400) -> Line | None:
        """The exception that ends the chain an exception at line ``n`` starts ("The above exception
        was the direct cause of the following exception", "During handling of the above exception"):
        what failed because of it, often the line that says what was being done. None when ``n``
        starts no chain. Only the same process's lines are read (others interleave)."""
        proc = self.lines[n - 1].proc if 0 < n <= self.total else ""
        end, last = n, None
        while True:
            nxt = next(
                (i for i in self._records_after(end, 3) if CHAINED.search(self.lines[i - 1].text)), None
            )
            if nxt is None:
                return last
            end = next(
                (
                    i
                    for i in range(nxt + 1, min(self.total, nxt + reach) + 1)
                    if not self.lines[i - 1].head
                    and self.lines[i - 1].proc == proc
                    and EXCEPTION.match(self.lines[i - 1].text)
                ),
                0,
            )
            if not end:
                return last
            last = self.lines[end - 1]

    def _records_after(self, n: int, k: int) -> Iterator[int]:
        """The numbers of the next ``k`` records after line ``n`` that the same process printed (the
        rest of a wrapped record is part of it, not a record of its own; other processes interleave)."""
        proc = self.lines[n - 1].proc if 0 < n <= self.total else ""
        i = n + 1
        while k > 0 and i <= self.total:
            ln = self.lines[i - 1]
            if not ln.head and ln.proc == proc:
                k -= 1
                yield i
            i += 1

    def is_source(self, n: int) -> bool:
        """Line ``n`` is a traceback's quotation of source code (the line after ``File "...", line N,
        in f``), not a record: ``raise ValueError("No available memory for the cache blocks. "``."""
        if not 1 < n <= self.total:
            return False
        proc = self.lines[n - 1].proc
        for ln in reversed(self.lines[max(0, n - 5) : n - 1]):
            if ln.proc == proc:  # the line before it from the same process (others interleave)
                record = self.lines[ln.head - 1] if ln.head else ln  # a wrapped frame: its whole record
                return FRAME.match(record.text) is not None
        return False

    def records_first(self, hits: list[Line]) -> list[Line]:
        """``hits`` without the traceback's quoted source, unless nothing else matched: the exception
        line says what failed; the source that raised it only echoes the words."""
        return [ln for ln in hits if not self.is_source(ln.n)] or hits

    def window(self, n: int, before: int, after: int = 0) -> list[Line]:
        lo = max(1, n - before)
        hi = min(self.total, n + after)
        return self.lines[lo - 1 : hi]

    def record_before(self, ln: Line, *, same_proc: bool = True) -> Line | None:
        """The nearest line in the three before ``ln`` that says something (of ``ln``'s process, unless
        ``same_proc`` is False: a native exception prints its message and banner as one string, and the
        rank's tag may be on the message only)."""
        return next(
            (
                c
                for c in reversed(self.window(ln.n, 3)[:-1])
                if (c.proc == ln.proc or not same_proc) and says_something(c)
            ),
            None,
        )


def view(obs: Observation) -> LogView:
    """The (cached) log view of an observation."""
    v = obs._cache.get("view")
    if v is None:
        v = LogView(obs)
        obs._cache["view"] = v
    return v


def excerpt(text: str, pattern: re.Pattern[str] | None = None, limit: int = 600) -> str:
    """The physical line of ``text`` that matches (a log entry may hold a whole traceback), cut to
    ``limit`` characters around the match. Always a verbatim substring of the log text."""
    line = text
    if "\n" in text:
        parts = text.splitlines()
        line = parts[-1]
        if pattern is not None:
            for p in parts:
                if pattern.search(p):
                    line = p
                    break
    line = line.strip()
    if len(line) <= limit:
        return line
    m = pattern.search(line) if pattern is not None else None
    start = max(0, m.start() - limit // 4) if m else 0
    return cut_words(line, limit, start=start)


def cut_words(text: str, limit: int, *, start: int = 0) -> str:
    """``text[start:start + limit]`` moved in to whole words: never a token cut in two (``Core_DP0``
    for ``EngineCore_DP0``). Still a verbatim substring of ``text``."""
    end = start + limit
    if start == 0 and end >= len(text):
        return text.strip()
    piece = text[start:end]
    if start > 0 and not text[start - 1].isspace():
        head, sep, rest = piece.partition(" ")
        piece = rest if sep and rest else piece
    if end < len(text) and not text[end].isspace():
        body, sep, _ = piece.rpartition(" ")
        piece = body if sep and body else piece
    return piece.strip()


def ev(ln: Line, pattern: re.Pattern[str] | None = None) -> Evidence:
    """The line as evidence: an excerpt of its words, verbatim from the physical line as logged."""
    return Evidence(line=ln.n, text=excerpt(ln.raw or ln.text, pattern))


def finding(
    category: str,
    confidence: float,
    summary: str,
    lines: Iterable[Line],
    *,
    pattern: re.Pattern[str] | None = None,
    analyzer: str,
    specific: bool = True,
    last_line: int | None = None,
    facts: dict[str, object] | None = None,
    extra: list[Evidence] | None = None,
) -> Finding:
    ls = sorted({ln.n: ln for ln in lines}.values(), key=lambda x: x.n)
    evidence: list[Evidence] = []
    # Cite lines that say different things (a repeated message once), earliest first.
    shapes: set[str] = set()
    distinct: list[Line] = []
    for ln in ls:
        key = _SHAPE.sub("0", ln.text[:200])
        if key not in shapes:
            shapes.add(key)
            distinct.append(ln)
    for ln in distinct[:4]:
        if "\n" in ln.text and pattern is not None:
            parts = [p for p in ln.text.splitlines() if pattern.search(p)] or [ln.text.splitlines()[-1]]
            evidence += [Evidence(line=ln.n, text=excerpt(p, pattern)) for p in parts[:3]]
        elif ln.cont:
            evidence.append(Evidence(line=ln.n, text=excerpt(ln.raw, pattern)))
            evidence += [Evidence(line=n, text=excerpt(t)) for n, t in ln.cont[:3]]
        else:
            evidence.append(ev(ln, pattern))
    evidence += list(extra or [])
    first = ls[0].n if ls else 0
    return Finding(
        category=category,
        confidence=round(min(0.99, max(0.0, confidence)), 2),
        summary=summary,
        evidence=evidence,
        analyzer=analyzer,
        first_line=first,
        last_line=last_line if last_line is not None else (ls[-1].n if ls else 0),
        specific=specific,
        facts=facts or {},
    )


# Markers shared by several analyzers ---------------------------------------------------------------


def phase_of(v: LogView, n: int) -> Phase:
    """How far the start-up had come at line ``n``: its milestones, else (a paste that begins at the
    traceback) the functions on the traceback's stack."""
    phase = v.phase_at(n)
    if phase in (Phase.NONE, Phase.CONTAINER):
        phase = v.phase_of_stack(n) or phase
    return phase


def in_step_loop(v: LogView, exc: Line, reach: int = 400) -> bool:
    """The traceback that ends at ``exc`` passes through the engine's step loop (``STEP_FRAMES``)."""
    return step_frame(v, exc, reach) is not None


def step_frame(v: LogView, exc: Line, reach: int = 400) -> Line | None:
    """The frame of the engine's step loop (``STEP_FRAMES``) in the traceback that ends at ``exc``."""
    return frame_in(v, exc, STEP_FRAMES, reach)


def raised_in(v: LogView, ln: Line, files: re.Pattern[str]) -> bool:
    """The innermost frame of the traceback that ends at ``ln`` is in a file ``files`` matches."""
    path = innermost_path(v, ln)
    return path is not None and files.search(path) is not None


def innermost_frame(v: LogView, ln: Line) -> Line | None:
    """The innermost frame of the traceback that ends at ``ln`` (None: no frame shown)."""
    return frame_in(v, ln, _ANY_FUNCTION)


def innermost_path(v: LogView, ln: Line) -> str | None:
    """The file of the innermost frame of the traceback that ends at ``ln`` (None: no frame shown)."""
    innermost = innermost_frame(v, ln)
    m = FRAME.match(innermost.text) if innermost is not None else None
    return m.group("path") if m is not None else None


#: Any function's name (``frame_in`` then finds the innermost frame).
_ANY_FUNCTION = re.compile(r"")


def frame_in(v: LogView, exc: Line, functions: re.Pattern[str], reach: int = 400) -> Line | None:
    """The innermost frame of the traceback that ends at ``exc`` whose function ``functions`` matches."""
    for i in range(exc.n - 1, max(0, exc.n - reach), -1):
        ln = v.lines[i - 1]
        m = FRAME.match(ln.text)
        if m is not None and functions.match(m.group("fn")):
            return ln
        if TRACEBACK_HEAD.search(ln.text):
            return None
    return None


#: Tokens per second each running request makes at the least while its engine works, on any backend
#: (a CPU decodes a few per second): below it, with requests running and no prompt read, the engine is
#: stalled, not slow.
STALLED_TOKENS_PER_S_PER_REQUEST = 0.5


def stalled_stats(text: str) -> bool:
    """vLLM's periodic stats line says requests run and the engine makes (almost) nothing: no prompt
    read and under ``STALLED_TOKENS_PER_S_PER_REQUEST`` generated per running request."""
    m = HUNG_STATS.search(text)
    if m is None:
        return False
    prompt, gen, running = float(m.group(1)), float(m.group(2)), int(m.group(3))
    return running > 0 and prompt == 0.0 and gen < STALLED_TOKENS_PER_S_PER_REQUEST * running


def queued_idle(text: str) -> bool:
    """vLLM's periodic stats line says requests wait while none runs. The scheduler admits a waiting
    request at its next step whenever nothing runs (the whole cache is free), so an engine that steps
    shows this for a moment at most: two periods in a row say it stopped stepping."""
    m = OVERLOAD_STATS.search(text)
    return m is not None and int(m.group(1)) == 0 and int(m.group(2)) > 0


def left_stalled(v: LogView) -> Line | None:
    """The last stats period of an engine with work in it and nothing made, with nothing that engine's
    process ran after it: one period is too short to call a hang, and it is not a server that earned
    ``healthy`` either. Requests waiting and none running with no prompt read nor token made
    (``queued_idle``): an engine that steps admits them. Requests running and nothing made
    (``stalled_stats``) only where the log never shows that process making anything nor answering a
    request: an idle engine's stats can keep the last step's running count (its requests finished)."""
    stats = list(v.grep(HUNG_STATS))

    def made(ln: Line) -> bool:
        m = HUNG_STATS.search(ln.text)
        return m is not None and (float(m.group(1)) > 0.0 or float(m.group(2)) > 0.0)

    # per process: what each made (a stats period of progress) or answered (a serving milestone that is
    # not a stats line); another server's progress in the same stream says nothing of this one
    active = {ln.proc for ln in stats if made(ln)} | {
        v.lines[n - 1].proc
        for n, ph in v.milestones
        if ph is Phase.SERVING and not HUNG_STATS.search(v.lines[n - 1].text)
    }
    for ln in {ln.proc: ln for ln in stats}.values():
        queued = queued_idle(ln.text) and not made(ln)
        if (queued or (ln.proc not in active and stalled_stats(ln.text))) and not ran_after(v, ln):
            return ln
    return None


def ran_after(v: LogView, ln: Line) -> bool:
    """The server ran after line ``ln``: a start completed after it (the engine ready, the API up), or
    the process that printed it answered requests after it. What a start printed as an error and then
    got past (a backend it fell back from, a lookup it retried) did not stop it. Answers from another
    process say nothing: on Cloud Run they may be another instance's."""
    if started_between(v, after=ln.n, phases=UP_PHASES) is not None:
        return True
    if not ln.proc:
        return False

    def last_answers() -> dict[str, int]:
        out: dict[str, int] = {}
        for m, ph in v.milestones:
            if ph is Phase.SERVING and not SERVER_ERROR_STATUS.search(v.lines[m - 1].text):
                out[v.lines[m - 1].proc] = m
        return out

    return _once(v, "last answer by process", last_answers).get(ln.proc, 0) > ln.n


def cut_at_check(v: LogView, fn: re.Pattern[str]) -> list[Line]:
    """A pasted traceback cut at the check ``fn`` names, before its exception: its deepest frame (no
    frame or exception of the same process follows it) is the check, or the source line it quotes
    calls the check. Returns the frame and that source line ([] when no traceback is cut there)."""
    for ln in v.lines:
        m = FRAME.match(ln.text)
        if m is None or ln.head:
            continue
        after = [x for x in v.lines[ln.n : ln.n + 40] if not x.head and x.proc == ln.proc and x.text.strip()][
            :4
        ]
        quoted = after[:1] if after and v.is_source(after[0].n) else []
        rest = [x for x in after[len(quoted) :] if says_something(x)]
        if rest and any(p.match(rest[0].text) for p in (FRAME, EXCEPTION, BARE_EXCEPTION)):
            continue  # not the deepest frame: the traceback goes on
        called = _CALLED.findall(quoted[0].text) if quoted else []
        if any(fn.match(name) for name in (m.group("fn"), *called)):
            return [ln, *quoted]
    return []


_CALLED = re.compile(r"(\w+)\(")


def says_something(ln: Line) -> bool:
    """The line is not blank and not a traceback's caret underline (``^^^^``, ``~~~^~~``)."""
    return bool(set(ln.text.strip()) - set("^~ "))


def cut_at_family_check(obs: Observation, category: str, what: str) -> list[Finding]:
    """The finding for a start that failed in vLLM's own check of ``category`` (``FAMILY_CHECK_FRAMES``)
    where the paste ends before the check's message; ``what`` says what the check checks."""
    v = view(obs)
    cut = cut_at_check(v, FAMILY_CHECK_FRAMES[category])
    if not cut or not failed_in_startup(v, cut[0].n):
        return []
    return [
        finding(
            category,
            0.75,
            f"The start failed in vLLM's check of {what} (line {cut[0].n}); the paste ends before its "
            "message.",
            cut,
            analyzer=category,
            facts={"failed_start": True},
        )
    ]


def _chain_ends_in(v: LogView, ln: Line, other: re.Pattern[str]) -> bool:
    end = v.chain_end(ln.n)
    return end is not None and other.search(end.text) is not None


def failed_in_startup(v: LogView, n: int) -> bool:
    """Line ``n`` fails a start that never completed: its phase is known (or the engine says, after
    it, that its start failed), before the API server was up, and no start completed after it. The
    same start fails the same way again, so a restart repeats it."""
    phase = phase_of(v, n)
    if phase >= Phase.API_UP:
        return False
    if phase in (Phase.NONE, Phase.CONTAINER):
        # unplaced: a start failed only where the engine says so before it starts again, and the log
        # shows it serving nothing before
        said = v.first(ENGINE_START_FAILED, after=n - 1)
        again = v.first(START_MARK, after=n)
        if said is None or (again is not None and again.n < said.n) or v.served_before(n):
            return False
    return started_between(v, after=n, phases=UP_PHASES) is None


def _once(v: LogView, key: object, make: Callable[[], Any]) -> Any:
    """``make()``, computed once per view under ``key``."""
    if key not in v._derived:
        v._derived[key] = make()
    return v._derived[key]


def started_between(
    v: LogView, after: int, before: int | None = None, *, phases: Collection[Phase] | None = None
) -> Line | None:
    """The last sign of a running server in (after, before): the engine ready, the API up, or an
    answer that is not a server error (``LogView.milestones``; ``phases`` narrows which count)."""
    running = frozenset(_RUNNING if phases is None else phases)
    signs: list[int] = _once(
        v,
        ("running", running),
        lambda: [
            n
            for n, ph in v.milestones
            if ph in running and not (ph in UP_PHASES and unfinished_bar(v.lines[n - 1].text))
        ],
    )
    i = bisect_left(signs, before) if before is not None else len(signs)
    return v.lines[signs[i - 1] - 1] if i and signs[i - 1] > after else None


_RUNNING = frozenset({*UP_PHASES, Phase.SERVING})


_BAR = re.compile(r"\|\s*(\d+)/(\d+)\s*\[")
#: A bar's percentage, before the bar itself ("Processed prompts:  54%|"): all a wrapped bar may keep.
_BAR_PERCENT = re.compile(r":\s+(\d{1,3})%\|")


def unfinished_bar(text: str) -> bool:
    """A progress bar short of its total ("Processed prompts:  54%|...| 1078/2000 [...]"): the last
    state of a run that stopped, not a run that finished. A bar wrapped before its counter says it by
    its percentage."""
    m = _BAR.search(text)
    if m is not None:
        return int(m.group(1)) < int(m.group(2))
    p = _BAR_PERCENT.search(text)
    return p is not None and int(p.group(1)) < 100


def after_shutdown(v: LogView, n: int) -> bool:
    """Line ``n`` follows an orderly shutdown (SIGTERM, Ctrl-C, a scale-down) with no restart in
    between: what fails then is the teardown, not a cause. A shutdown right after an exception (within
    a few records) is not orderly: it is that failure's own teardown ("Shutting down Ray distributed
    executor" after a ModuleNotFoundError)."""
    # Neither a worker's teardown nor a cancellation the traceback chains on from ("CancelledError",
    # then "The above exception was the direct cause of ...": a request cut short by what failed).
    stops: list[int] = _once(
        v,
        "orderly stops",
        lambda: [
            ln.n
            for ln in v.grep(SHUTDOWN)
            if not WORKER_TEARDOWN.search(ln.text) and not (EXCEPTION.match(ln.text) and v.chain_end(ln.n))
        ],
    )
    i = bisect_left(stops, n)
    sd = v.lines[stops[i - 1] - 1] if i else None
    if sd is None or v.last(START_MARK, after=sd.n, before=n) is not None:
        return False
    lo = sd.n
    for _ in range(4):  # the records just before the shutdown
        lo -= 1
        while lo >= 1 and (v.lines[lo - 1].head or not v.lines[lo - 1].text):
            lo -= 1
        if lo < 1:
            break
        if EXCEPTION.match(v.lines[lo - 1].text):
            return False
    return True


def evidence_text(f: Finding) -> str:
    """The finding's cited text, joined (what its facts are read from)."""
    return "\n".join(e.text for e in f.evidence)


def condition_texts(obs: Observation) -> list[str]:
    """Cloud Run condition messages as 'type (reason): message' lines (current conditions only: a
    superseded revision's condition is history, see ``Observation.condition_is_history``)."""
    out = []
    for c in obs.current_conditions():
        msg = str(c.get("message") or "")
        if not msg:
            continue
        kind = c.get("type") or c.get("condition") or "condition"
        reason = c.get("reason")
        out.append(f"{kind}{f' ({reason})' if reason else ''}: {msg}")
    return out


def match_conditions(obs: Observation, pattern: re.Pattern[str]) -> list[Evidence]:
    return [Evidence(line=0, text=excerpt(t)) for t in condition_texts(obs) if pattern.search(t)]


def simple(
    obs: Observation,
    *,
    category: str,
    pattern: re.Pattern[str],
    summary: str,
    confidence: float,
    exclude: re.Pattern[str] | None = None,
    specific: bool = True,
    prefilter: re.Pattern[str] | None = None,
    harmless_if_loaded: bool = False,
    resolved: Callable[[LogView, Line], bool] | None = None,
    chain_ends_in: re.Pattern[str] | None = None,
) -> list[Finding]:
    """A finding for every-line-matching analyzers: the first match is the cause, the rest repeats.
    ``resolved``: says of a hit that a later line shows the failure got past (a hit that does not stand).
    ``chain_ends_in``: a hit whose exception chain ends in an exception matching it is that
    exception's failure: the chain's last exception says what the first one meant.

    A warning is advice, not a failure ("Warning: You are sending unauthenticated requests to the HF
    Hub", "max_model_len is greater than ... this may lead to incorrect outputs"): a family that names
    an error is matched on lines that are not warnings (or debug output)."""
    v = view(obs)
    hits = [
        ln
        for ln in v.grep(pattern, prefilter=prefilter)
        if ln.severity not in ADVICE and not (exclude and exclude.search(ln.text))
    ]
    hits = v.records_first(hits)
    if harmless_if_loaded:
        hits = [ln for ln in hits if v.first(LOADED, after=ln.n) is None and not ran_after(v, ln)]
    if resolved is not None:
        hits = [ln for ln in hits if not resolved(v, ln)]
    if chain_ends_in is not None:
        hits = [ln for ln in hits if not _chain_ends_in(v, ln, chain_ends_in)]
    conds = match_conditions(obs, pattern)
    if not hits and not conds:
        return []
    f = finding(
        category,
        confidence if hits else confidence - 0.1,
        summary.format(
            line=hits[0].n if hits else "a Cloud Run condition", text=excerpt(hits[0].text, pattern)
        )
        if hits
        else summary.format(line="a Cloud Run condition", text=conds[0].text),
        hits[:3],
        pattern=pattern,
        analyzer=category,
        specific=specific,
        extra=conds[:2],
    )
    if not hits:  # condition-only evidence comes after every log line
        f.first_line = f.last_line = v.total + 1
    return [f]
