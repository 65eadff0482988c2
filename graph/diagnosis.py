"""Diagnosis: the analyzers' root cause first, a model's explanation second (when one is reachable).

``diagnose(obs)`` works with no model at all: the deterministic analyzers name the root cause
(``choose_root_cause``). It is the diagnose step only: proposing a plan (``graph.propose``) and
checking it (``graph.preflight``) are the next steps, chained by the graph's nodes and, for the faces
that run no graph, by ``graph.pipeline``. With a model (an OpenAI-compatible endpoint, e.g. the
monitored vLLM server), the model gets the compressed, fenced context (``build_context``) plus the
findings and answers in JSON validated against ``ModelAnswer``: a taxonomy category, evidence line
numbers that exist, a confidence. A malformed answer gets one retry, then the analyzers' diagnosis
stands; an unreachable endpoint leaves the analyzers' diagnosis and says so in ``notes``. The model
explains and may pick among the categories the analyzers support; it never writes plan steps.
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator

from graph.analyzers import Evidence, Finding, family_facts, run_analyzers, view
from graph.analyzers.base import (
    RESTARTED,
    START_MARK,
    Line,
    LogView,
    after_shutdown,
    condition_texts,
    cut_words,
    excerpt,
    frame_in,
    innermost_path,
    left_stalled,
    phase_of,
    raised_in,
    started_between,
    step_frame,
)
from graph.analyzers.engine_crash import raised_in_compiled_code, unexplained_crash
from graph.observation import Observation
from mcp_tools.logs import FENCE_CLOSE, FENCE_OPEN, compress_logs, count_tokens
from mcp_tools.model_endpoint import ModelEndpoint, resolve_model_endpoint
from mcp_tools.redact import redact, redact_args
from mcp_tools.taxonomy import Category
from mcp_tools.vocabulary import (
    API_LISTENING,
    BARE_EXCEPTION,
    BUILD_FRAMES,
    CONFIG_CODE_PATH,
    EXCEPTION,
    EXCEPTION_NAMED,
    EXCEPTION_PREFILTER,
    FAMILY_WORDING,
    FATAL,
    FATAL_PREFILTER,
    HEALTH_ANSWERED,
    HEALTH_PREFILTER,
    KIND_API_MISMATCH,
    KIND_ASKS_ENV,
    KIND_ASKS_SETTING,
    KIND_CHECKPOINT,
    KIND_CONFIG,
    KIND_CORRUPT,
    KIND_DENIED,
    KIND_ENVIRONMENT,
    KIND_MISSING,
    KIND_NO_DEVICE,
    KIND_NOT_INSTALLED,
    KIND_UNREACHABLE,
    KIND_UNSUPPORTED,
    LIBRARY_PATH,
    NATIVE_BANNER,
    REPORTS_ONLY,
    REQUEST_FRAMES,
    REQUEST_REFUSED,
    REQUEST_SERVED,
    REQUEST_SERVED_PREFILTER,
    RUST_PANIC,
    START_PENDING,
    TRACEBACK_HEAD,
    UP_PHASES,
    Phase,
)

log = logging.getLogger(__name__)

CONTEXT_LOG_BUDGET = 3000  # tokens of compressed logs in a model's context
_LOGS_HEADING = "## Logs (compressed)"

#: An analyzer finding this confident is not overruled by a model (it may only explain it).
CONFIDENT = 0.8

#: Categories whose evidence is ongoing request traffic, not a start-up event that can recover.
_ONGOING = {Category.OVERLOAD, Category.CONTEXT_TOO_LONG}


class Diagnosis(BaseModel):
    """What the diagnose step concluded (the SPEC section 4 keys but the plan, plus extensions)."""

    id: str
    category: str
    confidence: float
    summary: str
    evidence: list[Evidence] = Field(default_factory=list)
    prompt_tokens: int | None = None
    model_used: str | None = None
    notes: list[str] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    # What the model cost (0 / None without one): requests, final answers and the schema-valid ones,
    # completion tokens, the whole prompt's size as counted here, tool calls.
    model_calls: int = 0
    model_answers: int = 0
    model_valid_answers: int = 0
    completion_tokens: int | None = None
    prompt_size: int | None = None
    tool_calls: int = 0


# --------------------------------------------------------------------------------------------------
# Root cause from the analyzers
# --------------------------------------------------------------------------------------------------


class RootCause(BaseModel):
    category: str
    confidence: float
    summary: str
    evidence: list[Evidence] = Field(default_factory=list)
    finding: Finding | None = None
    notes: list[str] = Field(default_factory=list)
    #: An ``unknown`` the analyzers reached on purpose (the failure was raised in code torch.compile
    #: generated): a model may not fill it with one of the symptoms that followed.
    settled: bool = False


def _recovered(obs: Observation, f: Finding) -> int | None:
    """The line of a fresh successful start after the finding's last occurrence (None: not recovered).

    Traffic alone does not count: on Cloud Run other instances may serve while this one fails.
    """
    if f.category in _ONGOING or f.last_line <= 0 or f.last_line > len(obs.logs):
        return None
    s = view(obs).first(RESTARTED, after=f.last_line)
    return s.n if s else None


def choose_root_cause(findings: list[Finding], obs: Observation) -> RootCause:
    """The root cause among the findings: the earliest specific cause that did not recover.

    Generic symptoms (a probe giving up, a bare SIGKILL) count only when no specific cause exists.
    With no finding: ``healthy`` when nothing failed (or the server runs after what failed),
    otherwise ``unknown`` - never a guess.
    """
    notes: list[str] = []
    active: list[Finding] = []
    for f in findings:
        rec = _recovered(obs, f)
        if rec is not None:
            notes.append(f"{f.category} at line {f.first_line} recovered: the server ran again at line {rec}")
            continue
        active.append(f)
    specific = [f for f in active if f.specific]
    if not specific and active:
        # Only symptoms (a probe gave up, a kill, a dead engine): the first failure before them (or
        # at the first, where a death is placed at the exception it died of) is the cause, and when no
        # analyzer explains it the answer is unknown, citing it. A symptom citing an exception does not
        # explain it.
        first = min(f.first_line for f in active)
        exc = first_unexplained_failure(obs, [], before=first + 1)
        # Where in the life it happened and what kind of error it is may name the family.
        by_life = _by_life(obs, exc, notes) if exc is not None else None
        if by_life is not None:
            return by_life
        died = next((f for f in active if f.category == "engine_crash"), None)
        compiled = exc is not None and raised_in_compiled_code(view(obs), exc)
        if exc is not None and died is not None and not compiled:
            # An exception no family explains, and the engine died of it: the engine crashed.
            return RootCause(
                category="engine_crash",
                confidence=0.75,
                summary=f"An exception no known failure family explains (line {exc.n}) killed the engine "
                f"(line {died.evidence[0].line if died.evidence else died.first_line}).",
                evidence=_distinct([*_exception_evidence(obs, exc), *died.evidence]),
                finding=died,
                notes=notes,
            )
        crashed = unexplained_crash(view(obs), exc, _exception_evidence(obs, exc)) if exc else None
        if crashed is not None:
            return RootCause(
                category="engine_crash",
                confidence=crashed.confidence,
                summary=crashed.summary,
                evidence=[*crashed.evidence, *(e for f in active for e in f.evidence[:1])],
                finding=crashed,
                notes=notes,
            )
        if exc is not None:
            notes.append(
                f"also seen, after the failure at line {exc.n}: " + ", ".join(f.category for f in active)
            )
            return RootCause(
                category="unknown",
                confidence=0.35,
                summary=f"The first failure (line {exc.n}) matches no known failure family"
                + (" (raised in code torch.compile generated)" if compiled else "")
                + f"; what followed ({', '.join(sorted({f.category for f in active}))}) is its consequence. "
                "A person should read the cited lines.",
                evidence=_exception_evidence(obs, exc),
                notes=notes,
                settled=compiled,
            )
    pool = specific or active
    # Saturation is a state of a healthy server (SPEC: "healthy but saturated"): when a failure
    # follows it, the server is no longer healthy and the failure is the cause.
    pool = [
        f
        for f in pool
        if f.category != Category.OVERLOAD
        or not any(g.category != Category.OVERLOAD and g.first_line > f.first_line for g in pool)
    ] or pool
    if pool:
        best = min(pool, key=lambda f: (f.first_line, -f.confidence))
        for f in active:
            if f is not best and f.category != best.category:
                notes.append(
                    f"also seen: {f.category} from line {f.first_line}"
                    + (" (a consequence or a symptom)" if f.first_line >= best.first_line else "")
                )
        return RootCause(
            category=best.category,
            confidence=best.confidence,
            summary=best.summary,
            evidence=best.evidence,
            finding=best,
            notes=notes,
        )
    return _no_finding(obs, notes)


def _cited(v: LogView, ln: Line) -> Line:
    """The line to cite for a fatal line: a native exception's banner is cited by the message before it."""
    return (v.record_before(ln, same_proc=False) or ln) if NATIVE_BANNER.match(ln.text) else ln


