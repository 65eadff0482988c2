"""Cloud Run's limits for a service revision: the one home of these numbers.

Remedies, preflight, config generation and the sandbox's validation all read them from here, so what a
plan may set, what a generated config contains and what the (emulated) Admin API accepts cannot drift.

Sources (Cloud Run documentation): "Configure CPU limits" (1 to 8 vCPU, integers above 1; the memory a
vCPU count allows), "Configure memory limits" (at most 32 GiB; the vCPU floor for a memory size), "GPU
support for services" (one GPU per instance; the instance minimums per GPU type), "Configure container
health checks" (startup probe bounds), "Maximum concurrent requests" (1 to 1000), "Maximum instances".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

#: vCPU per instance.
MIN_CPU = 0.08
MAX_CPU = 8
#: Memory per instance (GiB); the GPU types below raise both floors.
MAX_MEMORY_GIB = 32
#: The vCPU floor for a memory size: more than 4 / 8 / 16 / 24 GiB needs 2 / 4 / 6 / 8 vCPU.
_CPU_FLOOR_BY_MEMORY = ((24, 8), (16, 6), (8, 4), (4, 2))

#: GPUs per instance on Cloud Run.
MAX_GPUS_PER_INSTANCE = 1
#: Cloud Run GPU types and the instance minimums Cloud Run enforces for each: (vCPU, GiB of memory).
GPU_MINIMUMS: dict[str, tuple[int, int]] = {
    "nvidia-l4": (4, 16),
    "nvidia-rtx-pro-6000": (20, 80),
}
#: The RTX PRO 6000 instance shape goes above the general caps.
GPU_MAXIMUMS: dict[str, tuple[int, int]] = {
    "nvidia-l4": (MAX_CPU, MAX_MEMORY_GIB),
    "nvidia-rtx-pro-6000": (44, 176),
}

#: Requests one instance may serve at once.
MIN_CONCURRENCY = 1
MAX_CONCURRENCY = 1000
#: Instances of a service. Cloud Run accepts more only after a quota increase; a plan never needs more.
MAX_INSTANCES = 1000

#: Startup probe: initial delay and period at most 240 s each, timeout at most the period; the failure
#: window (failure_threshold x period_seconds) at most 1800 s with a GPU, 600 s without.
PROBE_MAX_DELAY_S = 240
PROBE_MAX_PERIOD_S = 240
PROBE_MAX_WINDOW_GPU_S = 1800
PROBE_MAX_WINDOW_S = 600


def probe_max_window_s(gpu: bool) -> int:
    return PROBE_MAX_WINDOW_GPU_S if gpu else PROBE_MAX_WINDOW_S


_MEMORY = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(Gi|G|Mi|M)?\s*")


def memory_gib(mem: str | None) -> float | None:
    """``"32Gi"`` -> 32.0, ``"512Mi"`` -> 0.5; None for a missing or unreadable value."""
    if not mem:
        return None
    m = _MEMORY.fullmatch(mem)
    if not m:
        return None
    v = float(m.group(1))
    unit = m.group(2) or "Gi"
    return v / 1024 if unit in ("Mi", "M") else v


def cpu_value(cpu: float | int | str | None) -> float | None:
    """A CPU limit as a number (``"8"``, ``8``, ``"1000m"``); None when missing or unreadable."""
    if cpu is None:
        return None
    s = str(cpu).strip()
    try:
        v = float(s[:-1]) / 1000 if s.endswith("m") else float(s)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def min_cpu_for_memory(mem_gib: float) -> int:
    """Cloud Run's vCPU floor for a memory size."""
    for limit, cpu in _CPU_FLOOR_BY_MEMORY:
        if mem_gib > limit:
            return cpu
    return 1


@dataclass(frozen=True, slots=True)
class Shape:
    """What one revision asks for: the fields the limits speak of (None = not set)."""

    cpu: float | int | str | None = None
    memory: str | None = None
    gpu_type: str | None = None
    gpu_count: int = 0
    min_instances: int | None = None
    max_instances: int | None = None
    concurrency: int | None = None
    probe_initial_delay_s: int | None = None
    probe_period_s: int | None = None
    probe_timeout_s: int | None = None
    probe_failure_threshold: int | None = None


