"""engine_hung: the server is up but its engine makes no progress.

From Cloud Monitoring's series (``_from_time``): an instance still reporting with requests running
or waiting and vLLM's generation-token rate flat at zero for ``SloConfig.hung_minutes``; or the
observe step's 1-token probe timing out while ``/health`` answers 200 (unless the series show tokens
flowing, or a standing queue explains the wait). An SLO burning at the same time (504s as clients
give up) is cited with it, not as a cause of its own.

From the logs: vLLM's periodic stats line with requests running
and no token generated, over several periods ("Avg prompt throughput: 0.0 tokens/s, Avg generation
throughput: 0.0 tokens/s, Running: 30 reqs"); the V0 engine's own watchdog ("Engine iteration timed
out. This should never happen!", vllm/engine/async_llm_engine.py); the frontend waiting on a silent
engine ("Waiting for output from MQLLMEngine.", vllm/engine/multiprocessing/client.py, repeated);
workers that stopped answering the broadcast queue ("No available shared memory broadcast block
found in 60 seconds", vllm/distributed/device_communicators/shm_broadcast.py, repeated, or its
``acquire_read`` timing out, or once while serving with nothing after it); requests waiting with none
running for two stats periods (the scheduler admits work it has room for at its next step); an RPC
to the workers timing out. The engine may die of it afterwards
(``AsyncEngineDeadError``, ``TimeoutError``): the hang came first, so it is the cause.
"""

from __future__ import annotations

import math
import re

from graph.analyzers import _series as S
from graph.analyzers.base import (
    Evidence,
    Finding,
    Line,
    LogView,
    after_shutdown,
    finding,
    queued_idle,
    ran_after,
    stalled_stats,
    step_frame,
    view,
)
from graph.observation import Observation
from graph.progress import FLAT_TOKENS_PER_S as _FLAT
from mcp_tools.vocabulary import (
    BARE_EXCEPTION,
    EXCEPTION,
    EXCEPTION_PREFILTER,
    HUNG_NO_REPLY,
    HUNG_STALL,
    HUNG_STATS,
    HUNG_TIMEOUT,
    HUNG_WAITING,
    SERIES_WORDS,
    Phase,
)

#: Consecutive stats periods with requests running and nothing generated that make a hang.
FLAT_PERIODS = 2
REPEATS = 3


def analyze(obs: Observation) -> list[Finding]:
    return _from_logs(obs) or _from_time(obs)


def _from_logs(obs: Observation) -> list[Finding]:
    v = view(obs)
    stall = list(v.grep(HUNG_STALL))
    # An RPC that got no reply: a stall as an error (raised, or logged at ERROR) or when it repeats,
    # as waiting does; one warning of a slow reply is not.
    no_reply = list(v.grep(HUNG_NO_REPLY))
    stall += [
        ln for ln in no_reply if len(no_reply) >= REPEATS or ln.said_error or HUNG_TIMEOUT.search(ln.text)
    ][:1]
    stall.sort(key=lambda x: x.n)
    # A timeout raised in the engine's step loop: the step never returned (v0.4's run_engine_loop
    # around asyncio.wait_for, before vLLM worded it "Engine iteration timed out"). Cited: the call in
    # the step loop that waited, and the timeout.
    timed_out: list[Line] = []
    for ln in v.grep(HUNG_TIMEOUT):
        frame = step_frame(v, ln) if EXCEPTION.match(ln.text) or BARE_EXCEPTION.match(ln.text) else None
        if frame is not None:
            call = v.lines[frame.n] if frame.n < v.total and v.is_source(frame.n + 1) else frame
            timed_out = [call, ln]
            break
    waiting = list(v.grep(HUNG_WAITING))
    # A read of the workers' broadcast queue that timed out: the workers stopped answering.
    stall += [ln for ln in waiting[:1] if v.first(HUNG_TIMEOUT, after=ln.n, before=ln.n + 40)]
    stats = list(v.grep(HUNG_STATS))
    flat = _flat_stats(stats)
    lines: list[Line] = []
    why = ""
    if flat:
        lines, why = (
            flat,
            f"{len(flat)} stats periods in a row with requests running and (almost) no token generated",
        )
    elif waiting and (agree := _stalled_then_waited(stats, waiting[-1])):
        lines, why = (
            agree,
            "a stats period with requests running and nothing generated, then the workers stopped answering",
        )
    elif agree := _raised_then_stalled(v, stats):
        lines, why = (
            agree,
            "an error was raised while it served, then a stats period with requests running made nothing",
        )
    elif idle := _queue_not_admitted(stats):
        lines, why = (
            idle,
            "requests waited through two stats periods with none running, the second making nothing",
        )
    if len(waiting) >= REPEATS:
        lines = lines or waiting
        why = why or f"the engine's workers stopped answering ({len(waiting)} waits in a row)"
    elif waiting and not lines and _while_serving(v, waiting[-1]) and not _ran_after(v, waiting[-1], stats):
        # vLLM's own reasons for a long wait (compiling, quantizing) belong to the start; while serving,
        # with nothing answered after it, the log ends on workers that stopped answering.
        lines, why = [waiting[-1]], "the workers stopped answering while it served, and nothing ran after"
    if stall or timed_out:
        lines = sorted({ln.n: ln for ln in [*stall[:1], *timed_out, *lines]}.values(), key=lambda x: x.n)
        why = why or (
            "the engine's own watchdog says an iteration timed out"
            if stall
            else "a step of the engine's loop timed out waiting for its workers"
        )
    if not lines:
        return []
    return [
        finding(
            "engine_hung",
            0.9 if ((stall or timed_out) and (flat or waiting)) else 0.85,
            f"The engine stopped making progress (from line {lines[0].n}): {why}.",
            lines[:3],
            pattern=re.compile(
                f"{HUNG_STALL.pattern}|{HUNG_NO_REPLY.pattern}|{HUNG_WAITING.pattern}|{HUNG_STATS.pattern}",
                re.IGNORECASE,
            ),
            analyzer="engine_hung",
            facts={"flat_stats_periods": len(flat), "waits": len(waiting)},
        )
    ]