def _distinct(evidence: list[Evidence]) -> list[Evidence]:
    """The evidence with each cited line once (the first time)."""
    first: dict[tuple[int, str], Evidence] = {}
    for e in evidence:
        first.setdefault((e.line, e.text), e)
    return list(first.values())


def classify_by_life(obs: Observation, ln: Line) -> str | None:
    """The family of an exception no family's wording names, from where in the server's life it
    happened and what kind of error it is (None: the life and the kind do not say).

    Before the weights start loading, a rejected value, type or key is a configuration this engine does
    not accept (unsupported_config), a missing file or repo is model_not_found, a refusal auth_denied,
    a missing module an image too old or broken for this model (unsupported_config). While loading, a
    checkpoint that does not match the model is unsupported_config, a missing file model_not_found.
    Later (serving), a bare exception is a bug: it stays unknown (engine_crash when the engine died of it,
    or it ended the engine's loop: graph/analyzers/engine_crash.py `unexplained_crash`).
    At any point of the start-up, an engine that says it cannot do what it was asked (not implemented,
    not supported), finds no GPU to run on, lacks what it needs installed (a module that does not
    import, a toolchain or backend not installed or not found, a facility "not available", a name its
    optional import left None, a model class without the method a mode calls) is a configuration this
    build or place does not run (unsupported_config); a remote (the hub) that does not answer while the
    config or the weights are fetched means the model cannot be had from here (model_not_found).
    A failure no milestone or frame places (a paste of the exception alone), on a server never seen up
    and not under a request or a step, was raised starting: the kinds that need no phase (the engine
    cannot, the pieces' versions do not fit, an import fails) name its family there too.
    """
    v = view(obs)
    phase = phase_of(v, ln.n)
    text = ln.text
    message = _panic_message(v, ln)
    if message is not None:  # a panic says what it is on its next line
        text = message.text
    # No milestone and no frame places it, but the server was never seen up and nothing on the stack is
    # a request's or a step's: it failed starting, at a step the log does not show.
    unplaced = phase in (Phase.NONE, Phase.CONTAINER)
    serving = _raised_serving(v, ln)
    starting = (
        unplaced
        and not serving
        and started_between(v, after=0, phases=UP_PHASES) is None
        and _raised_in_library(v, ln)  # and in a library's code (or no frame shown), not a script's own
    )
    if (
        KIND_API_MISMATCH.match(text)
        and not serving
        and (
            Phase.CONTAINER < phase < Phase.ENGINE_READY
            or (unplaced and (starting or frame_in(v, ln, BUILD_FRAMES) is not None))
        )
    ):
        return "unsupported_config"  # the pieces' versions do not fit together
    asks = (KIND_CONFIG.match(text) and KIND_ASKS_SETTING.search(text)) or (
        ln.said_error and KIND_ASKS_ENV.search(text)  # a variable of the engine's named, in an error
    )
    if asks and phase < Phase.ENGINE_READY and not serving:
        return "unsupported_config"  # the engine refused a setting and says which one to change
    if unplaced and KIND_ENVIRONMENT.match(text):
        # Where nothing says the server was serving, an import that fails is the image's code not
        # matching the model's (a lazy import while serving is seen serving first).
        return "unsupported_config"
    # what the exception says, and what the chain it starts ends in (the step it failed: "Failed to
    # apply ...Processor" above a TypeError)
    end = v.chain_end(ln.n)
    said = text if end is None else f"{text}\n{end.text}"
    cannot = KIND_NO_DEVICE.search(said) or KIND_UNSUPPORTED.search(said) or KIND_NOT_INSTALLED.search(said)
    if unplaced:
        return "unsupported_config" if cannot and starting else None  # an engine that says it cannot
    if phase >= Phase.ENGINE_READY:
        return None
    if cannot:
        return "unsupported_config"
    if KIND_ENVIRONMENT.match(text):
        return "unsupported_config"  # an import the start-up needs fails: the image lacks it
    if KIND_CONFIG.match(text) and raised_in(v, ln, CONFIG_CODE_PATH):
        return "unsupported_config"  # vLLM's configuration code rejected a value, whichever step asked
    if phase > Phase.LOADING:
        return None
    if KIND_UNREACHABLE.search(text) and phase <= Phase.DOWNLOAD:
        return "model_not_found"
    if KIND_DENIED.search(text):
        return "auth_denied"
    if KIND_MISSING.search(text) and phase <= Phase.LOADING:
        return "model_not_found"
    if KIND_ENVIRONMENT.search(text):
        return "unsupported_config"
    if phase in (Phase.DOWNLOAD, Phase.LOADING) and KIND_CORRUPT.search(text):
        return "model_not_found"  # the checkpoint as stored is not whole
    if phase == Phase.LOADING and KIND_CHECKPOINT.search(text):
        return "unsupported_config"
    if phase in (Phase.ARGS, Phase.CONFIG) and KIND_CONFIG.search(text):
        return "unsupported_config"
    return None


def _raised_in_library(v: LogView, ln: Line) -> bool:
    """The innermost frame of the traceback that ends at ``ln`` is an installed library's or vLLM's
    (``LIBRARY_PATH``), or no frame is shown: not a script's own code (a client's typo)."""
    path = innermost_path(v, ln)
    return path is None or LIBRARY_PATH.search(path) is not None


def _raised_serving(v: LogView, ln: Line) -> bool:
    """The traceback that ends at ``ln`` passes through a step of the engine or a request handler: it was
    raised serving, whatever the milestones say (on Cloud Run one instance serves while another loads),
    and whatever constructor it went through (``BUILD_FRAMES`` is asked only when this is False)."""
    return frame_in(v, ln, REQUEST_FRAMES) is not None or step_frame(v, ln) is not None


def _by_life(obs: Observation, ln: Line, notes: list[str]) -> RootCause | None:
    category = classify_by_life(obs, ln)
    if category is None:
        return None
    phase = phase_of(view(obs), ln.n)
    evidence = _exception_evidence(obs, ln)
    summary = (
        f"The first failure (line {ln.n}) matches no known wording; it happened while the server was "
        f"at '{phase.name.lower()}', and an error of that kind there means {category}."
    )
    found = Finding(
        category=category,
        confidence=0.55,
        summary=summary,
        evidence=evidence,
        analyzer="life",
        first_line=ln.n,
        last_line=ln.n,
        facts=family_facts(category, obs, "\n".join(e.text for e in evidence)),
    )
    return RootCause(
        category=category,
        confidence=found.confidence,
        summary=summary,
        evidence=evidence,
        finding=found,
        notes=notes,
    )


def _exception_evidence(obs: Observation, ln: Line) -> list[Evidence]:
    """An exception as evidence: its line (the cause), and when it starts a chain, the exception
    that ends it (what failed because of it: the fetch, the step, the request)."""
    raised_by = _raising_line(view(obs), ln) if BARE_EXCEPTION.match(ln.text) else None
    out = [Evidence(line=raised_by.n, text=cut_words(raised_by.text.strip(), 300))] if raised_by else []
    out.append(Evidence(line=ln.n, text=cut_words(excerpt(ln.raw or ln.text, EXCEPTION), 300)))
    v = view(obs)
    said = _panic_message(v, ln)
    if said is not None:
        out.append(Evidence(line=said.n, text=cut_words(excerpt(said.raw or said.text), 300)))
    end = v.chain_end(ln.n)
    if end is not None and end.n != ln.n:
        out.append(Evidence(line=end.n, text=cut_words(excerpt(end.raw or end.text, EXCEPTION), 300)))
    return out


