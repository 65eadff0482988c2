"""The capacity planner's view of the current spec, and planner suggestions as typed plan steps."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from graph.observation import Observation
from graph.remedies.base import K, plan
from graph.remedies.catalog import QUANT_SUFFIX
from mcp_tools.incident import ServiceSpec
from mcp_tools.remediation import PlanStep, RemediationPlan
from mcp_tools.spec_ops import get_model

if TYPE_CHECKING:
    from mcp_tools.capacity import CapacityPlan, ModelSpec, Suggestion, VllmFlags

log = logging.getLogger(__name__)


class Capacity:
    """The current spec's flags, model and GPU as the planner sees them (None where unknown)."""

    def __init__(self, obs: Observation) -> None:
        self.spec: ServiceSpec | None = obs.service
        self.flags: VllmFlags | None = None
        self.model: ModelSpec | None = None
        self.plan: CapacityPlan | None = None
        self.error: str | None = None
        svc = obs.service
        if svc is None or not svc.args:
            self.error = "no service spec with vLLM args was observed"
            return
        try:
            from mcp_tools.capacity import parse_vllm_args, resolve_model, spec_from_config

            self.flags = parse_vllm_args(svc.args)
            ref = self.flags.model or get_model(svc.args)
            try:
                self.model = resolve_model(ref) if ref else None
            except Exception:  # noqa: BLE001 - not in the catalog: try the incident's config.json
                self.model = None
            if self.model is None and obs.model_config_:
                self.model = spec_from_config(obs.model_config_, model_id=ref or "model", source="incident")
            if self.model is None:
                self.error = f"the planner does not know the model {ref!r}"
                return
            if not svc.gpu_type:
                self.error = "the spec names no GPU type"
                return
            self.plan = self.run(self.flags)
        except Exception as e:  # noqa: BLE001 - the planner's own errors are one line each
            self.error = str(e).splitlines()[0][:200]
            log.info("planner unavailable for %s: %s", obs.id, self.error)

    def run(
        self, flags: VllmFlags, gpu_count: int | None = None, model: ModelSpec | None = None
    ) -> CapacityPlan:
        from mcp_tools.capacity import plan_capacity

        assert self.spec is not None and self.spec.gpu_type
        return plan_capacity(
            model or self.model,  # type: ignore[arg-type]
            gpu=self.spec.gpu_type,
            gpu_count=gpu_count or self.spec.gpu_count,
            flags=flags,
        )

    @property
    def ok(self) -> bool:
        return self.plan is not None

    @property
    def gpu(self) -> str | None:
        """The service's GPU type (None: not known)."""
        return self.spec.gpu_type if self.spec else None


def predicted(p: CapacityPlan | Suggestion) -> dict[str, Any]:
    """The planner's figures a step carries in ``PlanStep.predicted``."""
    d: dict[str, Any] = {
        "fits": p.fits,
        "weights_gib": p.weights_gib,
        "kv_cache_tokens": p.kv_cache_tokens,
    }
    summary = getattr(p, "summary", None) or getattr(p, "verdict", None)
    if summary:
        d["summary"] = summary
    return d


def drop_conflicting_quantization(cap: Capacity, model: str) -> list[PlanStep]:
    """The step removing a --quantization flag that would contradict a pre-quantized checkpoint."""
    if cap.flags is None or not cap.flags.quantization or not QUANT_SUFFIX.search(model):
        return []
    why = f"{model} carries its own quantization; --quantization {cap.flags.quantization} would conflict"
    return [PlanStep(kind=K.SET_VLLM_ARGS, change={"--quantization": None}, why=why)]


def model_option(cap: Capacity, model: str, why: str) -> RemediationPlan:
    """set_model (and drop a --quantization flag that would contradict a pre-quantized checkpoint)."""
    return plan(
        PlanStep(kind=K.SET_MODEL, change={"model": model}, why=why),
        *drop_conflicting_quantization(cap, model),
    )


