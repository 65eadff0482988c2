"""GPU and model-catalog lookups the remedies need: Cloud Run's GPUs, compute capabilities, features,
checkpoints of the same model, and the checkpoint a mistyped reference most likely meant."""

from __future__ import annotations

import re

from mcp_tools.cloudrun_limits import GPU_MINIMUMS

#: Cloud Run's GPUs, smallest first (a larger GPU is the fix when no checkpoint fits).
CLOUD_RUN_GPUS = tuple(GPU_MINIMUMS)

#: The name suffix of a pre-quantized checkpoint.
QUANT_SUFFIX = re.compile(
    r"[-_](?:NVFP4|FP4|FP8(?:[-_](?:Dynamic|block|static))?|qat[-_]w4a16(?:[-_]ct)?|AWQ|GPTQ(?:[-_]Int\d)?|w4a16|int4)$",
    re.IGNORECASE,
)


def larger_gpu(current: str | None, min_cc: float | None = None, than_gib: float | None = None) -> str | None:
    """The next Cloud Run GPU above ``current`` (with at least ``min_cc`` when given); with no
    ``current``, the first with more memory than ``than_gib`` (what the log says the GPU had)."""
    try:
        from mcp_tools.capacity import resolve_gpu

        cur_mem = resolve_gpu(current).memory_gib if current else (than_gib or 0.0)
        for name in CLOUD_RUN_GPUS:
            g = resolve_gpu(name)
            if name != current and g.memory_gib > cur_mem and (min_cc is None or g.cc >= min_cc):
                return name
            if name != current and min_cc is not None and g.cc >= min_cc and g.memory_gib >= cur_mem:
                return name
    except Exception:  # noqa: BLE001
        return None
    return None


def gpu_cc(gpu: str | None) -> float | None:
    """The compute capability of a GPU (None: unknown)."""
    if not gpu:
        return None
    try:
        from mcp_tools.capacity import resolve_gpu

        return float(resolve_gpu(gpu).cc)
    except Exception:  # noqa: BLE001
        return None


def gpu_supports(gpu: str | None, feature: str) -> bool | None:
    """Whether a GPU supports a feature (``fp8``, ``fp8_kv_cache``, ...); None: unknown."""
    if not gpu:
        return None
    try:
        from mcp_tools.capacity import resolve_gpu
        from mcp_tools.capacity.gpus import supports_for_cc

        return feature in supports_for_cc(resolve_gpu(gpu).cc)
    except Exception:  # noqa: BLE001
        return None


def _catalog_ids() -> list[str]:
    try:
        from mcp_tools.capacity import list_catalog

        return list(list_catalog())
    except Exception:  # noqa: BLE001
        return []


def closest_model(ref: str) -> str | None:
    """The catalog checkpoint a mistyped model reference most likely meant (same directory for paths)."""
    import difflib

    ids = _catalog_ids()
    if not ref or not ids:
        return None
    base = ref.rstrip("/").split("/")[-1]
    is_path = ref.startswith(("/", "gs://", "./"))
    names = {i.split("/")[-1]: i for i in ids}
    for name, full in names.items():  # a case typo
        if name.lower() == base.lower() and name != base:
            return ref.rstrip("/")[: -len(base)] + name if is_path else full
    if is_path:
        m = difflib.get_close_matches(base.lower(), [n.lower() for n in names], n=1, cutoff=0.85)
        if m:
            name = next(n for n in names if n.lower() == m[0])
            return ref.rstrip("/")[: -len(base)] + name
        return None
    m = difflib.get_close_matches(ref.lower(), [i.lower() for i in ids], n=1, cutoff=0.8)
    if m:
        return next(i for i in ids if i.lower() == m[0])
    return None


def sibling_checkpoints(ref: str | None) -> list[str]:
    """Other catalog checkpoints of the same base model (QAT first, then FP8), for a given reference."""
    if not ref:
        return []
    base_name = QUANT_SUFFIX.sub("", ref.rstrip("/").split("/")[-1])
    try:
        from mcp_tools.capacity import resolve_model
        from mcp_tools.capacity.models import catalog_entry

        base = resolve_model(base_name)
        entry = catalog_entry(base.base or base.id) or base
    except Exception:  # noqa: BLE001
        return []
    variants = dict(entry.variants)
    out = [variants[k] for k in ("qat_w4a16", "fp8") if variants.get(k)]
    cur = ref.rstrip("/").split("/")[-1].lower()
    return [v for v in out if v.split("/")[-1].lower() != cur]