def _panic_message(v: LogView, ln: Line) -> Line | None:
    """A Rust panic's message: the next line its process printed (None: ``ln`` is no panic)."""
    if not RUST_PANIC.search(ln.text):
        return None
    return next((c for c in v.lines[ln.n : ln.n + 3] if c.proc == ln.proc and c.text.strip()), None)


def first_unexplained_failure(obs: Observation, findings: list[Finding], before: int) -> Line | None:
    """The first exception line before ``before`` that no finding cites and that does not merely
    report another failure (nor follows an orderly shutdown)."""
    v = view(obs)
    cited = {e.line for f in findings for e in f.evidence}
    found = [
        *v.grep(EXCEPTION, before=before, prefilter=EXCEPTION_PREFILTER),
        *_bare_raises(v, before),
        *v.grep(RUST_PANIC, before=before),
    ]
    # where each process last named an exception with its class, by what it said ("KeyError: 'x.y.z'")
    named: dict[tuple[str, str], int] = {}
    for x in found:
        if EXCEPTION_NAMED.match(x.text):
            key = (x.proc, x.text.partition(": ")[2].strip())
            named[key] = max(named.get(key, 0), x.n)
    for ln in sorted(found, key=lambda x: x.n):
        if ln.n in cited or REPORTS_ONLY.search(ln.text) or _after_shutdown(obs, ln.n):
            continue
        # an exception logged by its message alone, whose traceback then ends in the same exception with
        # its class ("'x.y.z'" ... "KeyError: 'x.y.z'"): that last line is the one to read
        if not EXCEPTION_NAMED.match(ln.text) and named.get((ln.proc, ln.text.strip()), 0) > ln.n:
            continue
        return ln
    return None


def _bare_raises(v: LogView, before: int) -> list[Line]:
    """Exceptions with no message (a failed ``assert``'s bare ``AssertionError``) that end a traceback:
    the source line just before is what raised them."""
    return [
        ln
        for ln in v.grep(BARE_EXCEPTION, before=before, prefilter=EXCEPTION_PREFILTER)
        if _raising_line(v, ln) is not None
    ]


def _raising_line(v: LogView, ln: Line) -> Line | None:
    """The source line of the frame a bare exception at ``ln`` was raised from (None: none right before)."""
    prev = v.record_before(ln)
    return prev if prev is not None and v.is_source(prev.n) else None


def _no_finding(obs: Observation, notes: list[str]) -> RootCause:
    v = view(obs)
    fatal = sorted(
        [*v.grep(FATAL, prefilter=FATAL_PREFILTER), *_bare_raises(v, v.total + 1)], key=lambda x: x.n
    )
    fatal = [ln for ln in fatal if not _after_shutdown(obs, ln.n)]
    unresolved = [ln for ln in fatal if not _ran_after(obs, ln.n)]
    # Cite what failed, not the banner of the traceback that reports it (a native one follows its
    # message: cite that record).
    unresolved = [ln for ln in unresolved if not TRACEBACK_HEAD.search(ln.text)] or unresolved
    unresolved = [_cited(v, ln) for ln in unresolved]
    bad_conditions = [
        t
        for c, t in zip(
            [c for c in obs.current_conditions() if c.get("message")], condition_texts(obs), strict=False
        )
        if str(c.get("state") or c.get("status") or "").upper() in ("CONDITION_FAILED", "FALSE", "FAILED")
    ]
    first_exc = first_unexplained_failure(obs, [], before=unresolved[-1].n + 1) if unresolved else None
    by_life = _by_life(obs, first_exc, notes) if first_exc is not None else None
    if by_life is not None:
        return by_life
    crashed = unexplained_crash(v, first_exc, _exception_evidence(obs, first_exc)) if first_exc else None
    if crashed is not None:
        return RootCause(
            category="engine_crash",
            confidence=crashed.confidence,
            summary=crashed.summary,
            evidence=crashed.evidence,
            finding=crashed,
            notes=notes,
        )
    if unresolved or obs.health is False or bad_conditions:
        ev = [
            Evidence(
                line=ln.n, text=cut_words(excerpt(ln.raw if ln.text not in ln.raw else ln.text, FATAL), 300)
            )
            for ln in unresolved[:3]
        ]
        ev += [Evidence(line=0, text=cut_words(t, 300)) for t in bad_conditions[:1]]
        if obs.health is False:
            ev.append(Evidence(line=0, text="/health did not answer 200"))
        where = f" (first at line {unresolved[0].n})" if unresolved else ""
        return RootCause(
            category="unknown",
            confidence=0.3,
            summary=f"Something failed{where}, but the evidence matches no known failure family; "
            "a person should read the cited lines.",
            evidence=ev,
            notes=notes,
        )
    last_start = max(
        (ln for ln in (v.last(START_MARK), v.last(START_PENDING)) if ln is not None),
        key=lambda ln: ln.n,
        default=None,
    )
    # A start that began (or is seen under way) must be seen completing: answers meanwhile are
    # another instance's.
    if (
        last_start is not None
        and obs.health is not True
        and started_between(v, after=last_start.n, phases=UP_PHASES) is None
    ):
        return RootCause(
            category="unknown",
            confidence=0.35,
            summary=f"The server's start (line {last_start.n}) was not seen completing: the logs end "
            "before it was ready, with no error: the cause is not in what was observed.",
            evidence=[Evidence(line=last_start.n, text=cut_words(last_start.text.strip(), 300))],
            notes=notes,
        )
    if not obs.logs and obs.health is None and not obs.metrics:
        return RootCause(
            category="unknown",
            confidence=0.2,
            summary="Nothing was observed (no logs, metrics or health check): no diagnosis is possible.",
            notes=notes,
        )
    # ``healthy`` is earned: the server was seen up (listening, answering, or serving /metrics or
    # /health) after the last thing that failed. Quiet logs that never show it up prove nothing.
    up = started_between(v, after=0)
    if up is None and obs.health is not True and not obs.metrics:
        return RootCause(
            category="unknown",
            confidence=0.3,
            summary="Nothing in the logs failed, but nothing shows the server up either (it never "
            "listened, answered or served /metrics): not calling that healthy.",
            notes=notes,
        )
    # Records that say they are errors (a traceback's frames without its exception line, say) with no
    # start seen completing: answers may be another instance's; not calling that healthy either. (A
    # request the server refused and answered is logged as an error too: that is its answer. A wrapped
    # record is read whole, in its head.)
    said = next(
        (
            ln
            for ln in v.lines
            if ln.said_error and not ln.head and ln.n not in v.history and not REQUEST_REFUSED.search(ln.text)
        ),
        None,
    )
    if said is not None and obs.health is not True and started_between(v, after=0, phases=UP_PHASES) is None:
        return RootCause(
            category="unknown",
            confidence=0.3,
            summary=f"Line {said.n} says it is an error, and no start of the server is seen completing: "
            "not calling that healthy. A person should read the cited line.",
            evidence=[Evidence(line=said.n, text=cut_words(excerpt(said.raw or said.text), 300))],
            notes=notes,
        )
    stalled = left_stalled(v)
    if stalled is not None:  # /health answers for an engine that stopped stepping too
        return RootCause(
            category="unknown",
            confidence=0.35,
            summary=f"The log ends on a stats period (line {stalled.n}) with requests in the engine and "
            "nothing made in it: too short to call a hang, not a server that is serving either. A person "
            "should look at the engine now.",
            evidence=[Evidence(line=stalled.n, text=cut_words(excerpt(stalled.raw or stalled.text), 300))],
            notes=notes,
        )
    warnings = sum(1 for ln in v.lines if ln.severity in ("WARNING", "ERROR") and ln.n not in v.history)
    old_revs = obs.history_revisions()
    # Cite when it came up (its first sign, and the API server's start-up lines that say where it
    # listens and that its start completed, else the last of them), the last health check it
    # answered and the last sign of it running.
    first_up = next((n for n, ph in v.milestones if ph in (*UP_PHASES, Phase.SERVING)), None)
    api_run: list[int] = []
    for n, ph in v.milestones:
        if ph is Phase.API_UP:
            api_run.append(n)
        elif api_run:
            break
    api_said = [n for n in api_run if API_LISTENING.search(v.lines[n - 1].text)] or api_run[-1:]
    health = v.last(HEALTH_ANSWERED, prefilter=HEALTH_PREFILTER)
    # the best proof it serves: the first request it answered
    after = api_run[-1] if api_run else first_up or 0
    served = v.first(REQUEST_SERVED, after=after, prefilter=REQUEST_SERVED_PREFILTER)
    cited = [v.lines[n - 1] for n in (first_up, *api_said) if n is not None] + [health, served, up]
    evidence = [
        Evidence(line=ln.n, text=cut_words(excerpt(ln.raw or ln.text), 300))
        for ln in sorted({x.n: x for x in cited if x is not None}.values(), key=lambda x: x.n)
    ]
    if obs.health:
        evidence.append(Evidence(line=0, text="/health answered 200"))
    return RootCause(
        category="healthy",
        confidence=0.85 if (obs.health or up) else 0.7,
        summary=f"No failure found in {v.total - len(v.history)} log lines"
        + (f"; the server is up (line {up.n})" if up else "")
        + (f" ({warnings} warning/error lines match no failure family)" if warnings else "")
        + (
            f"; {len(v.history)} lines and the conditions of superseded revision(s) "
            f"{', '.join(old_revs)} are history"
            if old_revs
            else ""
        )
        + ("; /health answers 200" if obs.health else "")
        + ". No action is needed.",
        evidence=evidence,
        notes=notes,
    )


