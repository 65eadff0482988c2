"""rollback: for a start-up failure of the latest revision, traffic back to the last ready one first."""

from __future__ import annotations

from graph.observation import Observation
from graph.remedies.base import K, plan
from mcp_tools.remediation import PlanStep, RemediationPlan
from mcp_tools.taxonomy import Category

C = Category

#: Start-up failures: a rollback to the last ready revision restores service at once.
STARTUP_FAILURES = frozenset(
    {
        C.WEIGHTS_OOM,
        C.KV_CACHE_OOM,
        C.RUNTIME_OOM,
        C.CONTEXT_TOO_LONG,
        C.HOST_MEMORY_EXCEEDED,
        C.STARTUP_TIMEOUT,
        C.MODEL_NOT_FOUND,
        C.AUTH_DENIED,
        C.UNSUPPORTED_CONFIG,
        C.ENGINE_CRASH,
        C.IMAGE_PULL,
    }
)


def known_good_revision(obs: Observation) -> str | None:
    """The last Ready revision, when the failing one is the latest (from the Cloud Run API) and the
    traffic is not already there: a rollback to the serving revision changes nothing, it is no fix."""
    target = obs.latest_ready_revision
    if not obs.failing_revision_is_latest or not target or target == obs.serving_revision:
        return None
    return target


def rollback(obs: Observation, category: str) -> RemediationPlan | None:
    if category not in STARTUP_FAILURES:
        return None
    target = known_good_revision(obs)
    if not target:
        return None
    return plan(
        PlanStep(
            kind=K.ROLLBACK,
            change={"revision": target},
            why=f"the latest revision {obs.latest_created_revision or ''} failed ({category}); route all "
            f"traffic back to {target}, the last ready revision, while the fix is prepared",
        )
    )