def _stalled_then_waited(stats: list[Line], wait: Line) -> list[Line]:
    """One stalled stats period and, after it with no period of progress between, a wait on the
    workers: two signals of one stall that agree (each alone is too short to call a hang)."""
    before = [ln for ln in stats if ln.n < wait.n]
    return [before[-1], wait] if before and stalled_stats(before[-1].text) else []


def _raised_then_stalled(v: LogView, stats: list[Line]) -> list[Line]:
    """An exception raised, and after it one process's stats still printed, its last period with
    requests running and no prompt read nor token made, with no period of its own progress between:
    the process outlived the error but its requests stopped (two signals that agree; one flat period
    alone is too short to call a hang). Each process's periods are its own engine's (another server's
    stats in the same stream say nothing of this one). Cited: the error and the period."""
    streams: dict[str, list[Line]] = {}
    for ln in stats:
        streams.setdefault(ln.proc, []).append(ln)
    for own in streams.values():
        last = own[-1]
        if not stalled_stats(last.text) or not _made_nothing(last) or ran_after(v, last):
            continue
        since = max((s.n for s in own if not stalled_stats(s.text)), default=0)
        found = [
            v.last(EXCEPTION, after=since, before=last.n, prefilter=EXCEPTION_PREFILTER),
            v.last(BARE_EXCEPTION, after=since, before=last.n),
        ]
        raised = max((ln for ln in found if ln is not None), key=lambda ln: ln.n, default=None)
        if raised is not None and not after_shutdown(v, raised.n) and not after_shutdown(v, last.n):
            return [raised, last]
    return []


def _while_serving(v: LogView, ln: Line) -> bool:
    """Line ``ln`` came while the server served: it had answered requests before it, and no start was
    under way (a start's milestones short of the API up)."""
    phase = v.phase_at(ln.n)
    if Phase.NONE < phase < Phase.API_UP:
        return False
    return any(ph is Phase.SERVING and m < ln.n for m, ph in v.milestones)


def _ran_after(v: LogView, ln: Line, stats: list[Line]) -> bool:
    """The server answered, started, or made tokens (a stats period of progress) after line ``ln``.
    Progress another process of the same kind printed (another API server's pid) is another server's."""
    return ran_after(v, ln) or any(
        s.n > ln.n and not stalled_stats(s.text) and not _made_nothing(s) and not _another_of_kind(ln, s)
        for s in stats
    )


def _another_of_kind(a: Line, b: Line) -> bool:
    """``a`` and ``b`` were printed by two processes of one kind (``APIServer pid=1`` and ``APIServer
    pid=2``): two servers. Processes of two kinds (an engine and its API server) may be one server's."""
    ka, kb = a.proc.split(" pid=")[0], b.proc.split(" pid=")[0]
    return bool(ka) and ka == kb and a.proc != b.proc