def _ran_after(obs: Observation, n: int) -> bool:
    """Did the server run after the failure at line ``n``? A start completed after it (the engine
    ready, the API up), or answers went on after a failure while this life was serving (by its
    milestones, else its stack): one request's error. Answers after any other failure may be another
    instance's: ``healthy`` is earned by a completed start."""
    v = view(obs)
    if started_between(v, after=n, phases=UP_PHASES) is not None:
        return True
    serving = phase_of(v, n) >= Phase.API_UP
    return serving and started_between(v, after=n) is not None


def _after_shutdown(obs: Observation, n: int) -> bool:
    return after_shutdown(view(obs), n + 1)  # a shutdown line itself counts as after it


# --------------------------------------------------------------------------------------------------
# What a model is sent
# --------------------------------------------------------------------------------------------------


def _spec_block(obs: Observation) -> list[str]:
    svc = obs.service
    if svc is None:
        return ["(no service spec was observed)"]
    out = [
        f"name: {svc.name}",
        f"gpu: {svc.gpu_count} x {svc.gpu_type or '?'}; cpu {svc.cpu or '?'}; memory {svc.memory or '?'}",
        f"image: {svc.image or '?'}",
        "args: " + " ".join(redact_args(svc.args)),
        f"scaling: min {svc.min_instances}, max {svc.max_instances}, concurrency {svc.concurrency}",
    ]
    if svc.env:
        out.append("env: " + ", ".join(redact(f"{k}={v}") for k, v in sorted(svc.env.items())))
    if svc.startup_probe:
        p = svc.startup_probe
        out.append(
            f"startup probe: initial {p.initial_delay_seconds}s, period {p.period_seconds}s, "
            f"failures {p.failure_threshold} (budget {p.budget_seconds}s)"
        )
    if obs.latest_ready_revision or obs.latest_created_revision:
        out.append(
            f"revisions: latest created {obs.latest_created_revision}, "
            f"latest ready {obs.latest_ready_revision}"
        )
    return out


def _planner_block(obs: Observation) -> list[str]:
    svc = obs.service
    if svc is None or not svc.args or not svc.gpu_type:
        return []
    try:
        from mcp_tools.capacity import parse_vllm_args, plan_capacity

        flags = parse_vllm_args(svc.args)
        if not flags.model:
            return []
        p = plan_capacity(flags.model, gpu=svc.gpu_type, gpu_count=svc.gpu_count, flags=flags, suggest=False)
    except Exception as e:  # noqa: BLE001 - a model or GPU the planner does not know
        return [f"(planner: {str(e)[:160]})"]
    return [
        f"planner ({p.model} on {p.gpu}): {p.verdict}",
        f"weights {p.weights_gib} GiB, KV cache {p.kv_cache_gib} GiB = {p.kv_cache_tokens} tokens, "
        f"max_model_len {p.max_model_len}",
    ]


def _metrics_block(obs: Observation) -> list[str]:
    """vLLM's /metrics as the project's one parser reads it (``mcp_tools.metrics``): KV-cache usage,
    requests running and waiting, preemptions, latency percentiles from the histograms, tokens."""
    if not obs.metrics:
        return []
    from mcp_tools.errors import UserError
    from mcp_tools.metrics import parse_vllm_metrics

    try:
        m = parse_vllm_metrics(obs.metrics)
    except UserError as e:
        return [redact(f"/metrics: {e}")[:200]]
    if not m.metric_names:
        return []
    return [redact(ln)[:200] for ln in m.summary().splitlines()]


#: At most this many compressed series reach a model (the rest are counted, not shown).
MAX_SERIES_LINES = 40


def _series_block(obs: Observation) -> list[str]:
    """Cloud Monitoring's series as a model sees them: a line of numbers per series, no points; or
    why they are missing (a blind spot is said, never filled)."""
    blind = obs.blind_to("monitoring")
    if blind is not None:
        return [f"not read: {redact(blind.why)[:240]}: no conclusion can rest on metrics over time"]
    if obs.series is None:
        return []
    ss = obs.series
    head = f"window {ss.start} .. {ss.end}, aligned to {ss.period_s:g} s, {ss.points_read} points read"
    lines = [redact(x.line())[:300] for x in obs.series_summaries()]
    more = len(lines) - MAX_SERIES_LINES
    out = [head, *lines[:MAX_SERIES_LINES]]
    if more > 0:
        out.append(f"... and {more} more series")
    if ss.missing:
        out.append(f"no data in the window: {', '.join(ss.missing)}")
    return out


def _history_block(obs: Observation) -> list[str]:
    """Which revisions are superseded and which log lines they wrote (as line ranges)."""
    revisions = obs.history_revisions()
    if not revisions:
        return []
    lines = sorted(obs.history_lines())
    ranges: list[str] = []
    start = prev = None
    for n in [*lines, None]:
        if n is not None and prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            ranges.append(f"L{start}" if start == prev else f"L{start}-L{prev}")
        start = prev = n
    out = [f"revisions {', '.join(revisions)} no longer serve and are not the latest created"]
    if lines:
        shown = ", ".join(ranges[:8]) + (", ..." if len(ranges) > 8 else "")
        out.append(f"their log lines ({len(lines)} of {len(obs.logs)}): {shown}")
    return out


def _over_time(text: str) -> bool:
    """Evidence read from the series or the probe, not from a log line."""
    from mcp_tools.vocabulary import SERIES_PREFIX

    return text.startswith(SERIES_PREFIX) or text.startswith("probe:")


def build_context(
    obs: Observation, *, budget_tokens: int = CONTEXT_LOG_BUDGET, findings: list[Finding] | None = None
) -> str:
    """The exact user message a model is sent: the spec, the planner's figures, the findings, and
    the compressed logs, metrics and conditions fenced as untrusted data. Everything is redacted."""
    if findings is None:
        findings = run_analyzers(obs)
    parts = [f"# Incident {obs.id}" + (f": {redact(obs.title)}" if obs.title else "")]
    parts += ["", "## Service spec (as observed)", *_spec_block(obs)]
    planner = _planner_block(obs)
    if planner:
        parts += ["", "## Capacity planner (computed for the current spec)", *planner]
    parts += ["", "## Analyzer findings (deterministic, computed from the same data)"]
    if findings:
        for f in findings:
            cites = ", ".join(f"L{e.line}" if e.line else "non-log" for e in f.evidence)
            parts.append(f"- {f.category} (confidence {f.confidence:.2f}, cites {cites}): {f.summary}")
            # what it read over time, readable (the series themselves follow, compressed)
            parts += [f"  - {redact(e.text)[:300]}" for e in f.evidence if e.line == 0 and _over_time(e.text)]
    else:
        parts.append("- none: no analyzer matched")
    if obs.health is not None:
        parts += ["", f"## Health check: /health {'answered 200' if obs.health else 'did not answer 200'}"]
        if obs.probe is not None:
            parts.append(obs.probe.line())
    metrics = _metrics_block(obs)
    conds = condition_texts(obs)
    if metrics or conds:
        parts += ["", f"{FENCE_OPEN} (metrics and Cloud Run conditions)"]
        parts += [redact(c)[:300].replace("<<<", "\u00ab").replace(">>>", "\u00bb") for c in conds]
        parts += [m.replace("<<<", "\u00ab").replace(">>>", "\u00bb") for m in metrics]
        parts.append(FENCE_CLOSE)
    series = _series_block(obs)
    if series:
        parts += ["", f"{FENCE_OPEN} (time series from Cloud Monitoring, compressed)"]
        parts += [x.replace("<<<", "\u00ab").replace(">>>", "\u00bb") for x in series]
        parts.append(FENCE_CLOSE)
    history = _history_block(obs)
    if history:
        parts += ["", "## History (superseded revisions: context, not evidence of a current fault)", *history]
    parts += ["", _LOGS_HEADING]
    cited = {e.line for f in findings for e in f.evidence if e.line > 0}
    parts.append(compress_logs(obs.logs, budget_tokens=budget_tokens, cited=cited).text)
    return "\n".join(parts)


