"""Ground truth: the figures vLLM prints while it starts, across versions' wordings, and the
line that shows memory other processes held on the GPU (``parse_gpu_memory_in_use``)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel


class StartupFigures(BaseModel):
    model_loading_gib: float | None = None  # "Model loading took X GiB"
    kv_cache_tokens: int | None = None  # "GPU KV cache size: N tokens"
    gpu_blocks: int | None = None  # "# GPU blocks: N" (v0) / "num_gpu_blocks is: N"
    max_concurrency: float | None = None  # "Maximum concurrency for N tokens per request: X"
    max_concurrency_tokens: int | None = None  # the N in that line
    available_kv_cache_gib: float | None = None  # "Available KV cache memory: X GiB"
    cuda_graph_gib: float | None = None  # "Graph capturing finished in S secs, took X GiB"
    total_gpu_memory_gib: float | None = None  # v0.6-0.8 profiler summary "Total GPU memory: X GiB"
    activation_peak_gib: float | None = None  # "PyTorch activation peak memory takes X GiB"
    non_torch_gib: float | None = None  # "non_torch_memory takes X GiB"
    kv_needed_gib: float | None = None  # "(X GiB KV cache is needed, which is larger than ...)"
    estimated_max_model_len: int | None = None  # "the estimated maximum model length is N"
    max_model_len: int | None = None  # "Using max model len N" / "max seq len (N)"


_NUM = r"(-?[0-9][0-9,]*(?:\.[0-9]+)?)"


def _f(s: str) -> float:
    return float(s.replace(",", ""))


def _unit_gib(value: str, unit: str) -> float:
    v = _f(value)
    u = unit.lower()
    if u in ("mib", "mb"):
        return v / 1024
    if u in ("kib", "kb"):
        return v / 1024 / 1024
    if u in ("tib", "tb"):
        return v * 1024
    return v


_SIZE = _NUM + r"\s*(GiB|GB|MiB|MB)"  # a figure and its unit
_GIB = _NUM + r"\s*(GiB|GB)"  # a figure in GiB or GB

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (key, re.compile(pattern, re.I))
    for key, pattern in [
        # "Model loading took 15.0099 GiB and 4.1 seconds" / "Model loading took 14.99 GB"
        # / "Loading model weights took 14.9888 GB" / "model weights take 14.99GiB"
        ("model_loading_gib", r"Model loading took\s+" + _SIZE),
        ("model_loading_gib", r"Loading model weights took\s+" + _SIZE),
        ("model_loading_gib", r"model weights take\s+" + _SIZE),
        ("model_loading_gib", r"Model loading took\s+" + _GIB + r"\s+memory"),
        ("kv_cache_tokens", r"GPU KV cache size:\s*" + _NUM + r"\s*tokens"),
        ("gpu_blocks", r"(?:#\s*)?(?:GPU|cuda) blocks:\s*" + _NUM),
        ("kv_cache_tokens", r"maximum number of tokens that can be stored in KV cache \(" + _NUM + r"\)"),
        ("available_kv_cache_gib", r"kv_cache_size=" + _GIB),
        ("available_kv_cache_gib", r"reserved for KV Cache is\s*" + _GIB),
        ("total_gpu_memory_gib", r"total_gpu_memory=" + _GIB),
        ("kv_needed_gib", r"\(" + _GIB + r" KV cache is needed"),
        ("estimated_max_model_len", r"estimated maximum model length is\s*" + _NUM),
        ("max_model_len", r"Using max model len\s*" + _NUM),
        ("max_model_len", r"max seq len \(" + _NUM + r"\)"),
        ("gpu_blocks", r"num_gpu_blocks(?: is)?[:=]\s*" + _NUM),
        ("available_kv_cache_gib", r"Available KV cache memory:\s*" + _SIZE),
        ("cuda_graph_gib", r"Graph capturing finished in .*?took\s+" + _SIZE),
        ("total_gpu_memory_gib", r"Total GPU memory:?\s*" + _GIB),
        ("total_gpu_memory_gib", r"total_gpu_memory \(" + _GIB + r"\)"),
        ("activation_peak_gib", r"activation peak memory takes\s*" + _GIB),
        ("activation_peak_gib", r"peak_torch_memory \(" + _GIB + r"\)"),
        ("non_torch_gib", r"non_torch_memory takes\s*" + _GIB),
        ("non_torch_gib", r"non_torch_memory \(" + _GIB + r"\)"),
    ]
]
_CONCURRENCY = re.compile(
    r"Maximum concurrency for\s*" + _NUM + r"\s*tokens per request:?\s*" + _NUM + r"\s*x", re.I
)


def parse_vllm_startup(lines: Iterable[str]) -> StartupFigures:
    """Read vLLM's own start-up lines; the last occurrence of each figure wins (a restart
    prints them again). Tolerates log prefixes, ANSI colours and thousands separators."""
    found: dict[str, float | int] = {}
    for raw in lines:
        line = re.sub(r"\x1b\[[0-9;]*m", "", str(raw))
        for key, pat in _PATTERNS:
            m = pat.search(line)
            if not m:
                continue
            if key in ("kv_cache_tokens", "gpu_blocks", "estimated_max_model_len", "max_model_len"):
                found[key] = int(_f(m.group(1)))
            else:
                found[key] = _unit_gib(m.group(1), m.group(2))
        m = _CONCURRENCY.search(line)
        if m:
            found["max_concurrency_tokens"] = int(_f(m.group(1)))
            found["max_concurrency"] = _f(m.group(2))
    return StartupFigures(**found)  # type: ignore[arg-type]


class GpuMemoryInUse(BaseModel):
    """vLLM's report that the GPU was not free when it started: memory other processes held."""

    free_gib: float | None = None  # free when vLLM looked
    total_gib: float | None = None
    used_by_others_gib: float | None = None  # total - free (V1 refusal) or initial - current free
    requested_gib: float | None = None  # total x gpu_memory_utilization
    gpu_memory_utilization: float | None = None
    line: str  # the log line, as vLLM printed it


