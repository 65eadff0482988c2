"""Preflight: would this plan do what it says, on this service, under this policy?

For a plan and the current spec: apply the typed steps (``spec_ops.apply_steps``), render the diff,
validate the vLLM flags (``capacity.parse_vllm_args``), have the planner predict the fit of the new
spec, check GPU / dtype support, the Cloud Run limits a new revision must respect, and the policy.
A plan that fails is not offered as it stands: ``choose_plan`` (the preflight step) checks the
options in their rank order, once each, and takes the first that passes; when none passes, it offers an
escalation that says why.
"""

from __future__ import annotations

import logging

from pydantic import BaseModel, Field

from mcp_tools.cloudrun_limits import violations
from mcp_tools.errors import UserError
from mcp_tools.incident import ServiceSpec
from mcp_tools.remediation import PlanStep, Preflight, RemediationKind, RemediationPlan
from mcp_tools.settings import Policy
from mcp_tools.spec_ops import apply_steps, get_model, shape, spec_diff

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

    ok &= _check_cloud_run_limits(spec, new, notes)
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


def _check_cloud_run_limits(old: ServiceSpec, new: ServiceSpec, notes: list[str]) -> bool:
    """The new revision within Cloud Run's limits (``mcp_tools.cloudrun_limits``): a limit the plan
    would break fails it; one the current spec already breaks is named, not blamed on the plan."""
    before = set(violations(shape(old)))
    ok = True
    for v in violations(shape(new)):
        if v in before:
            notes.append(f"already so in the current spec: {v}")
        else:
            ok = False
            notes.append(v)
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


class Choice(BaseModel):
    """What the preflight step decided: the plan offered, the other options (checked), the new spec."""

    plan: RemediationPlan = Field(default_factory=RemediationPlan)
    alternatives: list[RemediationPlan] = Field(default_factory=list)
    diff: str = ""
    new_spec: ServiceSpec | None = None
    ranked: list[RemediationPlan] = Field(default_factory=list)  # every option as checked, rank order
    rank: int | None = None  # the plan's 1-based rank among ``ranked`` (None: not one of them)


def why_not(plan: RemediationPlan) -> list[str]:
    """Why an option failed preflight: its notes, less the planner's "fits" verdicts (not a reason)."""
    return [n for n in plan.preflight.notes if not n.startswith("planner: fits")]


def step_text(step: PlanStep) -> str:
    """One step in words: ``set_vllm_args --quantization=fp8``, ``set_model model=...``."""
    return step.describe()


def plan_text(plan: RemediationPlan) -> str:
    """A plan's steps in words (``+`` between steps); ``no change`` for none."""
    return " + ".join(step_text(s) for s in plan.steps) or "no change"


def choose_plan(
    options: list[RemediationPlan],
    spec: ServiceSpec | None,
    *,
    policy: Policy | str | None = None,
    pick: int | None = None,
) -> Choice:
    """Preflight each option once, in rank order: the first that passes is the plan (the one
    selection rule: the CLI, the demo, the REPL and MCP all show and apply what it chose).

    ``pick`` (1-based): a person chose another option; it is the plan only if it passes preflight
    (``UserError`` otherwise, naming why). With no option (a healthy service): an empty plan. With no
    spec to check against, or under the read-only policy: the first option as checked. When every
    option fails: an escalation naming why, with the failed options as alternatives.
    """
    if not options:
        empty, _, _ = preflight(RemediationPlan(), spec, policy=policy)
        return Choice(plan=empty, new_spec=spec)
    checked = [preflight(opt, spec, policy=policy) for opt in options]
    plans = [c for c, _, _ in checked]

    def chosen(i: int) -> Choice:
        c, new, diff = checked[i]
        return Choice(
            plan=c, alternatives=plans[:i] + plans[i + 1 :], diff=diff, new_spec=new, ranked=plans, rank=i + 1
        )

    if pick is not None:
        if not 1 <= pick <= len(plans):
            raise UserError(
                f"--option {pick}: there is no such option (this plan has options 1 to {len(plans)})"
            )
        if spec is None or not plans[pick - 1].preflight.ok:
            why = "; ".join(why_not(plans[pick - 1])) or "not checked"
            raise UserError(f"--option {pick} failed preflight ({why}); it cannot be approved")
        return chosen(pick - 1)
    if spec is None:
        # Nothing can be applied without a spec (apply needs one), so the best-ranked option is shown as
        # the plan, marked not checked, rather than an escalation that hides it.
        return chosen(0)
    for i, (c, _, _) in enumerate(checked):
        if c.preflight.ok:
            return chosen(i)
    if _policy(policy) is Policy.READ_ONLY:
        return chosen(0)
    reasons = "; ".join(n for c in plans for n in why_not(c))
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
    return Choice(plan=esc, alternatives=plans, new_spec=spec, ranked=plans)
