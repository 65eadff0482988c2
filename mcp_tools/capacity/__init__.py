"""The capacity planner: will this model, at these vLLM flags, fit this GPU, and how much KV
cache is left? Computed from the architecture and vLLM's own memory accounting, never guessed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp_tools.capacity.flags import VllmFlags, parse_vllm_args
    from mcp_tools.capacity.gpus import GpuSpec, list_gpus, resolve_gpu
    from mcp_tools.capacity.models import (
        LayerKV,
        ModelSpec,
        Quantization,
        list_catalog,
        load_config_file,
        resolve_model,
        spec_from_config,
    )
    from mcp_tools.capacity.plan import CapacityPlan, Suggestion
    from mcp_tools.capacity.planner import kv_layout, plan_capacity, plan_request
    from mcp_tools.capacity.startup import (
        GpuMemoryInUse,
        StartupFigures,
        parse_gpu_memory_in_use,
        parse_vllm_startup,
    )

#: Where each name lives: imported on first use, so importing one submodule (the server imports
#: ``capacity.plan`` for its schemas) does not import the planner's tables.
_HOME = {
    "CapacityPlan": "plan",
    "GpuMemoryInUse": "startup",
    "GpuSpec": "gpus",
    "LayerKV": "models",
    "ModelSpec": "models",
    "Quantization": "models",
    "StartupFigures": "startup",
    "Suggestion": "plan",
    "VllmFlags": "flags",
    "kv_layout": "planner",
    "list_catalog": "models",
    "list_gpus": "gpus",
    "load_config_file": "models",
    "parse_gpu_memory_in_use": "startup",
    "parse_vllm_args": "flags",
    "parse_vllm_startup": "startup",
    "plan_capacity": "planner",
    "plan_request": "planner",
    "resolve_gpu": "gpus",
    "resolve_model": "models",
    "spec_from_config": "models",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value


__all__ = [
    "CapacityPlan",
    "GpuMemoryInUse",
    "GpuSpec",
    "LayerKV",
    "ModelSpec",
    "Quantization",
    "StartupFigures",
    "Suggestion",
    "VllmFlags",
    "kv_layout",
    "list_catalog",
    "list_gpus",
    "load_config_file",
    "parse_gpu_memory_in_use",
    "parse_vllm_args",
    "parse_vllm_startup",
    "plan_capacity",
    "plan_request",
    "resolve_gpu",
    "resolve_model",
    "spec_from_config",
]
