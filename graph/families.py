"""One module per failure family: how ``graph.analyzers`` and ``graph.remedies`` register theirs."""

from __future__ import annotations

import importlib
from collections.abc import Collection
from typing import Any

from mcp_tools.taxonomy import Category


def per_family(package: str, name: str, *, skip: Collection[Category] = ()) -> dict[Category, Any]:
    """``{category: <package>.<category>.<name>}`` for every SPEC category but ``skip``, in SPEC order.
    A family whose module is missing fails the import of ``package``: none is forgotten."""
    families = [c for c in Category if c not in skip]
    return {c: getattr(importlib.import_module(f"{package}.{c.value}"), name) for c in families}