def from_suggestion(s: Suggestion, cap: Capacity) -> RemediationPlan | None:
    """A planner suggestion as typed steps (its prediction attached to the first step)."""
    pred = predicted(s)
    steps: list[PlanStep] = []
    if s.kind == "set_model":
        model = str(s.change.get("model"))
        steps.append(
            PlanStep(
                kind=K.SET_MODEL,
                change={"model": model},
                why=f"{s.summary}. The checkpoint must be reachable from the service "
                "(Hugging Face with a token, or copied next to the current weights).",
                predicted=pred,
            )
        )
        if s.also:
            steps.append(
                PlanStep(
                    kind=K.SET_VLLM_ARGS,
                    change=dict(s.also),
                    why="needed together with the new checkpoint for the KV cache to fit",
                )
            )
        steps += drop_conflicting_quantization(cap, model)
    elif s.kind == "set_vllm_args":
        steps.append(PlanStep(kind=K.SET_VLLM_ARGS, change=dict(s.change), why=s.summary, predicted=pred))
        if s.also:
            steps.append(PlanStep(kind=K.SET_VLLM_ARGS, change=dict(s.also), why="needed together with it"))
    elif s.kind == "set_resources":
        n = s.change.get("gpu_count")
        if not isinstance(n, int):
            return None
        steps.append(
            PlanStep(
                kind=K.SET_RESOURCES,
                change={"gpu_count": n},
                why=f"{s.summary}. Cloud Run gives one GPU per instance: this needs a multi-GPU GKE node.",
                predicted=pred,
            )
        )
        steps.append(
            PlanStep(
                kind=K.SET_VLLM_ARGS,
                change={"--tensor-parallel-size": n},
                why=f"shard the model over the {n} GPUs",
            )
        )
    else:
        return None
    return plan(*steps)


def planner_options(cap: Capacity, kinds: set[str] | None = None) -> list[RemediationPlan]:
    """The planner's fitting suggestions as plans; more GPUs per instance (GKE only) ranked last."""
    if cap.plan is None:
        return []
    out = []
    for s in cap.plan.suggestions:
        if not s.fits or (kinds and s.kind not in kinds):
            continue
        p = from_suggestion(s, cap)
        if p is not None:
            out.append(p)
    out.sort(key=lambda p: any(st.kind is K.SET_RESOURCES and "gpu_count" in st.change for st in p.steps))
    return out


def flags_option(cap: Capacity, change: dict[str, Any], why: str) -> RemediationPlan:
    """A set_vllm_args step, with the planner's prediction for the changed flags when it can compute one."""
    pred = None
    if cap.ok and cap.flags is not None:
        try:
            from mcp_tools.capacity import parse_vllm_args
            from mcp_tools.spec_ops import set_flag

            args = list(cap.spec.args) if cap.spec else []
            for k, v in change.items():
                args = set_flag(args, k, v)
            pred = predicted(cap.run(parse_vllm_args(args)))
        except Exception as e:  # noqa: BLE001
            log.debug("no prediction for %s: %s", change, e)
    return plan(PlanStep(kind=K.SET_VLLM_ARGS, change=change, why=why, predicted=pred))


def gpu_option(cap: Capacity, gpu: str, why: str) -> RemediationPlan:
    """set_resources to another GPU (with the CPU and memory Cloud Run requires for it), with the
    planner's prediction there."""
    from graph.remedies.catalog import CLOUD_RUN_GPUS
    from mcp_tools.cloudrun_limits import GPU_MINIMUMS, cpu_value, memory_gib

    change: dict[str, Any] = {"gpu_type": gpu}
    if gpu in GPU_MINIMUMS and cap.spec is not None:
        min_cpu, min_mem = GPU_MINIMUMS[gpu]
        cpu, mem = cpu_value(cap.spec.cpu), memory_gib(cap.spec.memory)
        if cpu is not None and cpu < min_cpu:
            change["cpu"] = min_cpu
        if mem is not None and mem < min_mem:
            change["memory"] = f"{min_mem}Gi"

    pred = None
    if cap.model is not None and cap.flags is not None:
        try:
            from mcp_tools.capacity import plan_capacity

            pred = predicted(plan_capacity(cap.model, gpu=gpu, gpu_count=1, flags=cap.flags, suggest=False))
        except Exception as e:  # noqa: BLE001
            log.debug("no prediction on %s: %s", gpu, e)
    cur = cap.gpu
    if cur and cur not in CLOUD_RUN_GPUS and gpu in CLOUD_RUN_GPUS:
        why += (
            f". Cloud Run offers only {' and '.join(CLOUD_RUN_GPUS)} GPUs, not {cur}: a service on "
            f"{cur} runs on GKE, so this means a GKE node pool with {gpu} GPUs (or moving it to Cloud Run)"
        )
    if len(change) > 1:
        why += f"; {gpu} instances need at least {GPU_MINIMUMS[gpu][0]} vCPU and {GPU_MINIMUMS[gpu][1]} GiB"
    return plan(PlanStep(kind=K.SET_RESOURCES, change=change, why=why, predicted=pred))
