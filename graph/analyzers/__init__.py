"""Deterministic analyzers, one module per failure family of the SPEC taxonomy (k8sgpt pkg/analyzer
style). Each is a pure function ``analyze(obs) -> list[Finding]``; ``ANALYZERS`` is the registry."""

from __future__ import annotations

import logging
from collections.abc import Callable

from graph.analyzers import (
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
    unsupported_config,
    weights_oom,
)
from graph.analyzers.base import Evidence, Finding, LogView, view
from graph.observation import Observation

log = logging.getLogger(__name__)

Analyzer = Callable[[Observation], list[Finding]]

#: Every analyzer, by failure family.
ANALYZERS: list[tuple[str, Analyzer]] = [
    ("weights_oom", weights_oom.analyze),
    ("kv_cache_oom", kv_cache_oom.analyze),
    ("runtime_oom", runtime_oom.analyze),
    ("context_too_long", context_too_long.analyze),
    ("host_memory_exceeded", host_memory_exceeded.analyze),
    ("startup_timeout", startup_timeout.analyze),
    ("model_not_found", model_not_found.analyze),
    ("auth_denied", auth_denied.analyze),
    ("gpu_quota", gpu_quota.analyze),
    ("unsupported_config", unsupported_config.analyze),
    ("overload", overload.analyze),
    ("engine_hung", engine_hung.analyze),
    ("engine_crash", engine_crash.analyze),
    ("image_pull", image_pull.analyze),
]


def run_analyzers(obs: Observation) -> list[Finding]:
    """Every analyzer's findings, earliest first. An analyzer that fails is logged and skipped."""
    out: list[Finding] = []
    for name, fn in ANALYZERS:
        try:
            out.extend(fn(obs))
        except Exception:  # noqa: BLE001 - one broken analyzer must not hide the others
            log.exception("analyzer %s failed", name)
    out.sort(key=lambda f: (f.first_line, -f.confidence))
    return out


__all__ = ["ANALYZERS", "Evidence", "Finding", "LogView", "run_analyzers", "view"]
