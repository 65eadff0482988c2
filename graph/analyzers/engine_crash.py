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

from graph.analyzers.base import (
    SHUTDOWN,
    START_MARK,
    Finding,
    LogView,
    after_shutdown,
    failed_in_startup,
    finding,
    view,
)
from graph.observation import Observation
from mcp_tools.vocabulary import CRASH, CRASH_DIED, CRASH_REPEATS, FACT_CUDA_FAULT, KILLED_FROM_OUTSIDE


def _repeats(v: LogView, n: int) -> bool:
    """Did something a restart repeats happen in this life of the server, before it died at line ``n``?
    (An earlier life's import error is that life's; this one may have been started with a fixed image.)"""
    life = v.last(START_MARK, before=n)
    return v.first(CRASH_REPEATS, after=life.n - 1 if life else 0, before=n + 1) is not None


def analyze(obs: Observation) -> list[Finding]:
    v = view(obs)
    shutdown = v.first(SHUTDOWN)
    cutoff = shutdown.n if shutdown else None
    hits = [ln for ln in v.grep(CRASH) if cutoff is None or ln.n < cutoff or not after_shutdown(v, ln.n)]
    if hits:
        return [
            finding(
                "engine_crash",
                0.85,
                f"The vLLM engine crashed (line {hits[0].n}).",
                hits[:3],
                pattern=CRASH,
                analyzer="engine_crash",
                facts={
                    "cuda_fault": any(FACT_CUDA_FAULT.search(ln.text) for ln in hits),
                    "in_startup": failed_in_startup(v, hits[0].n),
                    "repeats_on_restart": _repeats(v, hits[0].n),
                },
            )
        ]
    # A worker stopped by SIGTERM was shut down (after what failed, or from outside): not a death.
    died = [
        ln
        for ln in v.grep(CRASH_DIED)
        if not after_shutdown(v, ln.n) and not KILLED_FROM_OUTSIDE.search(ln.text)
    ]
    if died:
        return [
            finding(
                "engine_crash",
                0.7,
                f"The vLLM engine died (line {died[0].n}); nothing before it says why.",
                died[:2],
                pattern=CRASH_DIED,
                analyzer="engine_crash",
                specific=False,
                facts={
                    "in_startup": failed_in_startup(v, died[0].n),
                    "repeats_on_restart": _repeats(v, died[0].n),
                },
            )
        ]
    return []
