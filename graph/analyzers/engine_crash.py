"""engine_crash: the engine died for another reason (CUDA fault, NCCL, segfault, a dead engine core).

Wordings: "CUDA error: an illegal memory access was encountered"; "NCCL error" / "ncclInternalError";
"vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue"; "EngineCore encountered a
fatal error"; "Segmentation fault (core dumped)"; "CUDA error: unspecified launch failure";
"uncorrectable ECC error". "Engine core initialization failed. See root cause above." and "died
unexpectedly" are symptoms: they yield to any cause, and tracebacks after an orderly shutdown
(SIGTERM, CancelledError, KeyboardInterrupt) are not causes at all.

A crash a restart repeats is marked (``repeats_on_restart``): before the engine died, the image's code
failed to import or a GPU kernel rejected this device or its arguments — the same revision does the
same thing again, whenever in its life it happened.
"""

from __future__ import annotations

import re

from graph.analyzers.base import (
    SHUTDOWN,
    START_MARK,
    Evidence,
    Finding,
    Line,
    LogView,
    after_shutdown,
    failed_in_startup,
    finding,
    frame_in,
    in_step_loop,
    innermost_frame,
    phase_of,
    raised_in,
    says_something,
    started_between,
    view,
)
from graph.observation import Observation
from mcp_tools.vocabulary import (
    CACHE_FILE_CUT,
    COMPILED_CODE,
    COMPILER_CODE_PATH,
    COMPILER_SAID,
    CRASH,
    CRASH_ADVICE,
    CRASH_DIED,
    CRASH_REPEATS,
    EXCEPTION,
    EXCEPTION_PREFILTER,
    FACT_CUDA_FAULT,
    FRAME,
    GRAPH_FRAMES,
    IPC_CODE_PATH,
    KILLED_FROM_OUTSIDE,
    KIND_API_MISMATCH,
    LOOP_FRAMES,
    NCCL_DETAIL_CAUSES,
    NCCL_LAST_ERROR,
    RAY_WORKER_VANISHED_RE,
    REPORTS_ONLY,
    TRACEBACK_HEAD,
    UP_PHASES,
    Phase,
)


def _introduced_until(v: LogView, n: int) -> int | None:
    """Where the traceback a death marker at line ``n`` introduces ends ("EngineCore encountered a
    fatal error." then "Traceback ..."): what it died of is printed after it, up to the next start
    (None: the marker introduces no traceback). The traceback may come one record late, after the
    exception's message (V0's engine logs ``repr(e)`` and then its traceback)."""
    proc = v.lines[n - 1].proc
    following = [ln for ln in v.lines[n : n + 12] if not ln.head and ln.proc == proc][:2]
    if not any(TRACEBACK_HEAD.search(ln.text) or FRAME.match(ln.text) for ln in following):
        return None  # (a paste that cut the traceback's banner starts at its first frame)
    restart = v.first(START_MARK, after=n)
    return min(n + 200, restart.n if restart else v.total + 1)


def _died_of(v: LogView, n: int) -> Line | None:
    """The exception the traceback a death marker at line ``n`` introduces ends in: what it died of."""
    end = _introduced_until(v, n)
    if end is None:
        return None
    proc = v.lines[n - 1].proc
    return next(
        (
            ln
            for ln in v.grep(EXCEPTION, after=n, before=end, prefilter=EXCEPTION_PREFILTER)
            if ln.proc == proc and not REPORTS_ONLY.search(ln.text)
        ),
        None,
    )


def _shared_objects_gone(v: LogView) -> Line | None:
    """An exception raised in Python's own code for what processes share (``IPC_CODE_PATH``:
    ``FileNotFoundError`` in ``SemLock._rebuild``)."""
    if v.first(IPC_CODE_PATH) is None:  # no such frame in the log: no exception to trace back
        return None
    return next(
        (
            ln
            for ln in v.grep(EXCEPTION, prefilter=EXCEPTION_PREFILTER)
            if not REPORTS_ONLY.search(ln.text) and raised_in(v, ln, IPC_CODE_PATH)
        ),
        None,
    )