# --------------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------------


class ModelAnswer(BaseModel):
    """What a model must answer (validated; evidence line numbers are checked against the logs)."""

    category: str
    confidence: float = Field(ge=0.0, le=1.0)
    summary: str = Field(min_length=1)
    evidence: list[int] = Field(default_factory=list)

    @field_validator("category")
    @classmethod
    def _cat(cls, v: str) -> str:
        v = v.strip().lower()
        if v not in Category.values():
            raise ValueError(f"category {v!r} is not one of {', '.join(Category.values())}")
        return v

    @field_validator("evidence", mode="before")
    @classmethod
    def _ev(cls, v: Any) -> list[int]:
        out = []
        for item in v or []:
            if isinstance(item, dict):
                item = item.get("line")
            if isinstance(item, str):
                item = item.strip().lstrip("Ll")
            out.append(int(item))
        return out


#: The confidences a model may answer: an enum, which every structured-output backend enforces
#: (llama-cpp-python's grammar drops a number's ``minimum`` / ``maximum``: any number passes it).
CONFIDENCES = [round(i * 0.05, 2) for i in range(21)]
_NAMED_LINE = re.compile(r"\bL(\d{1,7})\b")


def shown_lines(context: str, n_lines: int) -> list[int]:
    """The log line numbers the context names (``L<n>``: raw lines, template ranges, the findings'
    citations) that exist: the lines a model can have read, so the only ones it may cite."""
    return sorted({int(m) for m in _NAMED_LINE.findall(context) if 1 <= int(m) <= n_lines})


def answer_schema(n_lines: int, context: str | None = None) -> dict[str, Any]:
    """The JSON schema of ``ModelAnswer`` as a server can enforce it (vLLM's structured-output
    backends, llama.cpp's grammar): the taxonomy as an enum, the confidence as an enum of steps of 0.05,
    evidence as the line numbers the ``context`` shows (an enum; without a context, numbers in range,
    which a grammar that drops bounds does not enforce)."""
    if context is not None:
        lines = shown_lines(context, n_lines)
        item: dict[str, Any] = {"type": "integer", "enum": lines} if lines else {"type": "integer"}
        max_items = 6 if lines else 0
    else:
        item, max_items = {"type": "integer", "minimum": 1, "maximum": max(1, n_lines)}, 6 if n_lines else 0
    return {
        "type": "object",
        "properties": {
            "category": {"type": "string", "enum": list(Category.values())},
            "confidence": {"type": "number", "enum": CONFIDENCES},
            "summary": {"type": "string", "minLength": 1, "maxLength": 600},
            "evidence": {"type": "array", "items": item, "maxItems": max_items},
        },
        "required": ["category", "confidence", "summary", "evidence"],
        "additionalProperties": False,
    }


def _response_formats(n_lines: int, context: str | None = None) -> list[dict[str, Any]]:
    """The answer's schema in the forms servers enforce, tried in order while refused: OpenAI's
    ``json_schema`` (vLLM, llama.cpp's own server), then ``json_object`` with a ``schema`` (the form
    llama-cpp-python's server takes, which refuses the first with a 422)."""
    schema = answer_schema(n_lines, context)
    return [
        {"type": "json_schema", "json_schema": {"name": "diagnosis", "schema": schema, "strict": True}},
        {"type": "json_object", "schema": schema},
    ]


def _refused_schema(e: Exception) -> bool:
    """Did the server refuse the JSON schema (an older server without structured outputs)?"""
    status = getattr(e, "status_code", None) or getattr(getattr(e, "response", None), "status_code", None)
    # llama-cpp-python's server answers a response_format it does not take with a 500 naming it
    return status in (400, 422, 500) and bool(
        re.search(r"response_format|json_schema|schema|grammar", str(e), re.I)
    )


#: Tokens a chat template adds around the turns (role markers, BOS, the generation prompt), with room.
_TEMPLATE_TOKENS = 64
#: The served context is counted with an estimate (``count_tokens``), not the model's tokenizer: keep this
#: much of it free.
_CONTEXT_MARGIN = 0.9
#: Fewer tokens of logs than this and the model would have nothing worth reading: not asked.
MIN_LOG_BUDGET = 300


class ModelRun(BaseModel):
    """What asking the model produced, and what it cost (the figures the evals report)."""

    answer: ModelAnswer | None = None
    model: str = "model"
    prompt_tokens: int = 0  # the largest prompt the server reported (a retry's holds the first one)
    prompt_size: int = 0  # the whole first request as counted here: rules, context, tool schemas
    completion_tokens: int = 0
    calls: int = 0  # chat requests sent
    answers: int = 0  # final answers received (not tool rounds)
    valid_answers: int = 0  # of those, the schema-valid ones
    tool_calls: int = 0
    notes: list[str] = Field(default_factory=list)


class ModelUnreachable(Exception):
    """The endpoint did not answer (connection refused, timeout, 5xx after retries); ``run``: what was
    spent before (requests sent count, answered or not)."""

    def __init__(self, message: str, run: ModelRun | None = None) -> None:
        super().__init__(message)
        self.run = run


class ModelTimedOut(ModelUnreachable):
    """The endpoint is there (it answered /v1/models) but the answer did not come in time."""

    def __init__(self, message: str, model: str, run: ModelRun | None = None) -> None:
        super().__init__(message, run)
        self.model = model


class MalformedAnswer(Exception):
    pass


class ContextTooSmall(Exception):
    """The served context cannot hold the prompt and its answer, even with the logs cut down."""


def _extract_json(text: str) -> dict[str, Any]:
    t = text.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", t, re.DOTALL)
    if fence:
        t = fence.group(1).strip()
    start, end = t.find("{"), t.rfind("}")
    if start < 0 or end <= start:
        raise MalformedAnswer("no JSON object in the answer")
    try:
        data = json.loads(t[start : end + 1])
    except json.JSONDecodeError as e:
        raise MalformedAnswer(f"not valid JSON ({e.msg})") from None
    if not isinstance(data, dict):
        raise MalformedAnswer("the JSON is not an object")
    return data


def _validate(text: str, obs: Observation) -> ModelAnswer:
    data = _extract_json(text)
    try:
        ans = ModelAnswer.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        raise MalformedAnswer(f"{'.'.join(str(x) for x in first['loc'])}: {first['msg']}") from None
    bad = [n for n in ans.evidence if not 1 <= n <= len(obs.logs)]
    if bad:
        raise MalformedAnswer(f"evidence line(s) {bad} do not exist (the logs have {len(obs.logs)} lines)")
    return ans


def chat_model(ep: ModelEndpoint, *, http_async_client: Any = None) -> Any:
    """The LangChain chat client for a resolved endpoint (``mcp_tools.model_endpoint``);
    ``http_async_client``: the async calls' own client (the default one is shared per base URL)."""
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        http_async_client=http_async_client,
        base_url=ep.base_url,
        api_key=ep.api_key or SecretStr("not-needed"),
        model=ep.model or "model",
        timeout=ep.timeout_s,
        max_retries=ep.max_retries,
        temperature=ep.temperature,
        max_completion_tokens=ep.max_tokens,
        # langchain-openai sends only max_completion_tokens; llama.cpp's server and older vLLM releases
        # read max_tokens, so without it a reply runs to the end of the context. Send both.
        extra_body={"max_tokens": ep.max_tokens} if ep.max_tokens else None,
        default_headers=ep.headers or None,
        stream_usage=True,  # a streamed answer still reports its tokens (stream_options.include_usage)
    )


