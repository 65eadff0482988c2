"""Measure the planner against real vLLM start-up figures (a YAML table of cases with sources)."""

from __future__ import annotations

import hashlib
import statistics
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from mcp_tools.capacity.flags import parse_vllm_args
from mcp_tools.capacity.gpus import GpuSpec, resolve_gpu
from mcp_tools.capacity.models import DTYPE_BYTES, ModelSpec, resolve_model, spec_from_config
from mcp_tools.capacity.planner import (
    GIB,
    KV_DTYPE_BYTES,
    kv_layout,
    max_len_that_fits,
    plan_capacity,
    vllm_behaviour,
)
from mcp_tools.errors import UserError

#: The blind split: a case is blind when sha256(SPLIT_SEED + id) falls below BLIND_FRACTION of the
#: hash space. Chosen before the planner was changed against the 56-point table; never tuned.
SPLIT_SEED = "planner-blind-v1:"
BLIND_FRACTION = 0.4


def split_of(case_id: str) -> str:
    """``"blind"`` or ``"dev"``, from a seeded hash of the case id alone."""
    digest = hashlib.sha256((SPLIT_SEED + case_id).encode()).hexdigest()
    return "blind" if int(digest[:8], 16) < BLIND_FRACTION * 2**32 else "dev"


class CaseResult(BaseModel):
    id: str
    source: str
    split: str = "dev"
    # end-to-end: the planner's own budget and layout
    kv_tokens_reported: int | None = None
    kv_tokens_predicted: int | None = None
    kv_tokens_error: float | None = None  # relative
    kv_tokens_signed: float | None = None  # (predicted - reported) / reported: > 0 over-predicts
    kv_tokens_low: int | None = None  # the pessimistic end of the planner's range (what `fits` uses)
    kv_tokens_high: int | None = None
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
    refused: str | None = None  # the planner's error, when it could not plan the case at all


def _rel(pred: float, real: float) -> float:
    if real == 0:
        return 0.0 if pred == 0 else 1.0
    return abs(pred - real) / abs(real)


def _signed(pred: float, real: float) -> float:
    if real == 0:
        return 0.0 if pred == 0 else 1.0
    return (pred - real) / abs(real)


def load_cases(path: Path) -> list[dict[str, Any]]:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise UserError(f"{path}: expected a mapping with a 'cases' list")
    return list(data["cases"])


def case_spec(case: dict[str, Any]) -> ModelSpec:
    """The case's model: its inline published ``config`` when it has one, else the catalog."""
    if isinstance(case.get("config"), dict):
        return spec_from_config(
            case["config"], model_id=case["model"], source=str(case.get("config_source") or case["model"])
        )
    return resolve_model(case["model"])


def evaluate_case(case: dict[str, Any]) -> CaseResult:
    rep = case.get("reported") or {}
    res = CaseResult(id=case["id"], source=case["source"], split=split_of(case["id"]))
    spec = case_spec(case)
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
            res.kv_tokens_signed = _signed(plan.kv_cache_tokens, res.kv_tokens_reported)
            res.kv_tokens_low, res.kv_tokens_high = plan.kv_cache_tokens_range
        elif "gpu_blocks" in rep and case.get("end_to_end", True):
            # Only the block count was recorded: compare blocks (the same quantity for the cache).
            res.kv_tokens_reported = int(rep["gpu_blocks"])
            res.kv_tokens_predicted = plan.gpu_blocks
            res.kv_tokens_error = _rel(plan.gpu_blocks, res.kv_tokens_reported)
            res.kv_tokens_signed = _signed(plan.gpu_blocks, res.kv_tokens_reported)
            scale = plan.gpu_blocks / plan.kv_cache_tokens if plan.kv_cache_tokens else 0.0
            res.kv_tokens_low, res.kv_tokens_high = (int(t * scale) for t in plan.kv_cache_tokens_range)
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
        # The activation dtype the run used: --dtype, else the checkpoint's (float32 served as bf16).
        want = {"half": "float16", "float": "float32"}.get(flags.dtype, flags.dtype)
        act_bytes = DTYPE_BYTES.get(want if want != "auto" else spec.dtype, 2)
        if flags.dtype == "auto" and spec.dtype in ("float32", "float"):
            act_bytes = 2
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
    """Every case; one the planner refuses (a config it cannot read) is kept as a miss."""
    out: list[CaseResult] = []
    for c in load_cases(path):
        try:
            out.append(evaluate_case(c))
        except UserError as e:
            rep = c.get("reported") or {}
            res = CaseResult(id=c["id"], source=c["source"], split=split_of(c["id"]), refused=str(e))
            if "kv_cache_tokens" in rep or "gpu_blocks" in rep:
                res.kv_tokens_error = 1.0  # counted, and as a miss
            if "weights_gib" in rep and not c.get("model_inferred"):
                res.weights_error = 1.0
            out.append(res)
    return out


def summary(
    results: list[CaseResult], *, kv_tolerance: float = 0.10, weight_tolerance: float = 0.05
) -> dict[str, Any]:
    kv = [r for r in results if r.kv_tokens_error is not None]
    w = [r for r in results if r.weights_error is not None]
    av = [r for r in results if r.available_error is not None]
    lay = [r for r in results if r.layout_error is not None]
    over = [r.kv_tokens_signed for r in kv if r.kv_tokens_signed is not None]
    errs = sorted(r.kv_tokens_error or 0.0 for r in kv)
    return {
        "kv_cases": len(kv),
        "kv_within_share": round(sum(1 for e in errs if e <= kv_tolerance) / len(errs), 3) if errs else None,
        "kv_median_error": round(statistics.median(errs), 4) if errs else None,
        "kv_max_over_prediction": round(max([0.0, *over]), 4),
        # the pessimistic end at or below vLLM's figure: `fits` never leans on an over-prediction
        "kv_low_end_safe": sum(
            1
            for r in kv
            if r.kv_tokens_low is not None
            and r.kv_tokens_reported is not None
            and r.kv_tokens_low <= r.kv_tokens_reported
        ),
        "kv_ranged": sum(1 for r in kv if r.kv_tokens_low is not None),
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