def _queue_not_admitted(stats: list[Line]) -> list[Line]:
    """Two stats periods of one engine in a row with requests waiting and none running, the second
    with no prompt read and no token made: the scheduler stopped admitting work it had room for.
    Cited: the period that made nothing (the one before it has the same shape)."""
    last: dict[str, Line] = {}
    for ln in stats:
        before = last.get(ln.proc)
        last[ln.proc] = ln
        if before is not None and queued_idle(before.text) and queued_idle(ln.text) and _made_nothing(ln):
            return [ln]
    return []


def _made_nothing(ln: Line) -> bool:
    m = HUNG_STATS.search(ln.text)
    return m is not None and float(m.group(1)) == 0.0 and float(m.group(2)) == 0.0


def _flat_stats(stats: list[Line]) -> list[Line]:
    """The longest run of stats lines with requests running and the engine making (almost) nothing."""
    best: list[Line] = []
    run: list[Line] = []
    for ln in stats:
        if stalled_stats(ln.text):
            run.append(ln)
            if len(run) > len(best):
                best = list(run)
        else:
            run = []
    return best if len(best) >= FLAT_PERIODS else []


def _from_time(obs: Observation) -> list[Finding]:
    """A hang the series (or the probe) show: work in flight, no token for ``hung_minutes``."""
    slo = obs.slo_config
    ss = S.series_of(obs)
    evidence: list[Evidence] = []
    facts: dict[str, object] = {}
    signals: list[str] = []
    if ss is not None:
        k = max(2, math.ceil(slo.hung_minutes * 60.0 / ss.period_s))
        running = S.by_instance(ss, "requests_running")
        waiting = S.by_instance(ss, "requests_waiting")
        stuck: list[str] = []
        for tok in S.current(ss, "generation_tokens_rate"):
            pts = tok.points[-k:]
            if len(pts) < k or any(p.v > _FLAT for p in pts):
                continue
            run_at = S.values_at(running.get(tok.instance or ""))
            wait_at = S.values_at(waiting.get(tok.instance or ""))
            work = [run_at.get(S._epoch(p.t), 0.0) + wait_at.get(S._epoch(p.t), 0.0) for p in pts]
            if min(work) < 1.0:
                continue  # idle: nothing asked, nothing generated
            # how long it has been flat, and what it made before
            flat_n = 0
            for p in reversed(tok.points):
                if p.v > _FLAT:
                    break
                flat_n += 1
            before = [p.v for p in tok.points[: len(tok.points) - flat_n]]
            stuck.append(tok.instance or "")
            was = f" (was {max(before):.3g} tok/s)" if before else ""
            evidence.append(
                S.series_ev(
                    f"{tok.name}: 0 tok/s for the last {S.minutes(flat_n * ss.period_s)}{was} while "
                    f"{min(work):g}+ requests were running or waiting on instance {S.inst(tok)}"
                )
            )
            facts.setdefault("flat_minutes", round(flat_n * ss.period_s / 60, 1))
        if stuck:
            signals.append("hung_series")
            facts["stuck_instances"] = stuck
    pr = obs.probe
    flowing = _tokens_flowing(obs)
    if pr is not None and pr.timed_out and obs.health and flowing is not True:
        signals.append("hung_probe")
        evidence.append(Evidence(line=0, text=pr.line()))
        facts["probe_timeout_s"] = pr.timeout_s
    if not signals:
        return []
    if ss is not None:
        burning = obs.slo_burns()
        evidence += [Evidence(line=0, text=b.line()[:300]) for b in burning]
        if burning:
            facts["slo_burn"] = [b.model_dump() for b in burning]
    total = len(obs.logs)
    conf = 0.9 if len(signals) == 2 else 0.85 if "hung_series" in signals else 0.7
    return [
        Finding(
            category="engine_hung",
            confidence=conf,
            summary="The engine stopped making progress: "
            + "; ".join(
                SERIES_WORDS[s] + (f" for {facts['flat_minutes']:g} min" if s == "hung_series" else "")
                for s in signals
            )
            + ". /health alone would call it healthy.",
            evidence=evidence[:6],
            analyzer="engine_hung",
            first_line=total + 1,
            last_line=total + 1,
            facts=facts,
        )
    ]


def _tokens_flowing(obs: Observation) -> bool | None:
    from graph.progress import tokens_flowing

    return tokens_flowing(obs.series, obs.slo_config.hung_minutes)
