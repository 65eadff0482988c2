"""The propose step: candidate remediation plans for a diagnosis (SPEC.md section 2), best first.

``propose_options(diagnosis, obs)`` runs the failure family's remedy (``graph.remedies.REMEDIES``) with
the capacity planner's view of the current spec, and puts a rollback to the last ready revision first
when the latest revision failed to start. A healthy service gets no option. Choosing among the options
is preflight's job (``graph.preflight.choose_plan``: the first that passes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graph.observation import Observation
from graph.remedies import REMEDIES
from graph.remedies.blind import propose as escalate_blind
from graph.remedies.planner import Capacity
from graph.remedies.rollback import rollback
from graph.remedies.unknown import propose as escalate_unknown
from mcp_tools.remediation import RemediationPlan
from mcp_tools.taxonomy import Category

if TYPE_CHECKING:
    from graph.diagnosis import Diagnosis

#: Families whose options the planner ranks: when it could not run, each option says why.
_PLANNER_RANKED = {Category.WEIGHTS_OOM, Category.KV_CACHE_OOM, Category.RUNTIME_OOM}


def propose_options(diagnosis: Diagnosis, obs: Observation) -> list[RemediationPlan]:
    """Candidate plans for the diagnosis, best first (empty for ``healthy``)."""
    if diagnosis.category == Category.HEALTHY:
        return []
    cap = Capacity(obs)
    remedy = REMEDIES.get(diagnosis.category, escalate_unknown)  # type: ignore[call-overload]
    if diagnosis.category == Category.UNKNOWN and obs.blind_to("logs") is not None:
        remedy = escalate_blind  # what to read by hand, not "read the cited lines"
    opts = remedy(diagnosis, obs, cap)
    rb = rollback(obs, diagnosis.category)
    if rb is not None:
        opts = [rb, *opts]
    if cap.error and diagnosis.category in _PLANNER_RANKED:
        for o in opts:
            o.preflight.notes.append(f"planner: {cap.error}")
    return opts
