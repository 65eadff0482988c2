"""Remedies, one module per failure family of the SPEC taxonomy (registered like ``graph.analyzers``).

Each is ``propose(diagnosis, observation, capacity) -> candidate plans, best first``: typed steps
built from the category, the analyzers' facts and the capacity planner (``remedies.planner``), never
from a model's free text, and never deleting anything. ``REMEDIES`` is the registry; a category
without an entry gets ``unknown``'s escalation. ``graph.propose.propose_options`` runs them.
"""

from __future__ import annotations

from graph.families import per_family
from graph.remedies.base import Remedy
from mcp_tools.taxonomy import Category

#: The remedy of each failure family (``graph.remedies.<family>.propose``; ``healthy`` has none:
#: nothing to do).
REMEDIES: dict[Category, Remedy] = per_family(__name__, "propose", skip=(Category.HEALTHY,))

__all__ = ["REMEDIES", "Remedy"]
