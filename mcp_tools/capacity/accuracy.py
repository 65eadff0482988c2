"""Measure the planner against real vLLM start-up figures (a YAML table of cases with sources)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from mcp_tools.capacity.flags import parse_vllm_args
from mcp_tools.capacity.gpus import GpuSpec, resolve_gpu
from mcp_tools.capacity.models import DTYPE_BYTES, resolve_model
from mcp_tools.capacity.planner import (
    GIB,
    KV_DTYPE_BYTES,
    kv_layout,
    max_len_that_fits,
    plan_capacity,
    vllm_behaviour,
)
from mcp_tools.errors import UserError


class CaseResult(BaseModel):
    id: str
    source: str
    # end-to-end: the planner's own budget and layout
    kv_tokens_reported: int | None = None
    kv_tokens_predicted: int | None = None
    kv_tokens_error: float | None = None  # relative
    available_reported_gib: float | None = None
    available_predicted_gib: float | None = None
    available_error: float | None = None
    weights_reported_gib: float | None = None
    weights_predicted_gib: float | None = None
    weights_error: float | None = None
    # layout alone: tokens from vLLM's own reported available memory
    layout_tokens_predicted: int | None = None
    layout_error: float | None = None
    kv_needed_reported_gib: float | None = None
    kv_needed_predicted_gib: float | None = None
    kv_needed_error: float | None = None
    max_len_reported: int | None = None
    max_len_predicted: int | None = None
    max_len_error: float | None = None
    fits_reported: bool | None = None
    fits_predicted: bool | None = None
    notes: list[str] = Field(default_factory=list)


def _rel(pred: float, real: float) -> float:
    if real == 0:
        return 0.0 if pred == 0 else 1.0
    return abs(pred - real) / abs(real)


def load_cases(path: Path) -> list[dict[str, Any]]:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise UserError(f"{path}: expected a mapping with a 'cases' list")
    return list(data["cases"])


def evaluate_case(case: dict[str, Any]) -> CaseResult:
    rep = case.get("reported") or {}
    res = CaseResult(id=case["id"], source=case["source"])
    spec = resolve_model(case["model"])
    flags = parse_vllm_args(case.get("args") or [])
    gpu_count = int(case.get("gpu_count", 1))
    version = case.get("vllm_version")
    has_gpu = bool(case.get("gpu")) or case.get("gpu_memory_gib") is not None
    if has_gpu:
        gpu_name = case.get("gpu")
        mem = case.get("gpu_memory_gib")
        plan = plan_capacity(
            spec,
            gpu=gpu_name,
            gpu_memory_gib=mem,
            gpu_count=gpu_count,
            flags=flags,
            suggest=False,
            vllm_version=version,
        )
        res.weights_predicted_gib = plan.weights_gib
        res.available_predicted_gib = plan.kv_cache_gib
        res.fits_predicted = plan.fits
        if "available_kv_gib" in rep and case.get("end_to_end", True):
            res.available_reported_gib = float(rep["available_kv_gib"])
            res.available_error = _rel(plan.kv_cache_gib, res.available_reported_gib)
        if "kv_cache_tokens" in rep and case.get("end_to_end", True):
            res.kv_tokens_reported = int(rep["kv_cache_tokens"])
            res.kv_tokens_predicted = plan.kv_cache_tokens
            res.kv_tokens_error = _rel(plan.kv_cache_tokens, res.kv_tokens_reported)
        if "fits" in rep:
            res.fits_reported = bool(rep["fits"])
    else:
        # Weights do not depend on the GPU; any catalog GPU with room gives the same figure.
        plan = plan_capacity(
            spec, gpu_memory_gib=1024.0, gpu_count=gpu_count, flags=flags, suggest=False, vllm_version=version
        )
        res.weights_predicted_gib = plan.weights_gib
    if "weights_gib" in rep and not case.get("model_inferred"):
        res.weights_reported_gib = float(rep["weights_gib"])
        res.weights_error = _rel(res.weights_predicted_gib or 0.0, res.weights_reported_gib)
    behaviour = vllm_behaviour(version)
    if "available_kv_gib" in rep and ("kv_cache_tokens" in rep or "kv_needed_gib" in rep):
        # The layout alone, from vLLM's own figure for the memory left.
        act_bytes = DTYPE_BYTES.get(spec.dtype, 2)
        kv_bytes = act_bytes if flags.kv_cache_dtype == "auto" else KV_DTYPE_BYTES[flags.kv_cache_dtype]
        tp = flags.tensor_parallel_size if flags.tensor_parallel_size > 1 else gpu_count
        layout = kv_layout(
            spec, tp=tp, block_size=flags.block_size, kv_bytes=kv_bytes, hybrid=behaviour.engine == "v1"
        )
        blocks = layout.num_blocks(int(float(rep["available_kv_gib"]) * GIB))
        max_len = flags.max_model_len or spec.max_position_embeddings
        mnbt = (flags.max_num_batched_tokens or 2048) * behaviour.sliding_inflight_batches
        if "kv_cache_tokens" in rep:
            if behaviour.tokens_from_concurrency and not layout.is_uniform:
                tokens = int(layout.max_concurrency(blocks, max_len, mnbt) * max_len)
            else:
                tokens = layout.reported_tokens(blocks)
            res.layout_tokens_predicted = tokens
            res.layout_error = _rel(tokens, int(rep["kv_cache_tokens"]))
        if "kv_needed_gib" in rep:
            res.kv_needed_reported_gib = float(rep["kv_needed_gib"])
            res.kv_needed_predicted_gib = round(layout.max_memory_usage_bytes(max_len, mnbt) / GIB, 2)
            res.kv_needed_error = _rel(res.kv_needed_predicted_gib, res.kv_needed_reported_gib)
        if "estimated_max_model_len" in rep:
            avail = int(float(rep["available_kv_gib"]) * GIB)
            res.max_len_reported = int(rep["estimated_max_model_len"])
            res.max_len_predicted = max_len_that_fits(layout, avail, spec.max_position_embeddings, mnbt)
            res.max_len_error = _rel(res.max_len_predicted, res.max_len_reported)
    return res


def evaluate(path: Path) -> list[CaseResult]:
    return [evaluate_case(c) for c in load_cases(path)]


def summary(
    results: list[CaseResult], *, kv_tolerance: float = 0.10, weight_tolerance: float = 0.05
) -> dict[str, Any]:
    kv = [r for r in results if r.kv_tokens_error is not None]
    w = [r for r in results if r.weights_error is not None]
    av = [r for r in results if r.available_error is not None]
    lay = [r for r in results if r.layout_error is not None]
    return {
        "kv_cases": len(kv),
        "kv_within": sum(1 for r in kv if (r.kv_tokens_error or 0) <= kv_tolerance),
        "weight_cases": len(w),
        "weights_within": sum(1 for r in w if (r.weights_error or 0) <= weight_tolerance),
        "available_cases": len(av),
        "available_within": sum(1 for r in av if (r.available_error or 0) <= kv_tolerance),
        "layout_cases": len(lay),
        "layout_within": sum(1 for r in lay if (r.layout_error or 0) <= 0.02),
        "kv_needed_cases": sum(1 for r in results if r.kv_needed_error is not None),
        "kv_needed_within": sum(
            1 for r in results if r.kv_needed_error is not None and r.kv_needed_error <= 0.01
        ),
        "max_len_cases": sum(1 for r in results if r.max_len_error is not None),
        "max_len_within": sum(1 for r in results if r.max_len_error is not None and r.max_len_error <= 0.01),
    }


__all__ = ["CaseResult", "GpuSpec", "evaluate", "evaluate_case", "load_cases", "resolve_gpu", "summary"]