def _usage(msg: Any) -> tuple[int, int]:
    """(prompt, completion) tokens a reply reports (0 when the server said nothing)."""
    meta = getattr(msg, "usage_metadata", None) or {}
    if meta.get("input_tokens") or meta.get("output_tokens"):
        return int(meta.get("input_tokens") or 0), int(meta.get("output_tokens") or 0)
    tu = (getattr(msg, "response_metadata", None) or {}).get("token_usage") or {}
    return int(tu.get("prompt_tokens") or 0), int(tu.get("completion_tokens") or 0)


def _is_unreachable(e: Exception) -> bool:
    try:
        import openai
    except ImportError:  # pragma: no cover
        return False
    return isinstance(e, (openai.APIConnectionError, openai.APITimeoutError, openai.InternalServerError))


def _is_timeout(e: Exception) -> bool:
    import httpx

    try:
        import openai
    except ImportError:  # pragma: no cover
        return isinstance(e, httpx.TimeoutException)
    # a stream that stalls mid-answer raises httpx's own timeout, not openai's
    return isinstance(e, (openai.APITimeoutError, httpx.TimeoutException))


def _streamed(bound: Any, messages: list[Any], deadline: float | None) -> Any:
    """One request, streamed, its chunks summed into one message; cut when ``deadline`` passes
    (raises ``TimeoutError``; closing the stream closes the connection, so the server stops too)."""
    from langchain_core.messages import AIMessage

    acc: Any = None
    stream = bound.stream(messages)
    try:
        for chunk in stream:
            acc = chunk if acc is None else acc + chunk
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
    if acc is None:
        return AIMessage(content="")
    return AIMessage(
        content=acc.content,
        tool_calls=list(getattr(acc, "tool_calls", None) or []),
        usage_metadata=getattr(acc, "usage_metadata", None),
        response_metadata=getattr(acc, "response_metadata", None) or {},
    )


def prompt_messages(context: str, *, system_role: bool) -> list[Any]:
    """The first request's messages: the rules and the context in one user turn (what every Gemma
    template reads as intended), or the rules as a system message where the template has that role."""
    from langchain_core.messages import HumanMessage, SystemMessage

    from prompts import load_prompt

    rules = load_prompt("diagnose_system").strip()
    user = load_prompt("diagnose_user").replace("{context}", context)
    return as_sent([SystemMessage(rules), HumanMessage(user)], system_role=system_role)


def as_sent(messages: list[Any], *, system_role: bool) -> list[Any]:
    """The conversation as it goes to the server: as it is where the template has system and tool
    roles, else folded into alternating user / model turns (``prompts.turns``: Gemma 2 and 3)."""
    from prompts.turns import alternating

    return list(messages) if system_role else alternating(messages)


def prompt_size(messages: list[Any], tools: list[Any] | None = None) -> int:
    """The whole request's size in (estimated) tokens: every message, the tool schemas, the template."""
    size = sum(count_tokens(str(m.content)) for m in messages) + _TEMPLATE_TOKENS
    if tools:
        from langchain_core.utils.function_calling import convert_to_openai_tool

        size += count_tokens(json.dumps([convert_to_openai_tool(t) for t in tools]))
    return size


def _fit(
    obs: Observation,
    context: str,
    ep: ModelEndpoint | None,
    tools: list[Any] | None,
    findings: list[Finding] | None,
    notes: list[str],
) -> tuple[str, list[Any] | None]:
    """The context (and tools) cut to the served context: the logs' budget shrinks by what is over;
    tools go first when they alone do not fit. Raises ``ContextTooSmall`` when nothing useful fits."""
    system_role = bool(ep and ep.system_role)
    if ep is None or not ep.max_model_len:
        return context, tools
    room = int(ep.max_model_len * _CONTEXT_MARGIN) - (ep.max_tokens or 0)
    size = prompt_size(prompt_messages(context, system_role=system_role), tools)
    if size <= room:
        return context, tools
    if tools and prompt_size(prompt_messages(context, system_role=system_role)) <= room:
        notes.append(f"tools not offered: their schemas do not fit the served context of {ep.max_model_len}")
        return context, None
    if tools:
        notes.append(f"tools not offered: their schemas do not fit the served context of {ep.max_model_len}")
        tools = None
    # what the logs take now (a short log uses less than its budget): shrink from there
    budget = min(CONTEXT_LOG_BUDGET, count_tokens(context.rpartition(_LOGS_HEADING)[2]))
    size = prompt_size(prompt_messages(context, system_role=system_role))
    for _ in range(8):  # the compressor's budget is an estimate too: shrink until the whole prompt fits
        if size <= room:
            break
        budget -= size - room
        if budget < MIN_LOG_BUDGET:
            raise ContextTooSmall(
                f"the served context of {ep.max_model_len} tokens cannot hold the rules, the findings, "
                f"{MIN_LOG_BUDGET} tokens of logs and a {ep.max_tokens}-token answer"
            )
        context = build_context(obs, budget_tokens=budget, findings=findings)
        size = prompt_size(prompt_messages(context, system_role=system_role))
    else:
        raise ContextTooSmall(f"the prompt does not fit the served context of {ep.max_model_len} tokens")
    notes.append(
        f"the logs got {budget} tokens (not {CONTEXT_LOG_BUDGET}) to fit the served context of "
        f"{ep.max_model_len} tokens"
    )
    return context, tools


def ask_model(
    obs: Observation,
    context: str,
    endpoint: ModelEndpoint | Any,
    *,
    tools: list[Any] | None = None,
    max_steps: int = 4,
    findings: list[Finding] | None = None,
) -> ModelRun:
    """Ask the model; returns the validated answer (or None) with what it cost (``ModelRun``).

    ``endpoint``: a ``ModelEndpoint``, or an already built LangChain chat model (e.g. ChatOpenAI).
    Every request streams; the endpoint's ``deadline_s`` bounds the whole exchange (raises
    ``ModelTimedOut``, carrying what was spent). The prompt is cut to the served context
    (``max_model_len``). ``tools``: optional LangChain tools (read-only ones: the caller decides which)
    the model may call, at most ``max_steps`` rounds. A malformed answer gets one retry; raises
    ``ModelUnreachable`` or ``ContextTooSmall``.
    """
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from prompts import load_prompt

    ep: ModelEndpoint | None = None
    if isinstance(endpoint, ModelEndpoint):
        ep = _resolved(endpoint)
        name, where = str(ep.model), ep.base_url
    else:  # a chat model built by the caller
        name = str(getattr(endpoint, "model_name", None) or getattr(endpoint, "model", None) or "model")
        where = name
    run = ModelRun(model=name)
    deadline_s = ep.deadline_s if ep is not None else None
    deadline = time.monotonic() + deadline_s if deadline_s else None
    context, tools = _fit(obs, context, ep, tools, findings, run.notes)
    system_role = bool(ep and ep.system_role)
    messages: list[Any] = prompt_messages(context, system_role=system_role)
    run.prompt_size = prompt_size(messages, tools)
    by_name = {t.name: t for t in tools or []}
    # The final answer is asked for with the answer's JSON schema (structured outputs); tool rounds go
    # without it, and a server that refuses every form of the schema gets free text, validated as before.
    formats = _response_formats(len(obs.logs), context)
    fmt = 0
    final_only = not tools
    attempts = 0
    steps = 0
    while True:
        llm: Any = endpoint
        if ep is not None:
            left = (deadline - time.monotonic()) if deadline is not None else ep.timeout_s
            if left <= 0:
                raise ModelTimedOut(f"{where}: no answer within the {deadline_s:g} s deadline", name, run)
            llm = chat_model(ep.model_copy(update={"timeout_s": max(0.1, min(ep.timeout_s, left))}))
        bound = llm.bind(response_format=formats[fmt]) if fmt < len(formats) else llm
        if not final_only:
            # tool_choice="auto": some servers only call tools when the request says they may.
            bound = llm.bind_tools(tools, tool_choice="auto")
        run.calls += 1
        try:
            # Our own client streams (and reports usage in the last chunk); a caller's is invoked as built.
            sent = as_sent(messages, system_role=system_role)
            reply = _streamed(bound, sent, deadline) if ep is not None else bound.invoke(sent)
        except TimeoutError:
            raise ModelTimedOut(
                f"{where}: the answer was cut at the {deadline_s:g} s deadline", name, run
            ) from None
        except Exception as e:
            if _is_timeout(e):
                raise ModelTimedOut(f"{where}: no answer within the model timeout", name, run) from None
            if fmt < len(formats) and final_only and _refused_schema(e):
                fmt += 1
                if fmt < len(formats):
                    kind = formats[fmt - 1]["type"]
                    run.notes.append(
                        f"the server refused response_format {kind}; asked with {formats[fmt]['type']}"
                    )
                else:
                    run.notes.append(
                        "the server refused the answer's JSON schema; asked for free text instead"
                    )
                continue
            if _is_unreachable(e):
                raise ModelUnreachable(f"{where}: {e.__class__.__name__}", run) from None
            raise
        p, c = _usage(reply)
        if not p and not c:  # the server reported no usage (llama-cpp-python's streams do not)
            c = count_tokens(reply.content if isinstance(reply.content, str) else json.dumps(reply.content))
        run.prompt_tokens = max(run.prompt_tokens, p)  # the prompt's size, not the sum of attempts
        run.completion_tokens += c
        calls = getattr(reply, "tool_calls", None) or []
        if calls and steps < max_steps and not final_only:
            steps += 1
            run.tool_calls += len(calls)
            messages.append(reply)
            for call in calls:
                tool = by_name.get(call["name"])
                if tool is None:
                    out = f"unknown tool {call['name']!r}"
                else:
                    try:
                        out = str(tool.invoke(call.get("args") or {}))
                    except Exception as e:  # noqa: BLE001 - a tool error is an answer, not a crash
                        out = f"tool error: {e.__class__.__name__}: {e}"
                messages.append(
                    ToolMessage(
                        content=f"{FENCE_OPEN}\n{redact(out)[:4000]}\n{FENCE_CLOSE}",
                        tool_call_id=call["id"],
                        name=call["name"],
                    )
                )
            continue
        if calls:
            run.notes.append(f"the model asked for more than {max_steps} tool rounds; stopped")
        run.answers += 1
        text = reply.content if isinstance(reply.content, str) else json.dumps(reply.content)
        try:
            run.answer = _validate(text, obs)
            run.valid_answers += 1
            return run
        except MalformedAnswer as e:
            attempts += 1
            if attempts > 1:
                run.notes.append(
                    f"the model's answer was malformed twice ({e}); the analyzers' diagnosis stands"
                )
                return run
            run.notes.append(f"the model's first answer was malformed ({e}); asked once more")
            final_only = True  # the retry is the final answer: with the schema, without tools
            messages.append(AIMessage(content=text[:2000]))
            messages.append(HumanMessage(load_prompt("diagnose_retry").replace("{error}", str(e))))


