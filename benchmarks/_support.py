"""What the benchmark scripts share: their count flags, the timing of repeated runs, the reference
incident (Gemma 4 12B bf16 on one L4, its weights-OOM traceback buried in N lines of serving noise),
and the two ways a benchmark runs the loop on it: from the observation on, and whole against a sandbox.

Importing it puts ``tests/`` on ``sys.path``: the realistic log samples live with the tests.
Everything of ours is imported inside the functions, so a script can point ``GEMMA_SRE_STATE_DIR``
somewhere first (``private_state_dir``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

if TYPE_CHECKING:
    from graph.observation import Observation
    from graph.runner import CycleResult
    from mcp_tools.incident import Incident, ServiceSpec

T = TypeVar("T")

#: The reference deployment's vLLM arguments (bf16 weights that do not fit one L4).
REFERENCE_ARGS = ["--model=/mnt/models/gemma-4-12B-it", "--max-model-len=16384"]
REFERENCE_SERVICE = "gemma-4-12b"


def count(text: str) -> int:
    """An argparse ``type`` for a count flag (``--runs``, ``--lines``): a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1")
    return value


def stop(p: subprocess.Popen[Any], wait_s: float = 10) -> None:
    """End ``p``: terminate it, and kill it if it has not exited within ``wait_s`` seconds (the tests'
    servers use it too)."""
    p.terminate()
    try:
        p.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def timed(fn: Callable[..., T], runs: int, setup: Callable[[], Any] | None = None) -> tuple[list[float], T]:
    """Wall seconds of ``runs`` calls of ``fn``, and what the last call returned; with ``setup``, each
    call gets what a fresh, untimed ``setup()`` made."""
    times: list[float] = []
    out: Any = None
    for _ in range(runs):
        args = () if setup is None else (setup(),)
        t0 = time.perf_counter()
        out = fn(*args)
        times.append(time.perf_counter() - t0)
    return times, out


def private_state_dir() -> str:
    """A fresh state directory for this run (checkpoints, reports), in ``GEMMA_SRE_STATE_DIR``."""
    path = tempfile.mkdtemp(prefix="gemma-sre-bench-")
    os.environ["GEMMA_SRE_STATE_DIR"] = path
    return path


def reference_spec() -> ServiceSpec:
    """The reference service as the sandbox's scenarios deploy it (no environment variables)."""
    from sandbox.scenarios import l4_spec

    return l4_spec(REFERENCE_SERVICE, REFERENCE_ARGS, env={})


def oom_incident(lines: int) -> tuple[Incident, int]:
    """The reference incident with ``lines`` log lines, and the 1-based line of the OOM error."""
    from log_samples import noisy_oom_log

    from mcp_tools.incident import Incident, LogLine

    raw, oom = noisy_oom_log(lines)
    incident = Incident(
        id="bench-weights-oom",
        title="benchmark: Gemma 4 12B bf16 on one L4",
        service=reference_spec(),
        logs=[LogLine(severity="ERROR" if "Error" in t else "INFO", text=t) for t in raw],
    )
    return incident, oom


def cycle_from_observation(obs: Observation, thread_id: str) -> tuple[float, dict[str, Any]]:
    """The real graph from ``obs`` to the approval interrupt (diagnose, propose, preflight and every
    SQLite checkpoint write), no model: ``obs`` is written into a new thread as the observe step's
    output and the graph runs on from there. Returns the seconds that took and the thread's values."""
    from graph.config import Configuration
    from graph.runner import compiled_graph

    service = obs.service.name if obs.service else REFERENCE_SERVICE
    cfg = Configuration.from_settings(service=service, use_model=False)
    config = {"configurable": {"thread_id": thread_id, **cfg.persisted()}}
    with compiled_graph() as g:
        g.update_state(
            config,
            {
                "meta": {"thread_id": thread_id, "config": cfg.persisted()},
                "observation": obs.model_dump(mode="json", by_alias=True),
                "observation_summary": {"service": service, "log_lines": len(obs.logs)},
                "cycle": 1,
            },
            as_node="observe",
        )
        t0 = time.perf_counter()
        for _ in g.stream(None, config, stream_mode="updates", durability="sync"):
            pass
        seconds = time.perf_counter() - t0
        return seconds, dict(g.get_state(config).values)


@contextmanager
def sandbox_cycles(incident: Incident) -> Iterator[Callable[[], tuple[float, CycleResult]]]:
    """A sandbox loaded with ``incident``, and a function that runs one whole cycle against it
    (observe included: the official clients read the spec, every log line, the series and /health)
    to the approval interrupt, rejects it, and returns the cycle's seconds and its result."""
    from graph.config import Configuration
    from graph.runner import resume_cycle, run_cycle
    from sandbox.server import start_sandbox

    sb = start_sandbox(incident=incident, time_scale=1000.0, zero_latency=True)
    try:
        service = incident.service.name if incident.service else REFERENCE_SERVICE
        cfg = Configuration.from_settings(
            service=service, **sb.settings_fields(), use_model=False, log_limit=len(incident.logs)
        )

        def one() -> tuple[float, CycleResult]:
            t0 = time.perf_counter()
            r = run_cycle(cfg)
            seconds = time.perf_counter() - t0
            assert r.status == "awaiting_approval", r.status
            resume_cycle(r.thread_id, decision="reject", approver="bench", reason="benchmark")
            return seconds, r

        yield one
    finally:
        sb.stop()
