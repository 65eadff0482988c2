"""GPU catalog: memory as CUDA reports it, compute capability, bandwidth, and what each supports."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources

from pydantic import BaseModel, Field

from mcp_tools.errors import UserError


class GpuSpec(BaseModel):
    name: str  # canonical lower-case accelerator name (Cloud Run / GKE spelling), e.g. "nvidia-l4"
    label: str = ""
    memory_gib: float  # as CUDA reports it (torch total_memory), not the marketing size
    compute_capability: str  # "8.9"
    bandwidth_gbps: float = 0.0  # GB/s, for a latency roofline
    architecture: str = ""
    # NVLink between the GPUs of one machine (SXM parts): vLLM's custom all-reduce runs at any
    # tensor-parallel size; on PCIe-only GPUs only at TP 2 ("Custom allreduce is disabled because
    # it's not supported on more than two PCIe-only GPUs").
    nvlink: bool = False
    source: str = ""
    aliases: list[str] = Field(default_factory=list)
    supports: list[str] = Field(default_factory=list)  # filled from the compute capability

    @property
    def cc(self) -> float:
        return float(self.compute_capability)


def supports_for_cc(cc: float) -> list[str]:
    """What vLLM can run on this compute capability (the planner's view)."""
    s = ["float16", "int8", "w4a16"] if cc >= 7.0 else ["float16"]
    if cc >= 8.0:
        s += ["bfloat16", "fp8_weight_only_marlin"]
    if cc >= 8.9:
        s += ["fp8", "fp8_kv_cache"]
    if cc >= 10.0:
        s += ["nvfp4", "nvfp4_kv_cache", "mxfp4"]
    return s


def _norm(name: str) -> str:
    n = name.strip().lower().replace("_", "-")
    n = re.sub(r"\s+", " ", n)
    return n


@lru_cache(maxsize=1)
def _gpus() -> dict[str, GpuSpec]:
    raw = json.loads(resources.files("mcp_tools.capacity").joinpath("data/gpus.json").read_text())
    out: dict[str, GpuSpec] = {}
    for g in raw["gpus"]:
        spec = GpuSpec(**{k: v for k, v in g.items() if k != "derived"})
        spec.supports = supports_for_cc(spec.cc)
        out[spec.name] = spec
    return out


def list_gpus() -> list[GpuSpec]:
    return list(_gpus().values())


def resolve_gpu(name: str) -> GpuSpec:
    """``nvidia-l4``, ``l4``, ``NVIDIA L4``, ``nvidia-tesla-t4`` ... -> GpuSpec."""
    if not name or not name.strip():
        raise UserError("gpu: empty name")
    want = _norm(name)
    variants = {want, want.replace(" ", "-"), want.replace("-", " ")}
    for v in list(variants):
        for prefix in ("nvidia-", "nvidia ", "tesla-", "tesla "):
            if v.startswith(prefix):
                variants.add(v[len(prefix) :])
    for spec in _gpus().values():
        keys = {_norm(spec.name), _norm(spec.label)} | {_norm(a) for a in spec.aliases}
        keys |= {k.replace(" ", "-") for k in keys} | {k.replace("-", " ") for k in keys}
        if variants & keys:
            return spec
    known = ", ".join(sorted(_gpus()))
    raise UserError(f"gpu {name!r}: unknown (known: {known}; or give --gpu-memory-gib)")