def violations(s: Shape) -> list[str]:
    """Every Cloud Run limit the shape breaks, one sentence each (empty when it is within all)."""
    out: list[str] = []
    gpu = bool(s.gpu_type) and s.gpu_count > 0
    cpu = cpu_value(s.cpu)
    mem = memory_gib(s.memory)
    if s.cpu is not None and cpu is None:
        out.append(f"cpu {s.cpu!s} is not a number of vCPU")
    max_cpu, max_mem = (
        GPU_MAXIMUMS.get(s.gpu_type or "", (MAX_CPU, MAX_MEMORY_GIB))
        if gpu
        else (
            MAX_CPU,
            MAX_MEMORY_GIB,
        )
    )
    if cpu is not None:
        if cpu < MIN_CPU or cpu > max_cpu:
            out.append(f"cpu {s.cpu!s}: Cloud Run allows {MIN_CPU} to {max_cpu} vCPU")
        elif cpu > 1 and cpu != int(cpu):
            out.append(f"cpu {s.cpu!s}: above 1 vCPU, Cloud Run takes whole numbers")
    if s.memory is not None and mem is None:
        out.append(f"memory {s.memory!r} is not a size such as 16Gi or 512Mi")
    if mem is not None:
        if mem > max_mem:
            out.append(f"memory {s.memory}: Cloud Run allows at most {max_mem} GiB")
        need = min_cpu_for_memory(mem)
        if cpu is not None and cpu < need:
            out.append(f"{s.memory} of memory needs at least {need} vCPU on Cloud Run (spec has {s.cpu})")
    if s.gpu_count > MAX_GPUS_PER_INSTANCE:
        out.append(f"{s.gpu_count} GPUs per instance: Cloud Run gives one; this needs a multi-GPU GKE node")
    if gpu and s.gpu_type in GPU_MINIMUMS:
        min_cpu, min_mem = GPU_MINIMUMS[s.gpu_type]
        if cpu is not None and cpu < min_cpu:
            out.append(f"{s.gpu_type} needs at least {min_cpu} vCPU per instance (spec has {s.cpu})")
        if mem is not None and mem < min_mem:
            out.append(
                f"{s.gpu_type} needs at least {min_mem} GiB of memory per instance (spec has {s.memory})"
            )
    for name, v in (("min_instances", s.min_instances), ("max_instances", s.max_instances)):
        if v is not None and not 0 <= v <= MAX_INSTANCES:
            out.append(f"{name} {v}: Cloud Run allows 0 to {MAX_INSTANCES}")
    if s.max_instances is not None and s.max_instances < 1:
        out.append("max_instances must be at least 1 (0 would stop the service)")
    if s.min_instances is not None and s.max_instances is not None and s.min_instances > s.max_instances:
        out.append(f"min_instances {s.min_instances} is above max_instances {s.max_instances}")
    if s.concurrency is not None and not MIN_CONCURRENCY <= s.concurrency <= MAX_CONCURRENCY:
        out.append(f"concurrency {s.concurrency}: Cloud Run allows {MIN_CONCURRENCY} to {MAX_CONCURRENCY}")
    out.extend(_probe_violations(s, gpu))
    return out


def _probe_violations(s: Shape, gpu: bool) -> list[str]:
    out: list[str] = []
    period, timeout = s.probe_period_s, s.probe_timeout_s
    if period is not None and not 1 <= period <= PROBE_MAX_PERIOD_S:
        out.append(f"startup probe: period_seconds must be 1 to {PROBE_MAX_PERIOD_S} s")
    if timeout is not None and not 1 <= timeout <= PROBE_MAX_PERIOD_S:
        out.append(f"startup probe: timeout_seconds must be 1 to {PROBE_MAX_PERIOD_S} s")
    if period is not None and timeout is not None and timeout > period:
        out.append("startup probe: timeout_seconds must not exceed period_seconds")
    if s.probe_initial_delay_s is not None and not 0 <= s.probe_initial_delay_s <= PROBE_MAX_DELAY_S:
        out.append(f"startup probe: initial_delay_seconds must be 0 to {PROBE_MAX_DELAY_S} s")
    if s.probe_failure_threshold is not None and s.probe_failure_threshold < 1:
        out.append("startup probe: failure_threshold must be at least 1")
    if period is not None and s.probe_failure_threshold is not None:
        window = probe_max_window_s(gpu)
        if s.probe_failure_threshold * period > window:
            out.append(f"startup probe: failure_threshold x period_seconds must be at most {window} s")
    return out