def _repeats(v: LogView, n: int) -> bool:
    """Did something a restart repeats happen in this life of the server, before it died at line ``n``?
    (An earlier life's import error is that life's; this one may have been started with a fixed image.)
    Also code of two versions that do not fit (``KIND_API_MISMATCH``: an object without the attribute
    the caller reads, a call with arguments the callee does not take): the same code meets again."""
    life = v.last(START_MARK, before=n)
    end = _introduced_until(v, n) or n + 1
    after = life.n - 1 if life else 0
    return any(v.first(p, after=after, before=end) is not None for p in (CRASH_REPEATS, KIND_API_MISMATCH))


#: How far after a crash line NCCL's "Last error:" may come and still be that error's (the raise, the
#: exception, torch's explanation of the NCCL code, then "Last error:").
_DETAIL_REACH = 6


def _reports_a_named_cause(v: LogView, ln: Line) -> bool:
    """Crash line ``ln`` belongs to an NCCL error whose own "Last error:" names another family's cause
    (a full /dev/shm, a duplicate GPU, a CUDA allocation): that family's analyzer reads the detail, and
    the NCCL error is only how torch.distributed reported it."""
    head = v.first(NCCL_LAST_ERROR, after=ln.n - 1, before=ln.n + _DETAIL_REACH + 1)
    if head is None:
        return False
    detail = next((x for x in v.lines[head.n : head.n + 2] if x.proc == head.proc and x.text.strip()), None)
    return detail is not None and any(p.search(detail.text) for p in NCCL_DETAIL_CAUSES)


def _in_cuda_graph(v: LogView, lines: list[Line]) -> bool:
    """The traceback ending at one of ``lines`` was capturing or replaying a CUDA graph."""
    return any(frame_in(v, ln, GRAPH_FRAMES) for ln in lines)


def analyze(obs: Observation) -> list[Finding]:
    v = view(obs)
    gone = _shared_objects_gone(v)
    if gone is not None:
        frame = innermost_frame(v, gone)
        return [
            finding(
                "engine_crash",
                0.8,
                f"What the engine's processes share (semaphores, shared memory) was gone when one of them "
                f"reached for it (line {gone.n}): the host removed it under the running engine (systemd-"
                "logind's RemoveIPC, a cleaner of /dev/shm).",
                [*v.lines[frame.n - 1 : frame.n + 1], gone] if frame else [gone],
                pattern=EXCEPTION,
                analyzer="engine_crash",
                facts={"host_removed_ipc": True},
            )
        ]
    shutdown = v.first(SHUTDOWN)
    cutoff = shutdown.n if shutdown else None
    hits = [
        ln
        for ln in v.grep(CRASH)
        if (cutoff is None or ln.n < cutoff or not after_shutdown(v, ln.n))
        and not CRASH_ADVICE.match(ln.text)
        and not _reports_a_named_cause(v, ln)
        and not RAY_WORKER_VANISHED_RE.search(ln.text)  # a kill (host_memory_exceeded), not a crash
    ]
    if hits:
        cause = _died_of(v, hits[0].n)
        return [
            finding(
                "engine_crash",
                0.85,
                f"The vLLM engine crashed (line {hits[0].n}).",
                [*hits[:3], *([cause] if cause else [])],
                pattern=CRASH,
                analyzer="engine_crash",
                facts={
                    "cuda_fault": any(FACT_CUDA_FAULT.search(ln.text) for ln in hits),
                    "in_cuda_graph": _in_cuda_graph(v, [*hits[:3], *([cause] if cause else [])]),
                    "in_startup": failed_in_startup(v, hits[0].n),
                    # before it, or in its own words (a kernel launch that rejected its arguments)
                    "repeats_on_restart": _repeats(v, hits[0].n)
                    or any(CRASH_REPEATS.search(ln.text) for ln in hits[:3]),
                },
            )
        ]
    # A worker stopped by SIGTERM was shut down (after what failed, or from outside): not a death.
    died = [
        ln
        for ln in v.grep(CRASH_DIED)
        if not after_shutdown(v, ln.n)
        and not KILLED_FROM_OUTSIDE.search(ln.text)
        and not RAY_WORKER_VANISHED_RE.search(ln.text)
    ]
    if died:
        cause = _died_of(v, died[0].n)
        dead = finding(
            "engine_crash",
            0.7,
            f"The vLLM engine died (line {died[0].n}) of an exception no failure family explains "
            f"(line {cause.n})."
            if cause
            else f"The vLLM engine died (line {died[0].n}); nothing before it says why.",
            [*died[:2], *([cause] if cause else [])],
            pattern=CRASH_DIED,
            analyzer="engine_crash",
            specific=False,
            facts={
                "in_startup": failed_in_startup(v, died[0].n),
                "repeats_on_restart": _repeats(v, died[0].n),
                "in_cuda_graph": _in_cuda_graph(v, [died[0], *([cause] if cause else [])]),
            },
        )
        if cause is not None and cause.n > died[0].n:
            # a marker printed before the traceback it died of: it died where that traceback ends, and
            # what failed before then (there, or earlier) is the cause to look for
            dead.first_line = cause.n
        return [dead]
    cut = _cut_at_compiler_assert(v)
    if cut:
        return [
            finding(
                "engine_crash",
                0.6,
                f"The paste ends in a traceback cut at a failing assert (line {cut[-1].n}) of torch.compile's"
                " compiler while the engine started: a bug of the compiler stack with this model.",
                cut,
                analyzer="engine_crash",
                facts={"in_startup": True, "in_compile": True},
            )
        ]
    return []


