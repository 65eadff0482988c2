"""Remedies, one module per failure family of the SPEC taxonomy (registered like ``graph.analyzers``).

Each is ``propose(diagnosis, observation, capacity) -> candidate plans, best first``: typed steps
built from the category, the analyzers' facts and the capacity planner (``remedies.planner``), never
from a model's free text, and never deleting anything. ``REMEDIES`` is the registry; a category
without an entry gets ``unknown``'s escalation. ``graph.propose.propose_options`` runs them.
"""

from __future__ import annotations

from graph.remedies import (
    auth_denied,
    context_too_long,
    engine_crash,
    engine_hung,
    gpu_quota,
    host_memory_exceeded,
    image_pull,
    kv_cache_oom,
    model_not_found,
    overload,
    runtime_oom,
    startup_timeout,
    unknown,
    unsupported_config,
    weights_oom,
)
from graph.remedies.base import Remedy
from mcp_tools.taxonomy import Category

C = Category

#: The remedy of each failure family (``healthy`` has none: nothing to do).
REMEDIES: dict[Category, Remedy] = {
    C.WEIGHTS_OOM: weights_oom.propose,
    C.KV_CACHE_OOM: kv_cache_oom.propose,
    C.RUNTIME_OOM: runtime_oom.propose,
    C.CONTEXT_TOO_LONG: context_too_long.propose,
    C.HOST_MEMORY_EXCEEDED: host_memory_exceeded.propose,
    C.STARTUP_TIMEOUT: startup_timeout.propose,
    C.MODEL_NOT_FOUND: model_not_found.propose,
    C.AUTH_DENIED: auth_denied.propose,
    C.GPU_QUOTA: gpu_quota.propose,
    C.UNSUPPORTED_CONFIG: unsupported_config.propose,
    C.OVERLOAD: overload.propose,
    C.ENGINE_HUNG: engine_hung.propose,
    C.ENGINE_CRASH: engine_crash.propose,
    C.IMAGE_PULL: image_pull.propose,
    C.UNKNOWN: unknown.propose,
}

__all__ = ["REMEDIES", "Remedy"]
