"""startup_timeout: the server did not become ready before the startup probe gave up.

Wordings: "The user-provided container failed to start and listen on the port defined provided by
the PORT=8080 environment variable within the allocated timeout." (googlecodelabs/feedback#1550,
#1814); "Default STARTUP TCP probe failed 1 time consecutively for container \"vllm\" on port 8080.
The instance was not started."; Kubernetes "Startup probe failed". A probe that gives up after the
server crashed is a symptom: the crash wins (it is earlier, and specific). The finding is a cause
when the server was still loading (no crash) when the probe gave up.

The probe's own line may be missing: what is left is a stop sent from outside while the server was
still starting — a worker ended by SIGTERM while a supervisor was still waiting for the server, the
engine's own "EngineCore exiting." (it was signalled) with no error of its start before it, or a
Kubernetes container SIGKILLed (exit 137) for a reason that is not ``OOMKilled`` — with no API server
up before it and no out-of-memory wording anywhere (a kill for memory is host_memory_exceeded).
"""

from __future__ import annotations

import re

from graph.analyzers.base import (
    START_MARK,
    UP_PHASES,
    Finding,
    LogView,
    finding,
    match_conditions,
    started_between,
    view,
)
from graph.observation import Observation
from mcp_tools.vocabulary import (
    ENGINE_SIGNALLED,
    EXCEPTION,
    HOST_MEMORY_STRONG,
    K8S_STATE_REASON,
    KILLED_FROM_OUTSIDE,
    KILLED_FROM_OUTSIDE_PREFILTER,
    OOM,
    STARTUP,
    STARTUP_EXITED,
    STARTUP_LOADING,
    STARTUP_WAITING,
    TRACEBACK_HEAD,
)


def _killed_while_starting(v: LogView) -> list[Finding]:
    """A stop from outside before the server was up, the probe's or supervisor's line not logged."""
    if v.first(HOST_MEMORY_STRONG) or v.first(OOM):
        return []
    for kill in v.grep(KILLED_FROM_OUTSIDE, prefilter=KILLED_FROM_OUTSIDE_PREFILTER):
        life = v.last(START_MARK, before=kill.n)
        if started_between(v, after=life.n if life else 0, before=kill.n, phases=UP_PHASES) is not None:
            continue  # this life had started: a stop after a completed start is a shutdown
        lines = [kill]
        if "exitCode" in kill.text:  # a Kubernetes state: its reason sits a few lines on
            reason = v.first(K8S_STATE_REASON, after=kill.n, before=kill.n + 6)
            if reason is None or reason.text.strip().endswith("OOMKilled"):
                continue
            lines.append(reason)
        elif ENGINE_SIGNALLED.search(kill.text):
            # The engine's own word that it was signalled: a stop from outside, unless an error of
            # this life came first (a parent that failed stops its engine too).
            after = life.n if life else 0
            if v.first(EXCEPTION, after=after, before=kill.n) or v.first(
                TRACEBACK_HEAD, after=after, before=kill.n
            ):
                continue
        else:
            # A supervisor that kills a start and tries again logs its waits on both sides of the kill.
            waiting = v.first(STARTUP_WAITING)
            if waiting is None:
                continue  # nobody was waiting for a start: not a start that took too long
            lines.append(waiting)
        summary = (
            f"The server was stopped from outside (line {kill.n}) before it was up, with no error of its "
            "own: the start took longer than the probe or supervisor waiting for it allows."
        )
        pattern = re.compile(
            KILLED_FROM_OUTSIDE.pattern + "|" + STARTUP_WAITING.pattern + "|reason: ", re.I | re.M
        )
        return [
            finding(
                "startup_timeout",
                0.6,
                summary,
                lines,
                pattern=pattern,
                analyzer="startup_timeout",
                specific=False,
            )
        ]
    return []


def analyze(obs: Observation) -> list[Finding]:
    v = view(obs)
    hits = list(v.grep(STARTUP))
    conds = match_conditions(obs, STARTUP)
    if not hits and not conds:
        return _killed_while_starting(v)
    # The probe gave up because the process had already died: that is not a slow start.
    first = hits[0].n if hits else v.total + 1
    start = v.last(START_MARK, before=first)
    # A deadline the server raises itself (vLLM's "TimeoutError: Timed out waiting for engine core
    # processes to start"): the traceback that this exception ends is the timeout, not a death before it.
    own = v.last(TRACEBACK_HEAD, before=first) if hits and EXCEPTION.match(hits[0].text) else None
    if own is not None and v.first(EXCEPTION, after=own.n, before=first) is not None:
        own = None  # another exception ended that traceback first
    died = [
        ln
        for ln in v.grep(STARTUP_EXITED, after=start.n if start else 0, before=own.n if own else first)
        if "exit(0)" not in ln.text  # a clean exit is not a crash
    ]
    if died:
        return []
    probe = obs.service.startup_probe if obs.service and obs.service.startup_probe else None
    budget = f" (the probe allows {probe.budget_seconds} s)" if probe else ""
    before = hits[0].n if hits else v.total + 1
    loading = v.last(STARTUP_LOADING, before=before)
    lines = hits[:2] + ([loading] if loading else [])
    gave_up = (
        "vLLM's own start deadline passed before its engine was up"
        if own is not None
        else "The startup probe gave up before vLLM listened on its port"
    )
    summary = (
        gave_up
        + budget
        + ". "
        + (
            f"The server was still loading (line {loading.n})."
            if loading
            else "No crash was logged before it."
        )
    )
    f = finding(
        "startup_timeout",
        0.85 if loading else 0.7,
        summary,
        lines,
        pattern=re.compile(STARTUP.pattern + "|" + STARTUP_LOADING.pattern, re.IGNORECASE),
        analyzer="startup_timeout",
        # the server's own word that its start ran out of time is the cause itself, not a symptom
        specific=own is not None,
        extra=conds[:1],
        facts={"probe_budget_seconds": probe.budget_seconds} if probe else {},
    )
    f.first_line = hits[0].n if hits else v.total + 1
    f.last_line = hits[-1].n if hits else v.total + 1
    return [f]
