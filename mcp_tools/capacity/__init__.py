"""The capacity planner: will this model, at these vLLM flags, fit this GPU, and how much KV
cache is left? Computed from the architecture and vLLM's own memory accounting, never guessed.
"""

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
from mcp_tools.capacity.planner import CapacityPlan, Suggestion, kv_layout, plan_capacity
from mcp_tools.capacity.startup import (
    GpuMemoryInUse,
    StartupFigures,
    parse_gpu_memory_in_use,
    parse_vllm_startup,
)

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
    "resolve_gpu",
    "resolve_model",
    "spec_from_config",
]
