"""Deterministic analyzers, one module per failure family of the SPEC taxonomy (k8sgpt pkg/analyzer
style). Each is a pure function ``analyze(obs) -> list[Finding]``; ``ANALYZERS`` is the registry."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable

from graph.analyzers.base import Evidence, Finding, LogView, view
from graph.families import per_family
from graph.observation import Observation
from mcp_tools.taxonomy import Category

log = logging.getLogger(__name__)

Analyzer = Callable[[Observation], list[Finding]]

#: Every analyzer, by failure family (``graph.analyzers.<family>.analyze``; healthy and unknown have none).
_NONE = (Category.HEALTHY, Category.UNKNOWN)
ANALYZERS: list[tuple[str, Analyzer]] = [
    (c.value, fn) for c, fn in per_family(__name__, "analyze", skip=_NONE).items()
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


def family_facts(category: str, obs: Observation, text: str) -> dict[str, object]:
    """What a family's analyzer reads from a failing record for the remedies (its module's
    ``facts_of(obs, text)``), for a failure found by where in the server's life it happened rather than
    by the family's wording; {} for a family that reads none."""
    if category in _NONE:
        return {}
    facts_of = getattr(importlib.import_module(f"{__name__}.{category}"), "facts_of", None)
    return facts_of(obs, text) if facts_of is not None else {}


__all__ = ["ANALYZERS", "Evidence", "Finding", "LogView", "family_facts", "run_analyzers", "view"]
