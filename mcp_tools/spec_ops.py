"""Typed plan steps applied to a service spec, and the diff a person approves.

This is the only place a remediation step turns into a concrete change. It is pure: it never talks
to Cloud Run. Preflight, the graph's apply node and the MCP server's two-step mutations all use it.
"""

from __future__ import annotations

import difflib
import hashlib
from typing import TYPE_CHECKING, Any

from mcp_tools.cloudrun_limits import Shape, violations
from mcp_tools.errors import UserError
from mcp_tools.incident import ServiceSpec, StartupProbe
from mcp_tools.remediation import PlanStep, RemediationKind

if TYPE_CHECKING:
    from mcp_tools.capacity import CapacityPlan

_RESOURCE_KEYS = {"cpu", "memory", "gpu_type", "gpu_count"}
_SCALING_KEYS = {"min_instances", "max_instances", "concurrency"}
_PROBE_KEYS = set(StartupProbe.model_fields)


def _flag_name(flag: str) -> str:
    f = flag.strip()
    if not f.startswith("--"):
        f = "--" + f.lstrip("-")
    return f.replace("_", "-")


def _split(arg: str) -> tuple[str, str | None]:
    if arg.startswith("--") and "=" in arg:
        name, value = arg.split("=", 1)
        return name.replace("_", "-"), value
    return (arg.replace("_", "-") if arg.startswith("--") else arg), None


def get_flag(args: list[str], flag: str) -> str | bool | None:
    """The value of ``--flag`` in an argument list (``--flag=v`` or ``--flag v``); True for a bare flag."""
    want = _flag_name(flag)
    for i, a in enumerate(args):
        name, value = _split(a)
        if name != want:
            continue
        if value is not None:
            return value
        nxt = args[i + 1] if i + 1 < len(args) else None
        return nxt if nxt is not None and not nxt.startswith("--") else True
    return None


def flags(args: list[str]) -> dict[str, str | bool]:
    """Every ``--flag`` an argument list sets, by its ``--kebab-case`` name, with its value (True: bare)."""
    out: dict[str, str | bool] = {}
    for a in args:
        name, _ = _split(a)
        if name.startswith("--"):
            value = get_flag(args, name)
            if value is not None:
                out[name] = value
    return out


def set_flag(args: list[str], flag: str, value: Any) -> list[str]:
    """A copy of ``args`` with ``--flag`` set to ``value`` (True: a bare flag; None/False: removed)."""
    want = _flag_name(flag)
    out: list[str] = []
    i = 0
    while i < len(args):
        name, v = _split(args[i])
        if name == want:
            nxt = args[i + 1] if i + 1 < len(args) else None
            i += 2 if v is None and nxt is not None and not nxt.startswith("--") else 1
            continue
        out.append(args[i])
        i += 1
    if value is None or value is False:
        return out
    if value is True:
        return [*out, want]
    return [*out, f"{want}={value}"]


def get_model(args: list[str]) -> str | None:
    """The checkpoint an argument list serves: ``--model``, or the positional after ``serve``."""
    m = get_flag(args, "--model")
    if isinstance(m, str):
        return m
    if "serve" in args:
        i = args.index("serve")
        if i + 1 < len(args) and not args[i + 1].startswith("-"):
            return args[i + 1]
    return None


def plan_spec(spec: ServiceSpec, *, suggest: bool = True) -> CapacityPlan | None:
    """The capacity planner on a revision spec: its model, GPU type and count, and vLLM flags. None
    when the spec names no model or no GPU; the planner's errors (an unknown checkpoint) propagate."""
    from mcp_tools.capacity import parse_vllm_args, plan_capacity, resolve_model

    model_ref = get_model(spec.args)
    if not model_ref or not spec.gpu_type:
        return None
    return plan_capacity(
        resolve_model(model_ref),
        gpu=spec.gpu_type,
        gpu_count=spec.gpu_count,
        flags=parse_vllm_args(spec.args),
        suggest=suggest,
    )


def set_model(args: list[str], model: str) -> list[str]:
    if not model or not isinstance(model, str):
        raise UserError("set_model needs a non-empty 'model'")
    if isinstance(get_flag(args, "--model"), str) or "serve" not in args:
        return set_flag(args, "--model", model)
    out = list(args)
    i = out.index("serve")
    if i + 1 < len(out) and not out[i + 1].startswith("-"):
        out[i + 1] = model
    else:
        out.insert(i + 1, model)
    return out


def _check_keys(step: PlanStep, allowed: set[str]) -> None:
    bad = sorted(set(step.change) - allowed)
    if bad:
        raise UserError(f"{step.kind.value}: unknown change key(s) {bad}; allowed: {sorted(allowed)}")


