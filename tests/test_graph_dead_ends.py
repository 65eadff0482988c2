"""Issue 14's dead ends in the loop, each reproduced against the sandbox (the official clients over
REST, the real graph and checkpointer) or on the observation the loop builds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.commands.repl import sandbox_configuration
from graph.observation import Observation
from graph.remedies.rollback import rollback
from graph.runner import run_cycle
from sandbox.testing import sandbox_factory  # noqa: F401  (fixture)


def _mutations(sb: Any) -> list[Any]:
    return [e for e in sb.journal.entries() if e.method in ("POST", "PATCH", "DELETE", "PUT")]


# --- a fix that is not a fix -----------------------------------------------------------------------


def test_a_failed_rollout_that_never_took_the_traffic_is_history_not_a_rollback(
    sandbox_factory: Callable[..., Any],  # noqa: F811
) -> None:
    sb = sandbox_factory(scenario="weights-oom-with-good-revision")
    cfg = sandbox_configuration(sb, service=None)
    first = run_cycle(cfg)
    summary = first.values["observation_summary"]
    failed, serving = summary["latest_created_revision"], summary["latest_ready_revision"]
    d = first.values["diagnosis"]
    assert first.status == "healthy", (d["category"], d["summary"])
    assert not first.values.get("options") and not (first.values.get("plan") or {}).get("steps")
    # The diagnosis says what happened: the failed deploy, who serves, and what to do about the config.
    assert f"revision {failed}, failed to start and takes no traffic" in d["summary"]
    assert f"{serving} serves all of it" in d["summary"] and "update your deploy config" in d["summary"]

    second = run_cycle(cfg)  # the next cycle: the same, nothing proposed, nothing changed
    assert second.status == "healthy" and not second.values.get("options")
    assert _mutations(sb) == []


def test_a_rollback_to_the_revision_that_already_serves_is_never_proposed() -> None:
    obs = Observation(
        id="svc",
        latest_created_revision="svc-00002-bad",
        latest_ready_revision="svc-00001-good",
        serving_revision="svc-00001-good",
        revisions=["svc-00002-bad", "svc-00001-good"],
        ready_revisions=["svc-00001-good"],
    )
    assert obs.failed_rollout == "svc-00002-bad"
    assert rollback(obs, "engine_crash") is None  # traffic is on svc-00001-good already
    moved = obs.model_copy(update={"serving_revision": "svc-00003-other", "ready_revisions": []})
    assert moved.failed_rollout is None
    plan = rollback(moved, "engine_crash")
    assert plan is not None and plan.steps[0].change == {"revision": "svc-00001-good"}
