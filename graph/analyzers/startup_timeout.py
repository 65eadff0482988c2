"""startup_timeout: the server did not become ready before the startup probe gave up.

Wordings: "The user-provided container failed to start and listen on the port defined provided by
the PORT=8080 environment variable within the allocated timeout." (googlecodelabs/feedback#1550,
#1814); "Default STARTUP TCP probe failed 1 time consecutively for container \"vllm\" on port 8080.
The instance was not started."; Kubernetes "Startup probe failed". A probe that gives up after the
server crashed is a symptom: the crash wins (it is earlier, and specific). The finding is a cause
when the server was still loading (no crash) when the probe gave up.
"""

from __future__ import annotations

import re

from graph.analyzers.base import START_MARK, Finding, finding, match_conditions, view
from graph.observation import Observation
from mcp_tools.vocabulary import STARTUP, STARTUP_EXITED, STARTUP_LOADING


def analyze(obs: Observation) -> list[Finding]:
    v = view(obs)
    hits = list(v.grep(STARTUP))
    conds = match_conditions(obs, STARTUP)
    if not hits and not conds:
        return []
    # The probe gave up because the process had already died: that is not a slow start.
    first = hits[0].n if hits else v.total + 1
    start = v.last(START_MARK, before=first)
    died = [
        ln
        for ln in v.grep(STARTUP_EXITED, after=start.n if start else 0, before=first)
        if "exit(0)" not in ln.text  # a clean exit is not a crash
    ]
    if died:
        return []
    probe = obs.service.startup_probe if obs.service and obs.service.startup_probe else None
    budget = f" (the probe allows {probe.budget_seconds} s)" if probe else ""
    before = hits[0].n if hits else v.total + 1
    loading = v.last(STARTUP_LOADING, before=before)
    lines = hits[:2] + ([loading] if loading else [])
    summary = (
        "The startup probe gave up before vLLM listened on its port"
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
        specific=False,
        extra=conds[:1],
        facts={"probe_budget_seconds": probe.budget_seconds} if probe else {},
    )
    f.first_line = hits[0].n if hits else v.total + 1
    f.last_line = hits[-1].n if hits else v.total + 1
    return [f]
