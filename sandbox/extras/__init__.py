"""Emulated GCP extras (Cloud Storage objects, Secret Manager, Cloud Quotas, Vertex Model Registry)
for the official clients, over REST. ``create_extras_app()`` can be mounted into the main sandbox."""

from __future__ import annotations

from sandbox.extras.app import create_extras_app
from sandbox.extras.seed import (
    gpu_quota_info,
    seed_demo,
    seed_model_folder,
    seed_run_gpu_quotas,
    vertex_model,
)
from sandbox.extras.state import ApiError, ExtrasState

__all__ = [
    "ApiError",
    "ExtrasState",
    "create_extras_app",
    "gpu_quota_info",
    "seed_demo",
    "seed_model_folder",
    "seed_run_gpu_quotas",
    "vertex_model",
]