# --------------------------------------------------------------------------------------------------
# diagnose
# --------------------------------------------------------------------------------------------------


def _endpoint(model: ModelEndpoint | str | Any) -> ModelEndpoint | Any:
    """A URL becomes a ``ModelEndpoint``; an endpoint or a chat model passes through."""
    if isinstance(model, str):
        return ModelEndpoint(base_url=model)
    return model


def _resolved(ep: ModelEndpoint) -> ModelEndpoint:
    """An endpoint given by URL only goes through the one resolver (auth, served name)."""
    if ep.model:
        return ep
    found = resolve_model_endpoint(
        [ep.base_url], api_key=ep.api_key, timeout_s=ep.timeout_s, max_retries=ep.max_retries
    )
    if found is None:
        raise ModelUnreachable(f"{ep.base_url}/models did not answer")
    keep = {"temperature", "max_tokens", "deadline_s", "system_role"} | (
        {"max_model_len"} if ep.max_model_len else set()
    )
    return found.model_copy(update={k: getattr(ep, k) for k in keep})


def diagnose(
    obs: Observation,
    *,
    findings: list[Finding] | None = None,
    model: ModelEndpoint | str | Any = None,
    tools: list[Any] | None = None,
    max_steps: int = 4,
) -> Diagnosis:
    """Diagnose an observation: the analyzers' root cause, then the model's view if one is given.

    ``findings``: the analyzers' findings when the caller ran them already (default: run them here).
    ``model``: None (analyzers only), a base URL, a ``ModelEndpoint``, a LangChain chat model, or a
    list of those tried in order while unreachable (the primary endpoint, then the fallback).
    ``tools``: read-only LangChain tools the model may call, at most ``max_steps`` rounds.
    """
    t0 = time.perf_counter()
    if findings is None:
        findings = run_analyzers(obs)
    root = choose_root_cause(findings, obs)
    blind = obs.blind_to("logs")
    if blind is not None:
        # What the analyzers made of an observation without its logs stands only on proof that
        # needs no log line; a model would have nothing more to read, so it is not asked.
        root = blind_root_cause(obs, root)
        if model is not None:
            model = None
            root.notes.append("model not asked: the logs could not be read, so it would have nothing to read")
    notes = list(root.notes)
    notes += [f"not read: {u.line}" for u in obs.unread]
    category, confidence, summary, evidence = root.category, root.confidence, root.summary, root.evidence
    prompt_tokens: int | None = None
    model_used: str | None = None

    candidates = [
        _endpoint(m) for m in (model if isinstance(model, list | tuple) else [model]) if m is not None
    ]
    spent = ModelRun()
    if candidates:
        context = build_context(obs, findings=findings)
        run: ModelRun | None = None
        for i, ep in enumerate(candidates):
            more = i + 1 < len(candidates)
            try:
                run = ask_model(obs, context, ep, tools=tools, max_steps=max_steps, findings=findings)
                notes += run.notes
                break
            except ModelTimedOut as e:
                model_used = e.model  # it was there: not "no model"
                if e.run is not None:
                    spent = _add(spent, e.run)
                    notes += e.run.notes
                notes.append(
                    f"the model answered /v1/models but not the diagnosis in time ({e}); "
                    + ("trying the fallback" if more else "the analyzers' diagnosis stands")
                )
            except ContextTooSmall as e:
                notes.append(
                    f"model not asked: {e}; "
                    + ("trying the fallback" if more else "the analyzers' diagnosis stands")
                )
            except ModelUnreachable as e:
                if e.run is not None and e.run.calls:
                    spent = _add(spent, e.run)
                notes.append(
                    f"model endpoint unreachable ({e}); "
                    + ("trying the fallback" if more else "the analyzers' diagnosis stands")
                )
        if run is not None:
            spent = _add(spent, run)
            model_used = run.model
            prompt_tokens = run.prompt_tokens or run.prompt_size or None
            if run.answer is not None:
                category, confidence, summary, evidence = _weigh(
                    run.answer, root, findings, obs, notes, (category, confidence, summary, evidence)
                )
        elif spent.calls:
            prompt_tokens = spent.prompt_tokens or spent.prompt_size or None

    log.info("diagnosed %s as %s in %.3fs", obs.id, category, time.perf_counter() - t0)
    return Diagnosis(
        id=obs.id,
        category=category,
        confidence=confidence,
        summary=summary,
        evidence=evidence,
        prompt_tokens=prompt_tokens,
        model_used=model_used,
        notes=notes,
        # the root cause's own finding when the choice made one (a start that crashed): its facts
        findings=findings if root.finding is None or root.finding in findings else [*findings, root.finding],
        model_calls=spent.calls,
        model_answers=spent.answers,
        model_valid_answers=spent.valid_answers,
        completion_tokens=spent.completion_tokens if spent.calls else None,
        prompt_size=spent.prompt_size or None,
        tool_calls=spent.tool_calls,
    )


def _add(a: ModelRun, b: ModelRun) -> ModelRun:
    """Two runs' costs together (the primary that timed out, then the fallback)."""
    return a.model_copy(
        update={
            "calls": a.calls + b.calls,
            "answers": a.answers + b.answers,
            "valid_answers": a.valid_answers + b.valid_answers,
            "completion_tokens": a.completion_tokens + b.completion_tokens,
            "tool_calls": a.tool_calls + b.tool_calls,
            "prompt_tokens": max(a.prompt_tokens, b.prompt_tokens),
            "prompt_size": max(a.prompt_size, b.prompt_size),
        }
    )


#: Below this a model's answer is a guess: it may not change the analyzers' category.
MIN_MODEL_CONFIDENCE = 0.5
#: A summary that is the prompt's own placeholder, or empty words.
_PLACEHOLDER = re.compile(r"^\W*$|^\s*<[^>]{0,80}>\s*$|one paragraph|your (?:summary|answer) here", re.I)


