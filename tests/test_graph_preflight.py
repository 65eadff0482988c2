"""Preflight: each option checked once, in rank order, against Cloud Run's limits, the planner and the
policy; and the limits it checks are the ones the (emulated) Cloud Run Admin API refuses."""

from __future__ import annotations

import pytest

from graph.preflight import choose_plan, preflight
from mcp_tools.cloudrun import CloudRun
from mcp_tools.errors import ExternalError, UserError
from mcp_tools.incident import ServiceSpec, StartupProbe
from mcp_tools.remediation import PlanStep, RemediationKind, RemediationPlan
from mcp_tools.settings import Settings
from mcp_tools.spec_ops import apply_steps
from sandbox.testing import sandbox_factory  # noqa: F401  (fixture)

K = RemediationKind
L4 = ServiceSpec(
    name="gemma-4-12b",
    gpu_type="nvidia-l4",
    gpu_count=1,
    cpu=8,
    memory="32Gi",
    args=["--model=/mnt/models/gemma-4-12B-it-qat-w4a16-ct", "--max-model-len=8192", "--port=8080"],
    max_instances=1,
)


def _plan(kind: RemediationKind, **change: object) -> RemediationPlan:
    return RemediationPlan(steps=[PlanStep(kind=kind, change=dict(change), why="test")])


@pytest.mark.parametrize(
    ("plan", "needle"),
    [
        (_plan(K.SET_RESOURCES, cpu=12), "Cloud Run allows 0.08 to 8 vCPU"),
        (_plan(K.SET_RESOURCES, memory="48Gi"), "at most 32 GiB"),
        (_plan(K.SET_RESOURCES, memory="16Gi", cpu=4), None),  # the L4 minimum: accepted
        (_plan(K.SET_RESOURCES, cpu=2), "nvidia-l4 needs at least 4 vCPU"),
        (_plan(K.SET_SCALING, concurrency=1000), None),
        (_plan(K.SET_PROBE, period_seconds=240, failure_threshold=8), "at most 1800 s"),
    ],
)
def test_cloud_run_limits(plan: RemediationPlan, needle: str | None) -> None:
    checked, new, diff = preflight(plan, L4, policy="approve")
    if needle is None:
        assert checked.preflight.ok, checked.preflight.notes
        assert new is not None and diff
    else:
        assert not checked.preflight.ok
        assert any(needle in n for n in checked.preflight.notes), checked.preflight.notes


def test_a_limit_the_current_spec_already_breaks_is_named_not_blamed_on_the_plan() -> None:
    small = L4.model_copy(update={"cpu": 2})  # below the L4 minimum already
    checked, _, _ = preflight(_plan(K.SET_SCALING, max_instances=2), small, policy="approve")
    assert checked.preflight.ok
    assert any(
        n.startswith("already so in the current spec: nvidia-l4 needs") for n in checked.preflight.notes
    )


def test_options_are_checked_once_each_in_rank_order() -> None:
    bad = _plan(K.SET_RESOURCES, gpu_count=2)  # Cloud Run gives one GPU per instance
    bad.preflight.notes.append("planner: a note the proposer left")
    good = _plan(K.SET_SCALING, max_instances=2)
    later = _plan(K.SET_SCALING, max_instances=3)
    choice = choose_plan([bad, good, later], L4, policy="approve")
    assert choice.plan.steps == good.steps and choice.plan.preflight.ok
    assert [a.steps for a in choice.alternatives] == [bad.steps, later.steps]
    refused = choice.alternatives[0].preflight
    assert not refused.ok and any("this needs a multi-GPU GKE node" in n for n in refused.notes)
    assert refused.notes.count("planner: a note the proposer left") == 1
    assert choice.new_spec is not None and choice.new_spec.max_instances == 2
    assert "max_instances: 2" in choice.diff


def test_when_every_option_fails_a_person_is_asked_and_told_why() -> None:
    choice = choose_plan([_plan(K.SET_RESOURCES, cpu=16)], L4, policy="approve")
    [step] = choice.plan.steps
    assert step.kind is K.ESCALATE and "8 vCPU" in step.change["why"]
    assert choice.plan.preflight.ok and not choice.plan.mutates
    assert [a.preflight.ok for a in choice.alternatives] == [False]


def test_policy_and_missing_spec() -> None:
    ro = choose_plan([_plan(K.SET_SCALING, max_instances=2)], L4, policy="read-only")
    assert not ro.plan.preflight.ok and any("read-only" in n for n in ro.plan.preflight.notes)
    blind = choose_plan([_plan(K.SET_SCALING, max_instances=2)], None, policy="approve")
    assert not blind.plan.preflight.ok and blind.new_spec is None
    assert choose_plan([], L4).plan.steps == []


def test_what_preflight_refuses_the_sandboxed_admin_api_refuses_too(sandbox_factory) -> None:  # noqa: F811
    sb = sandbox_factory(scenario="healthy")
    cr = CloudRun(Settings(**sb.settings_fields()))
    current = cr.get_service("gemma-4-12b").spec
    for plan in (
        _plan(K.SET_RESOURCES, cpu=12),
        _plan(K.SET_PROBE, period_seconds=240, failure_threshold=8, initial_delay_seconds=0),
    ):
        checked, _, _ = preflight(plan, current, policy="approve")
        assert not checked.preflight.ok
        # Over REST a 400 INVALID_ARGUMENT arrives as api_core's BadRequest (mapped by mcp_tools.cloudrun).
        with pytest.raises((UserError, ExternalError), match=r"spec\.template: .*(Cloud Run allows|at most)"):
            cr.update_service("gemma-4-12b", apply_steps(current, plan.steps), approval_id="test")
    ok = _plan(K.SET_PROBE, **StartupProbe(period_seconds=240, failure_threshold=7).model_dump())
    checked, new, _ = preflight(ok, current, policy="approve")
    assert checked.preflight.ok, checked.preflight.notes
    assert new is not None
