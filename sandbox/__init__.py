"""A local stand-in for a GCP project running vLLM on Cloud Run (see ``sandbox.server``).

``from sandbox import start_sandbox, Sandbox`` (imported lazily, so ``import sandbox.vllm_sim`` stays light).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Sandbox", "start_sandbox"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from sandbox import server

        return getattr(server, name)
    raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
