"""The failure taxonomy (SPEC.md section 1): the one list of root-cause categories.

The remediation kinds (SPEC.md section 2) are ``mcp_tools.remediation.RemediationKind``. Incident
files, the analyzers, the model's answer, the remedies and the eval scoring all name these members.
"""

from __future__ import annotations

from enum import StrEnum


class Category(StrEnum):
    WEIGHTS_OOM = "weights_oom"
    KV_CACHE_OOM = "kv_cache_oom"
    RUNTIME_OOM = "runtime_oom"
    CONTEXT_TOO_LONG = "context_too_long"
    HOST_MEMORY_EXCEEDED = "host_memory_exceeded"
    STARTUP_TIMEOUT = "startup_timeout"
    MODEL_NOT_FOUND = "model_not_found"
    AUTH_DENIED = "auth_denied"
    GPU_QUOTA = "gpu_quota"
    UNSUPPORTED_CONFIG = "unsupported_config"
    OVERLOAD = "overload"
    ENGINE_HUNG = "engine_hung"
    ENGINE_CRASH = "engine_crash"
    IMAGE_PULL = "image_pull"
    HEALTHY = "healthy"
    UNKNOWN = "unknown"

    @classmethod
    def values(cls) -> tuple[str, ...]:
        """Every category name, in SPEC order."""
        return tuple(c.value for c in cls)
