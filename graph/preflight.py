"""Preflight: would this plan do what it says, on this service, under this policy?

For a plan and the current spec: apply the typed steps (``spec_ops.apply_steps``), render the diff,
validate the vLLM flags (``capacity.parse_vllm_args``), have the planner predict the fit of the new
spec, check GPU / dtype support, the Cloud Run limits a new revision must respect, and the policy.
A plan that fails is not offered as it stands: ``choose_plan`` tries the next-ranked option and,
when none passes, offers an escalation that says why.
"""

from __future__ import annotations

import logging

from graph.observation import Observation
from mcp_tools.errors import UserError
from mcp_tools.incident import ServiceSpec
from mcp_tools.remediation import PlanStep, Preflight, RemediationKind, RemediationPlan
from mcp_tools.settings import Policy
from mcp_tools.spec_ops import apply_steps, get_model, spec_diff

log = logging.getLogger(__name__)

K = RemediationKind


def _policy(policy: Policy | str | None) -> Policy:
    if policy is None:
        from mcp_tools.settings import get_settings

        return get_settings().policy
    return Policy(policy)


def _auto_kinds() -> set[str]:
    from mcp_tools.settings import get_settings

    return set(get_settings().auto_kinds)


def _mem_gib(mem: str | None) -> float | None:
    from graph.propose import _gib

    return _gib(mem)


def preflight(
    plan: RemediationPlan, spec: ServiceSpec | None, *, policy: Policy | str | None = None
) -> tuple[RemediationPlan, ServiceSpec | None, str]:
    """(the plan with ``preflight`` filled in, the spec after the plan, the unified diff)."""
    pol = _policy(policy)
    notes: list[str] = list(plan.preflight.notes)
    ok = True
    checked = plan.model_copy(deep=True)

    if not plan.steps:
        checked.preflight = Preflight(ok=True, notes=[*notes, "nothing to change"])
        return checked, spec, ""

    mutating = [s for s in plan.steps if s.mutates]
    if not mutating:
        notes.append("nothing is applied: the plan asks a person to act")
    if mutating and pol is Policy.READ_ONLY:
        ok = False
        notes.append("policy read-only: no change may be applied")
    elif mutating and pol is Policy.SUGGEST:
        notes.append("policy suggest: shown for review, never applied")
    elif mutating and pol is Policy.AUTO:
        auto = _auto_kinds()
        ask = sorted({s.kind.value for s in mutating if s.kind.value not in auto})
        notes.append(
            "policy auto: applied without asking"
            if not ask
            else f"policy auto: {', '.join(ask)} still need approval"
        )

    if spec is None:
        if mutating:
            checked.preflight = Preflight(
                ok=False,
                notes=[*notes, "not checked: no service spec was observed, so the change cannot be rendered"],
            )
        else:
            checked.preflight = Preflight(ok=ok, notes=notes)
        return checked, None, ""

    try:
        new = apply_steps(spec, plan.steps)
    except UserError as e:
        checked.preflight = Preflight(ok=False, notes=[*notes, f"the steps do not apply: {e}"])
        return checked, spec, ""
    diff = spec_diff(spec, new, label=spec.name)
    if mutating and not diff and not any(s.kind in (K.ROLLBACK, K.RESTART) for s in plan.steps):
        ok = False
        notes.append("the plan changes nothing in the spec")

    ok &= _check_cloud_run_limits(new, notes)
    ok &= _check_offline_hub(plan.steps, new, notes)
    if any(_changes_fit(s) for s in plan.steps):
        ok &= _check_capacity(plan.steps, new, notes)

    checked.preflight = Preflight(ok=ok, notes=notes)
    return checked, new, diff


_HOST_ONLY_FLAGS = {"--swap-space", "--cpu-offload-gb", "--port", "--host", "--served-model-name"}


def _changes_fit(step: PlanStep) -> bool:
    """Could this step change whether the model fits the GPU? (host RAM and scaling cannot)"""
    if step.kind is K.SET_MODEL:
        return True
    if step.kind is K.SET_RESOURCES:
        return bool({"gpu_type", "gpu_count"} & set(step.change))
    if step.kind is K.SET_VLLM_ARGS:
        return any(k.replace("_", "-") not in _HOST_ONLY_FLAGS for k in step.change)
    return False


def _check_offline_hub(steps: list[PlanStep], new: ServiceSpec, notes: list[str]) -> bool:
    """A Hugging Face repo id cannot be served by a service that runs with the Hub offline."""
    offline = str(new.env.get("HF_HUB_OFFLINE", "")).lower() in ("1", "true", "yes", "on")
    for s in steps:
        if s.kind is not K.SET_MODEL:
            continue
        model = str(s.change.get("model", ""))
        is_repo_id = "/" in model and not model.startswith(("/", ".", "gs://", "s3://"))
        if offline and is_repo_id:
            notes.append(
                f"HF_HUB_OFFLINE=1: {model} cannot be downloaded here; copy it next to the current weights "
                "and serve that path instead"
            )
            return False
    return True