# V1 (0.8+): "ValueError: Free memory on device (31.44/47.38 GiB) on startup is less than desired GPU
# memory utilization (0.95, 45.01 GiB). Decrease GPU memory utilization or reduce GPU memory used by
# other processes." Later releases name the device: "Free memory on device cuda:0 (19.77/22.05 GiB)".
_FREE_ON_DEVICE = r"Free memory on device\s*(?:[\w:]+\s*)?\(\s*" + _NUM + r"\s*/\s*" + _SIZE + r"\s*\)"
_UTILIZATION = r"\(\s*" + _NUM + r"\s*,\s*" + _SIZE + r"\s*\)"  # (share, size)
_FREE_LESS = re.compile(
    _FREE_ON_DEVICE + r"\s*on startup is less than desired GPU memory utilization\s*" + _UTILIZATION, re.I
)
# V1 0.10-0.11 after start-up, informational: "Free memory on device (43.93/44.42 GiB) on startup.
# Desired GPU memory utilization is (0.9, 39.98 GiB)." -- a cause only when free < desired.
_FREE_INFO = re.compile(
    _FREE_ON_DEVICE + r"\s*on startup\.\s*Desired GPU memory utilization is\s*" + _UTILIZATION, re.I
)
# V0 0.6-0.7 and V1: "Error in memory profiling. Initial free memory 20.5 GiB, current free memory
# 18.2 GiB. This happens when the GPU memory was not properly cleaned up before initializing the
# vLLM instance." / "... when other processes sharing the same container release GPU memory ...".
_PROFILE_DRIFT = re.compile(
    r"Initial free memory\s*"
    + _NUM
    + r"\s*(GiB|GB|MiB|MB),\s*current free memory\s*"
    + _NUM
    + r"\s*(GiB|GB|MiB|MB)",
    re.I,
)


def parse_gpu_memory_in_use(lines: Iterable[str]) -> GpuMemoryInUse | None:
    """The start-up line showing that other processes held GPU memory, across releases'
    wordings, or ``None``. The last such line wins (a restart prints it again)."""
    found: GpuMemoryInUse | None = None
    for raw in lines:
        line = re.sub(r"\x1b\[[0-9;]*m", "", str(raw))
        m = _FREE_LESS.search(line) or _FREE_INFO.search(line)
        if m and _unit_gib(m.group(1), m.group(3)) < _unit_gib(m.group(5), m.group(6)):
            free = _unit_gib(m.group(1), m.group(3))
            total = _unit_gib(m.group(2), m.group(3))
            found = GpuMemoryInUse(
                free_gib=round(free, 2),
                total_gib=round(total, 2),
                used_by_others_gib=round(max(0.0, total - free), 2),
                requested_gib=round(_unit_gib(m.group(5), m.group(6)), 2),
                gpu_memory_utilization=_f(m.group(4)),
                line=line.strip(),
            )
            continue
        m = _PROFILE_DRIFT.search(line)
        # Less free than at the start: another process took memory while vLLM profiled. More free is
        # memory another process released (a co-tenant's race the profiler cannot account for), not a
        # GPU too full for vLLM's share.
        if m and _unit_gib(m.group(3), m.group(4)) < _unit_gib(m.group(1), m.group(2)):
            initial = _unit_gib(m.group(1), m.group(2))
            current = _unit_gib(m.group(3), m.group(4))
            found = GpuMemoryInUse(
                free_gib=round(current, 2),
                used_by_others_gib=round(initial - current, 2),
                line=line.strip(),
            )
    return found