def _positive_int(kind: str, key: str, value: Any, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UserError(f"{kind}: '{key}' must be a whole number >= {minimum}, not {value!r}")
    return value


def apply_step(spec: ServiceSpec, step: PlanStep) -> ServiceSpec:
    """The spec after one step. ``rollback`` and ``escalate`` change no spec (traffic / a person)."""
    new = spec.model_copy(deep=True)
    kind = step.kind
    if kind is RemediationKind.SET_VLLM_ARGS:
        if not step.change:
            raise UserError("set_vllm_args needs at least one flag in 'change'")
        args = list(new.args)
        for flag, value in step.change.items():
            if _flag_name(flag) == "--model":
                raise UserError("set_vllm_args cannot change --model; use a set_model step")
            args = set_flag(args, flag, value)
        new.args = args
    elif kind is RemediationKind.SET_MODEL:
        _check_keys(step, {"model"})
        new.args = set_model(new.args, step.change.get("model", ""))
    elif kind is RemediationKind.SET_RESOURCES:
        _check_keys(step, _RESOURCE_KEYS)
        for key, value in step.change.items():
            if key == "gpu_count":
                value = _positive_int(kind.value, key, value, 1)
            setattr(new, key, value)
    elif kind is RemediationKind.SET_SCALING:
        _check_keys(step, _SCALING_KEYS)
        for key, value in step.change.items():
            setattr(new, key, _positive_int(kind.value, key, value, 0 if key == "min_instances" else 1))
        bad = violations(
            Shape(
                min_instances=new.min_instances, max_instances=new.max_instances, concurrency=new.concurrency
            )
        )
        if bad:
            raise UserError("set_scaling: " + "; ".join(bad))
    elif kind is RemediationKind.SET_PROBE:
        _check_keys(step, _PROBE_KEYS)
        probe = (new.startup_probe or StartupProbe()).model_dump()
        probe.update(step.change)
        new.startup_probe = StartupProbe.model_validate(probe)
    return new


def shape(spec: ServiceSpec) -> Shape:
    """The fields of a spec that Cloud Run's limits (``mcp_tools.cloudrun_limits``) speak of."""
    p = spec.startup_probe
    return Shape(
        cpu=spec.cpu,
        memory=spec.memory,
        gpu_type=spec.gpu_type,
        gpu_count=spec.gpu_count if spec.gpu_type else 0,
        min_instances=spec.min_instances,
        max_instances=spec.max_instances,
        concurrency=spec.concurrency,
        probe_initial_delay_s=p.initial_delay_seconds if p else None,
        probe_period_s=p.period_seconds if p else None,
        probe_timeout_s=p.timeout_seconds if p else None,
        probe_failure_threshold=p.failure_threshold if p else None,
    )


def round_max_model_len(n: int) -> int:
    """A --max-model-len a person would write: a multiple of 1024 (or of 256 below 4096)."""
    step = 1024 if n >= 4096 else 256
    return max(step, n // step * step) if n >= step else max(1, n)


def apply_steps(spec: ServiceSpec, steps: list[PlanStep]) -> ServiceSpec:
    for step in steps:
        spec = apply_step(spec, step)
    return spec


def render(spec: ServiceSpec) -> str:
    """A stable YAML rendering of a spec, for diffs and reports (libyaml's emitter where PyYAML has it:
    preflight renders two specs for every plan, and the pure-Python emitter was a tenth of a replay)."""
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(spec.model_dump(mode="json", exclude_none=True), Dumper=dumper, sort_keys=False)


def _shown(spec: ServiceSpec) -> str:
    """A spec rendered for people: secrets in args (``--api-key VALUE``) and env values redacted."""
    from mcp_tools.redact import redact_spec

    return render(redact_spec(spec))


def spec_diff(old: ServiceSpec, new: ServiceSpec, *, label: str = "service") -> str:
    """A unified diff of two specs ('' when they are the same), for people to approve: secrets are
    redacted (compare specs with ``render``, never with this)."""
    lines = difflib.unified_diff(
        _shown(old).splitlines(keepends=True),
        _shown(new).splitlines(keepends=True),
        fromfile=f"{label} (current)",
        tofile=f"{label} (proposed)",
    )
    return "".join(lines)


# --- a canary's names and traffic ------------------------------------------------------------------

_REVISION_MAX = 63


def canary_names(service: str, key: str) -> tuple[str, str]:
    """(revision name, traffic tag) of the canary a change with apply key ``key`` deploys. Derived
    from the key, so every attempt at the same change names the same revision (Cloud Run refuses a
    second revision of that name)."""
    short = hashlib.sha256(key.encode()).hexdigest()[:8]
    tag = f"canary-{short}"
    suffix = tag if len(service) + 1 + len(tag) <= _REVISION_MAX else f"c{short}"
    return f"{service}-{suffix}", tag


def canary_split(serving: str, canary: str, percent: int) -> dict[str, int]:
    """The traffic of a canary step: ``percent`` on the canary, the rest on the serving revision."""
    if not 0 <= percent <= 100:
        raise UserError(f"a canary's share must be from 0 to 100 percent, not {percent}")
    if percent == 100 or serving == canary:
        return {canary: 100}
    return {serving: 100 - percent, canary: percent}