def _check_cloud_run_limits(new: ServiceSpec, notes: list[str]) -> bool:
    ok = True
    p = new.startup_probe
    if p is not None:
        from graph.propose import (
            PROBE_MAX_DELAY_S,
            PROBE_MAX_PERIOD_S,
            PROBE_MAX_WINDOW_GPU_S,
            PROBE_MAX_WINDOW_S,
        )

        if p.period_seconds > PROBE_MAX_PERIOD_S or p.timeout_seconds > PROBE_MAX_PERIOD_S:
            ok = False
            notes.append(f"startup probe: period and timeout must be at most {PROBE_MAX_PERIOD_S} s")
        if p.timeout_seconds > p.period_seconds:
            ok = False
            notes.append("startup probe: timeout_seconds must not exceed period_seconds")
        if p.initial_delay_seconds > PROBE_MAX_DELAY_S:
            ok = False
            notes.append(f"startup probe: initial_delay_seconds must be at most {PROBE_MAX_DELAY_S} s")
        window = PROBE_MAX_WINDOW_GPU_S if new.gpu_type else PROBE_MAX_WINDOW_S
        if p.failure_threshold * p.period_seconds > window:
            ok = False
            notes.append(f"startup probe: failure_threshold x period_seconds must be at most {window} s")
    mem = _mem_gib(new.memory)
    if mem is not None:
        from graph.propose import _min_cpu_for

        try:
            cpu = float(new.cpu) if new.cpu is not None else None
        except (TypeError, ValueError):
            cpu = None
        need = _min_cpu_for(mem)
        if cpu is not None and cpu < need:
            ok = False
            notes.append(
                f"{new.memory} of memory needs at least {need} vCPU on Cloud Run (spec has {new.cpu})"
            )
    if new.gpu_count > 1:
        # The apply path is the Cloud Run Admin API, which serves one GPU per instance.
        ok = False
        notes.append(
            f"{new.gpu_count} GPUs per instance: Cloud Run gives one; this needs a multi-GPU GKE node"
        )
    return ok


def _check_capacity(steps: list[PlanStep], new: ServiceSpec, notes: list[str]) -> bool:
    """vLLM flags parse; the planner predicts a fit for the new spec and the GPU supports it."""
    try:
        from mcp_tools.capacity import parse_vllm_args, plan_capacity

        flags = parse_vllm_args(new.args)
    except UserError as e:
        notes.append(f"vLLM flags: {e}")
        return False
    model = flags.model or get_model(new.args)
    if not model or not new.gpu_type:
        notes.append("fit not checked: the spec names no model or GPU")
        return True
    try:
        p = plan_capacity(model, gpu=new.gpu_type, gpu_count=new.gpu_count, flags=flags, suggest=False)
    except UserError as e:
        notes.append(f"fit not checked: {e}")
        return True
    if p.binding_constraint == "unsupported":
        notes.append("not supported on this GPU: " + "; ".join(p.unsupported))
        return False
    if not p.fits:
        notes.append(f"planner: {p.verdict}")
        return False
    notes.append(f"planner: {p.verdict}")
    return True


def choose_plan(
    options: list[RemediationPlan], obs: Observation, *, policy: Policy | str | None = None
) -> tuple[RemediationPlan, list[RemediationPlan], str]:
    """The first option that passes preflight, the other options (checked), and its diff.

    With no option (a healthy service): an empty plan. With no spec to check against: the first
    option, marked not checked. When every option fails: an escalation naming why, and the failed
    options as alternatives.
    """
    if not options:
        empty, _, _ = preflight(RemediationPlan(), obs.service, policy=policy)
        return empty, [], ""
    checked: list[tuple[RemediationPlan, str]] = []
    for opt in options:
        c, _new, diff = preflight(opt, obs.service, policy=policy)
        checked.append((c, diff))
        if c.preflight.ok:
            others = [o for o, _ in checked if o is not c] + [
                preflight(o, obs.service, policy=policy)[0] for o in options[len(checked) :]
            ]
            return c, others, diff
    if obs.service is None:
        first, diff = checked[0]
        return first, [c for c, _ in checked[1:]], diff
    if _policy(policy) is Policy.READ_ONLY:
        first, diff = checked[0]
        return first, [c for c, _ in checked[1:]], diff
    # Why each option failed: its notes, less the planner's "fits" verdicts (those are not the reason).
    reasons = "; ".join(n for c, _ in checked for n in c.preflight.notes if not n.startswith("planner: fits"))
    esc = RemediationPlan(
        steps=[
            PlanStep(
                kind=K.ESCALATE,
                change={
                    "human_action": "No candidate fix passed preflight; a person must choose one.",
                    "why": reasons,
                },
                why=f"every candidate failed preflight: {reasons}"[:500],
            )
        ],
        preflight=Preflight(ok=True, notes=["escalation: no change is applied"]),
    )
    return esc, [c for c, _ in checked], ""