def _cut_at_compiler_assert(v: LogView) -> list[Line]:
    """A process whose last words are a traceback cut at an ``assert`` (its frame, the assert's source
    line, carets; no exception after it), with vLLM's compilation backend or Dynamo on that stack, and
    that process never seen serving: the frame and the assert ([] otherwise)."""
    last_said: dict[str, Line] = {}
    for ln in v.lines:
        if says_something(ln):
            last_said[ln.proc] = ln
    for last in last_said.values():
        if not last.text.lstrip().startswith("assert ") or not v.is_source(last.n):
            continue
        if phase_of(v, last.n) >= Phase.API_UP or _served_by(v, last):
            continue
        stack = [
            ln
            for ln in v.lines[max(0, last.n - 60) : last.n]
            if ln.proc == last.proc and FRAME.match(ln.text)
        ]
        if stack and any(COMPILER_CODE_PATH.search(ln.text) for ln in stack):
            return [stack[-1], last]
    return []


def _served_by(v: LogView, ln: Line) -> bool:
    """The process that printed ``ln`` answered requests before it (another's answers may be another
    instance's)."""
    return any(ph is Phase.SERVING and m < ln.n and v.lines[m - 1].proc == ln.proc for m, ph in v.milestones)


def raised_in_compiled_code(v: LogView, exc: Line) -> bool:
    """Exception ``exc`` (or a copy of it another rank printed) was raised by code torch.compile
    generated: the frame printed just before it is Inductor's or an FX graph's. Not when it says a
    file it read was empty or cut short (``CACHE_FILE_CUT``): that names the cause, a broken cache."""
    if CACHE_FILE_CUT.search(exc.text):
        return False
    for ln in v.grep(EXCEPTION, prefilter=EXCEPTION_PREFILTER):
        if ln.text != exc.text:
            continue
        for prev in reversed(v.lines[max(0, ln.n - 5) : ln.n - 1]):
            record = v.lines[prev.head - 1] if prev.head else prev
            if FRAME.match(record.text):
                if COMPILED_CODE.search(record.text):
                    return True
                break
    return False


