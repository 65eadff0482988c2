"""GPU out-of-memory: where did it happen? Shared by weights_oom, kv_cache_oom and runtime_oom.

One CUDA OOM message, three root causes, told apart by the traceback frames above it and by what
the server had already logged (vLLM 0.4 .. 0.11 wording):
- while the weights are created or loaded (``load_model``, ``load_weights``, ``initialize_model``,
  ``make_layers``, ``create_weights``): the model does not fit -> weights_oom;
- while the KV cache is allocated (``initialize_kv_cache``, ``_allocate_kv_cache``,
  ``initialize_cache``): -> kv_cache_oom;
- after the weights loaded: the profiling run, CUDA-graph capture, the sampler warm-up, a forward
  pass while serving (``profile_run``, ``_dummy_run``, ``_dummy_sampler_run``, ``capture_model``,
  ``execute_model``) -> runtime_oom.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from graph.analyzers.base import START_MARK, Finding, Line, LogView, finding, view
from graph.observation import Observation
from mcp_tools.vocabulary import (
    FACT_GPU_TOTAL_GIB,
    FACT_GPU_UTIL,
    FACT_GPU_UTIL_PREFILTER,
    FACT_WEIGHTS_GIB,
    FACT_WEIGHTS_PREFILTER,
    FORWARD_FRAME,
    OOM,
    OOM_CREATE_WEIGHTS,
    OOM_KV,
    OOM_RUNTIME,
    OOM_WEIGHTS,
    WORKER_METHOD,
    Phase,
)


@dataclass
class OomEvent:
    line: Line
    phase: str  # "weights" | "kv_cache" | "runtime"
    frame: Line | None  # the frame line that told the phase
    confidence: float


def _frames_before(v: LogView, n: int, text: str) -> list[Line]:
    """The traceback lines above an OOM line (same entry, or up to 60 lines back to 'Traceback')."""
    out: list[Line] = []
    if "\n" in text:
        out.append(Line(n=n, text=text, severity=""))
    # Tracebacks of several processes (TP ranks, the engine core, the API server) interleave: read
    # only the frames the same process printed.
    proc = v.lines[n - 1].proc if 0 < n <= len(v.lines) else ""
    records = 0
    for ln in reversed(v.window(n, before=240)[:-1]):
        if ln.head:
            continue  # the rest of a wrapped record: its words are in its head's text
        records += 1
        if records > 60:
            break
        if proc and ln.proc and ln.proc != proc:
            continue
        out.append(ln)
        if "Traceback (most recent call last)" in ln.text:
            break
    return out


def oom_events(obs: Observation) -> list[OomEvent]:
    """Every CUDA OOM line, with the phase it happened in (cached per observation)."""
    cached = obs._cache.get("oom_events")
    if cached is not None:
        return list(cached)
    v = view(obs)
    events: list[OomEvent] = []
    seen_tracebacks: set[int] = set()
    for ln in v.grep(OOM):
        frames = _frames_before(v, ln.n, ln.text)
        # The traceback it ends (its head), else the line itself: a window with no head is no traceback.
        key = frames[-1].n if frames and "Traceback (most recent call last)" in frames[-1].text else ln.n
        if key in seen_tracebacks and "\n" not in ln.text:
            continue  # the same traceback printed its OOM line twice (message + re-raise)
        seen_tracebacks.add(key)
        phase, frame, conf = _phase(v, ln, frames)
        if phase == "runtime" and _weights_fill_budget(v, ln):
            phase = "weights"
        events.append(OomEvent(line=ln, phase=phase, frame=frame, confidence=conf))
    # One failure is often reported by several ranks or processes, only some of which say where it
    # happened: within one life of the server, a phase read from frames or words beats a guess.
    for e in events:
        if e.confidence >= 0.8:
            continue
        start = v.last(START_MARK, before=e.line.n)
        told = [
            o
            for o in events
            if o.confidence >= 0.9
            and v.last(START_MARK, before=o.line.n) == start
            and o.line.n - e.line.n < 200
        ]
        if told:
            e.phase, e.confidence = told[0].phase, told[0].confidence - 0.05
            e.frame = e.frame or told[0].line  # the line that told where it happened
    obs._cache["oom_events"] = events
    return list(events)


def device_of(ln: Line) -> str:
    """Whose memory an OOM line says ran out, for a summary: CUDA's unless its out-of-memory words name
    another backend (a TPU's HBM, as XLA says it)."""
    m = _DEVICE.search(ln.text)
    if m is None:
        return "CUDA"
    return m.group(1).upper() if m.group(1) else "The TPU"


_DEVICE = re.compile(
    r"\b(NPU|XPU|MPS|HIP)(?: backend)? out of memory|out of memory (?:on|in memory space) HBM", re.I
)
#: NCCL's own allocations (its communicators' and collectives' buffers): never the weights'.
_NCCL_OOM = re.compile(r"Cuda failure (?:\d{1,4} )?'out of memory'|Failed to CUDA calloc")


def oom_in_phase(obs: Observation, phase: str) -> tuple[list[OomEvent], list[Line]]:
    """The OOM events of one phase, and the first one's evidence: its line and the frame that told
    the phase."""
    events = [e for e in oom_events(obs) if e.phase == phase]
    if not events:
        return [], []
    first = events[0]
    return events, [first.line] + ([first.frame] if first.frame and first.frame.n != first.line.n else [])


def oom_finding(
    category: str, events: list[OomEvent], lines: list[Line], summary: str, **facts: object
) -> Finding:
    """The finding for the OOM events of one phase: the first one's confidence and evidence, the count."""
    return finding(
        category,
        events[0].confidence,
        summary,
        lines,
        pattern=OOM,
        analyzer=category,
        last_line=events[-1].line.n,
        facts={"oom_count": len(events), **facts},
    )


def _phase(v: LogView, ln: Line, frames: list[Line]) -> tuple[str, Line | None, float]:
    text = ln.text
    if "warming up sampler" in text or "max_num_seqs" in text:
        return "runtime", None, 0.9
    if _NCCL_OOM.search(text):
        return "runtime", None, 0.6
    if "not enough GPU memory" in text or "Failed to load model" in text or OOM_CREATE_WEIGHTS.search(text):
        return "weights", None, 0.9
    own = _classify_frame(
        text
    )  # "while processing method determine_num_available_blocks: CUDA out of memory"
    if own:
        return _after_loading(v, ln, own), None, 0.9
    # Innermost frames first: the deepest matching frame names the phase.
    for fr in frames:
        t = fr.text
        if "\n" in t:  # a whole traceback in one entry: look from the bottom up
            for part in reversed(t.splitlines()):
                hit = _classify_frame(part)
                if hit:
                    return _after_loading(v, ln, hit), fr, 0.9
            continue
        hit = _classify_frame(t)
        if hit:
            return _after_loading(v, ln, hit), fr, 0.9
    # No frame names a step, but one ran the model forward: the weights were in by then.
    forward = next((fr for fr in frames if FORWARD_FRAME.search(fr.text)), None)
    if forward is not None:
        return "runtime", forward, 0.75
    # One failure several workers of a tensor-parallel group report at once: a sibling's "Exception in
    # worker VllmWorkerProcess while processing method load_model" beside this one names the method.
    sibling = _sibling_method(v, ln)
    if sibling is not None:
        return sibling[0], sibling[1], 0.8
    # No frames: how far had this start-up come?
    phase = v.phase_at(ln.n)
    if phase >= Phase.LOADED:
        return "runtime", None, 0.7
    if phase in (Phase.DOWNLOAD, Phase.LOADING):
        return "weights", None, 0.75
    # Nothing of a start-up in the log, but the engine was taking requests before it ran out: the
    # only life the log shows was serving (unless the answers went on unaffected: they were another's).
    if phase is Phase.NONE and v.served_before(ln.n) and not v.served_through(ln.n):
        return "runtime", None, 0.6
    # The error quoted ahead of its log (a thread's paste that begins with the exception): the start-up
    # the lines after it show got past loading and never came up, and ran out nowhere else, so this is
    # where it stopped.
    if phase is Phase.NONE and v.first(OOM, after=ln.n) is None:
        reached = v.phase_at(v.total + 1)
        if Phase.LOADED <= reached < Phase.ENGINE_READY:
            return "runtime", None, 0.55
    return "weights", None, 0.55


def _sibling_method(v: LogView, ln: Line) -> tuple[str, Line] | None:
    """The phase a method names that another worker of the same kind reported, within a few lines of
    ``ln`` (its report of the same failure), and that line."""
    kind = ln.proc.split(" pid=")[0]
    if not kind:
        return None
    for near in v.grep(WORKER_METHOD, after=ln.n - 4, before=ln.n + 4):
        m = WORKER_METHOD.search(near.text)
        hit = _classify_frame(m.group(1)) if m else None
        if hit and near.proc.split(" pid=")[0] == kind:
            return _after_loading(v, ln, hit), near
    return None


def _weights_fill_budget(v: LogView, ln: Line) -> bool:
    """Did this life's weights alone take the GPU memory vLLM may use (its share of the GPU's total,
    0.9 unless set)? Then an OOM after loading is the model not fitting, whatever allocated last."""
    total = gpu_total_gib(ln.text)
    start = v.last(START_MARK, before=ln.n)
    loaded = v.last(
        FACT_WEIGHTS_GIB, after=start.n if start else 0, before=ln.n, prefilter=FACT_WEIGHTS_PREFILTER
    )
    if total is None or loaded is None:
        return False
    m = FACT_WEIGHTS_GIB.search(loaded.text)
    util_line = v.last(FACT_GPU_UTIL, before=ln.n, prefilter=FACT_GPU_UTIL_PREFILTER)
    u = FACT_GPU_UTIL.search(util_line.text) if util_line else None
    try:
        weights = float(next(g for g in m.groups() if g)) if m else 0.0
        util = float(u.group(1)) if u else 0.9
        return weights >= util * total
    except ValueError:
        return False


def gpu_total_gib(text: str) -> float | None:
    """The GPU's memory an OOM message gives (None: it gives none)."""
    m = FACT_GPU_TOTAL_GIB.search(text)
    try:
        return float(next(g for g in m.groups() if g)) if m else None
    except ValueError:  # "1.2.3"
        return None


def _after_loading(v: LogView, ln: Line, phase: str) -> str:
    """Frames that say "weights" cannot be right once this life of the server logged its weights as
    loaded (the frames belong to another rank's traceback, or a re-raise): the life decides."""
    if phase == "weights" and v.phase_at(ln.n) >= Phase.LOADED:
        return "runtime"
    return phase


def _classify_frame(t: str) -> str | None:
    if OOM_KV.search(t):
        return "kv_cache"
    if OOM_RUNTIME.search(t):
        return "runtime"
    if OOM_WEIGHTS.search(t):
        return "weights"
    return None