def _says(obs: Observation, category: str, lines: list[int]) -> bool:
    """Does one of the cited lines say what the family says (its wording, from the vocabulary)?"""
    from mcp_tools.records import clean

    patterns = FAMILY_WORDING.get(category, ())
    texts = [clean(obs.line_text(n) or "").text for n in lines]
    return any(p.search(t) for p in patterns for t in texts)


def _unusable(answer: ModelAnswer, root: RootCause, obs: Observation, category: str) -> str | None:
    """Why a model's answer may not change the category (None: it may)."""
    if answer.category == category:
        return None
    if answer.category != "unknown" and answer.confidence < MIN_MODEL_CONFIDENCE:  # unknown is the safe way
        return f"its confidence {answer.confidence:.2f} is below {MIN_MODEL_CONFIDENCE}"
    if _PLACEHOLDER.search(answer.summary.strip()):
        return "its summary is a placeholder, not an explanation"
    if answer.category == "healthy" and root.category != "healthy":
        return "healthy must be earned by the logs (a completed start after the last failure)"
    if answer.category not in ("healthy", "unknown") and not _says(obs, answer.category, answer.evidence):
        return f"none of the lines it cites says {answer.category}"
    return None


def proof_without_logs(obs: Observation, root: RootCause) -> str | None:
    """What proves the root cause when the logs could not be read (None: nothing does).

    Proof is a cause (not a symptom: a probe that gave up proves nothing about why) that an analyzer
    found in a current Cloud Run condition's message, or in vLLM's metrics.
    """
    f = root.finding
    if f is None or not f.specific or root.category in (Category.UNKNOWN, Category.HEALTHY):
        return None
    conditions = condition_texts(obs)
    for ev in f.evidence:
        if ev.line != 0 or not ev.text:
            continue
        if any(ev.text in t for t in conditions):
            return f"the Cloud Run condition {ev.text[:200]!r}"
        if obs.metrics is not None and ev.text.startswith("metrics:"):
            return f"vLLM's metrics ({ev.text[len('metrics:') :].strip()[:120]})"
        if obs.series is not None and _over_time(ev.text):
            return f"Cloud Monitoring's series ({ev.text.split(':', 1)[1].strip()[:120]})"
    return None


def read_by_hand(obs: Observation) -> str:
    """What a person should read instead of the logs the observation could not read."""
    since, until = obs.window or ("the start of the incident", "now")
    service = obs.service.name if obs.service is not None and obs.service.name else obs.id
    return (
        f"the Cloud Logging entries of Cloud Run service {service!r} from {since} to {until} "
        f'(Logs Explorer: resource.type="cloud_run_revision" AND '
        f'resource.labels.service_name="{service}")'
    )


def blind_root_cause(obs: Observation, root: RootCause) -> RootCause:
    """The root cause of an observation whose logs could not be read: the analyzers' own, when
    ``proof_without_logs`` finds proof for it; otherwise ``unknown``, saying what to read by hand."""
    blind = obs.blind_to("logs")
    assert blind is not None
    proof = proof_without_logs(obs, root)
    if proof is not None:
        return root.model_copy(
            update={
                "summary": f"{root.summary} The logs could not be read ({blind.why}); {proof} proves "
                "the cause on its own.",
                "notes": [*root.notes, f"logs not read; the cause stands on {proof}"],
            }
        )
    seen = ""
    if root.category == Category.HEALTHY:
        seen = " Without the logs, 'healthy' is not earned" + (
            " (/health answers 200, but a failing start or a crash loop would not show there)."
            if obs.health
            else "."
        )
    elif root.category != Category.UNKNOWN:
        symptom = root.finding is not None and not root.finding.specific
        kind = "a symptom, not a cause" if symptom else "unproven"
        seen = f" Seen without the logs: {root.category} ({kind}); not proof on its own."
    others = [u.line for u in obs.unread if u.source != "logs"]
    return RootCause(
        category="unknown",
        confidence=0.2,
        summary=f"The logs could not be read ({blind.why}), and nothing else observed proves a cause "
        f"on its own.{seen} A person should read {read_by_hand(obs)}."
        + (f" Also not read: {'; '.join(others)}." if others else ""),
        evidence=[ev for ev in root.evidence if ev.line == 0],
        notes=[*root.notes, *([f"without the logs the analyzers saw {root.category}"] if seen else [])],
    )


def _weigh(
    answer: ModelAnswer,
    root: RootCause,
    findings: list[Finding],
    obs: Observation,
    notes: list[str],
    current: tuple[str, float, str, list[Evidence]],
) -> tuple[str, float, str, list[Evidence]]:
    """The model's answer against the analyzers': which category, confidence, summary and evidence stand."""
    category, confidence, summary, evidence = current
    history = obs.history_lines()
    why_not = _unusable(answer, root, obs, category)
    if why_not is None and answer.category != category:
        if (
            answer.category not in ("healthy", "unknown")
            and answer.evidence
            and all(n in history for n in answer.evidence)
        ):
            why_not = "it cites only lines of superseded revisions (history, not the current state)"
        else:
            why_not = _overturn_refused(answer, root, findings, obs)
    if why_not is not None:
        notes.append(f"the model said {answer.category}, but {why_not}; kept {category}")
        return category, confidence, summary, evidence
    if answer.category != category:
        notes.append(f"the model chose {answer.category} over the analyzers' {category}")
    cited = [Evidence(line=n, text=cut_words((obs.line_text(n) or "").strip(), 300)) for n in answer.evidence]
    if answer.category == category:
        evidence = _merge_evidence(cited, evidence)
    else:
        match = next((f for f in findings if f.category == answer.category), None)
        evidence = _merge_evidence(cited, match.evidence if match else [])
    return answer.category, answer.confidence, redact(answer.summary.strip()), evidence


def _overturn_refused(
    answer: ModelAnswer, root: RootCause, findings: list[Finding], obs: Observation
) -> str | None:
    """Why a model's other category may not replace the analyzers' (None: it may).

    The rule: a model chooses only among the causes the analyzers found still active. It fills an
    ``unknown`` with one of them, or breaks a tie (a finding as confident and as specific as the
    analyzers' choice, which they preferred only for coming first). It never overturns a confident
    verdict, and its ``unknown`` is doubt, not evidence. It read the logs the analyzers read, so a
    line that merely sounds like another family is no evidence they lack. Measured with adversarial
    scripted models: one citing such lines at 0.95 turned 5 right answers wrong (composed + dev)
    under a looser rule; one picking the weakest other finding turned 1 wrong until ties had to be
    ties; one always answering unknown turned 5 wrong while unknown could replace a symptom.
    """
    if root.category != Category.UNKNOWN and root.confidence >= CONFIDENT:
        return f"the analyzers' {root.category} (confidence {root.confidence:.2f}) is not overturned"
    if answer.category == Category.UNKNOWN:
        return f"unknown brings no evidence against the analyzers' {root.category}"
    active = [f for f in findings if f.category == answer.category and _recovered(obs, f) is None]
    if not active:
        return f"no active analyzer finding supports {answer.category}"
    if root.category == Category.UNKNOWN and root.settled:
        return "the analyzers' unknown is settled: what followed the failure is its consequence"
    if root.category == Category.UNKNOWN:
        return None  # filling an unknown with a cause they found
    # A tie: the other finding stands as high as the analyzers' choice (as confident, as specific), which
    # they preferred only for coming first.
    specific = root.finding.specific if root.finding is not None else True
    if any(f.confidence >= root.confidence and f.specific >= specific for f in active):
        return None
    return f"the analyzers' {root.category} outweighs their {answer.category} finding (no tie to break)"


def _merge_evidence(first: list[Evidence], rest: list[Evidence]) -> list[Evidence]:
    seen: set[tuple[int, str]] = set()
    out = []
    for e in [*first, *rest]:
        key = (e.line, e.text if e.line == 0 else "")
        if key in seen:
            continue
        seen.add(key)
        out.append(e)
    return out[:6]


__all__ = [
    "Diagnosis",
    "ModelAnswer",
    "ModelEndpoint",
    "RootCause",
    "ask_model",
    "build_context",
    "chat_model",
    "choose_root_cause",
    "count_tokens",
    "diagnose",
]