def _start_crash(v: LogView, exc: Line) -> str | None:
    """What to say when the engine's start crashed on exception ``exc``: it was raised after the
    weights loaded, while the engine built itself (profiling, KV cache, graphs, warm-up), and no start
    completed after it. A bug of this build with this model: the same start crashes the same way again
    (``in_startup``). None when ``exc`` is not such a failure."""
    phase = phase_of(v, exc.n)
    if (
        not Phase.LOADED <= phase < Phase.ENGINE_READY
        or not failed_in_startup(v, exc.n)
        or in_step_loop(v, exc)
    ):
        return None
    return (
        f"The engine's start crashed at '{phase.name.lower()}', after the weights loaded, on an exception "
        f"no known failure family explains (line {exc.n}); nothing started after it."
    )


def _compiler_failed(v: LogView, exc: Line) -> str | None:
    """What to say when torch.compile's compiler failed on exception ``exc`` while the engine started
    (raised in vLLM's compilation backend or Dynamo, or in the compiler's own words, in it or the record
    after it), before the server was up (its process never seen serving) and with no start completed
    after it. None otherwise."""
    said = [exc, *v.lines[exc.n : exc.n + 2]]
    if not (
        raised_in(v, exc, COMPILER_CODE_PATH)
        or any(ln.proc == exc.proc and COMPILER_SAID.search(ln.text) for ln in said)
    ):
        return None
    if phase_of(v, exc.n) >= Phase.API_UP or _served_by(v, exc):
        return None
    if started_between(v, after=exc.n, phases=UP_PHASES) is not None:
        return None
    return (
        f"torch.compile's compiler failed while the engine started (line {exc.n}): a bug of the compiler "
        "stack with this model, which the same start meets again."
    )


def _loop_crash(v: LogView, exc: Line) -> str | None:
    """What to say when exception ``exc`` passed through the engine's own loop (``LOOP_FRAMES``), which
    catches nothing: the loop ended with it, and the engine stopped serving. Read in the traceback that
    ends at ``exc``, in the one ``exc`` introduces (V0 prints ``repr(e)`` before its traceback), and at
    the ends of their chains ("The above exception was the direct cause of ..."). None when no such
    frame is on them."""
    ends = [exc, *([died] if (died := _died_of(v, exc.n)) else [])]
    ends += [end for e in ends if (end := v.chain_end(e.n)) is not None]
    loop = next((f for e in ends if (f := frame_in(v, e, LOOP_FRAMES)) is not None), None)
    if loop is None and (until := _introduced_until(v, exc.n)) is not None:
        # the traceback ``exc`` introduces, even where the paste ends before its last line
        loop = next(
            (ln for ln in v.lines[exc.n : until - 1] if ln.proc == exc.proc and _frame_of(ln, LOOP_FRAMES)),
            None,
        )
    if loop is None:
        return None
    return (
        f"An exception no known failure family explains (line {exc.n}) ended the engine's loop "
        f"(line {loop.n}): the engine stopped serving."
    )


def _frame_of(ln: Line, functions: re.Pattern[str]) -> bool:
    """Line ``ln`` is a traceback's frame in a function ``functions`` matches."""
    m = FRAME.match(ln.text)
    return m is not None and functions.match(m.group("fn")) is not None


def unexplained_crash(v: LogView, exc: Line, evidence: list[Evidence]) -> Finding | None:
    """The engine crashed on exception ``exc``, which no family's wording or kind explains: in its start
    after the weights loaded, by ending its loop, or in torch.compile's compiler while it started. None
    when none says so, or when ``exc`` was raised in torch.compile's generated code (whose cause the log
    cannot name)."""
    summary = _compiler_failed(v, exc)
    if summary is not None:
        facts: dict[str, object] = {"in_startup": True, "in_compile": True}
    elif raised_in_compiled_code(v, exc):
        return None
    else:
        summary = _start_crash(v, exc) or _loop_crash(v, exc)
        if summary is None:
            return None
        facts = {"in_startup": failed_in_startup(v, exc.n), "repeats_on_restart": _repeats(v, exc.n)}
    return Finding(
        category="engine_crash",
        confidence=0.6,
        summary=summary,
        evidence=evidence,
        analyzer="engine_crash",
        first_line=exc.n,
        last_line=exc.n,
        facts=facts,
    )
