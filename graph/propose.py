"""Typed remediation plans per root-cause category (SPEC.md section 2), ranked.

``propose_options`` returns candidate plans, best first; ``propose_plan`` the first. For memory
failures the capacity planner ranks the options (a QAT / FP8 checkpoint, online FP8, an FP8 KV
cache, a shorter --max-model-len, more GPUs) and each step carries the planner's prediction in
``PlanStep.predicted``. Quota and access problems escalate, saying exactly what a person must do.
A healthy service gets an empty plan. Nothing here deletes anything, and nothing comes from a
model's free text: the steps are built from the category, the analyzers' facts and the planner.
"""

from __future__ import annotations

import logging
import math
import re
from typing import TYPE_CHECKING, Any

from graph.observation import Observation
from mcp_tools.incident import ServiceSpec
from mcp_tools.remediation import PlanStep, RemediationKind, RemediationPlan
from mcp_tools.spec_ops import get_flag, get_model

if TYPE_CHECKING:
    from graph.diagnosis import Diagnosis
    from mcp_tools.capacity import CapacityPlan, ModelSpec, Suggestion, VllmFlags

log = logging.getLogger(__name__)

K = RemediationKind

#: Start-up failures: a rollback to the last ready revision restores service at once.
_STARTUP_FAILURES = {
    "weights_oom",
    "kv_cache_oom",
    "runtime_oom",
    "context_too_long",
    "host_memory_exceeded",
    "startup_timeout",
    "model_not_found",
    "auth_denied",
    "unsupported_config",
    "engine_crash",
    "image_pull",
}


def _plan(*steps: PlanStep) -> RemediationPlan:
    return RemediationPlan(steps=list(steps))


def _escalate(action: str, why: str, **details: Any) -> RemediationPlan:
    change: dict[str, Any] = {"human_action": action}
    change.update({k: v for k, v in details.items() if v is not None})
    return _plan(PlanStep(kind=K.ESCALATE, change=change, why=why))


# --------------------------------------------------------------------------------------------------
# The planner's view of the current spec
# --------------------------------------------------------------------------------------------------


class _Capacity:
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


def _predicted(p: CapacityPlan | Suggestion) -> dict[str, Any]:
    d: dict[str, Any] = {
        "fits": p.fits,
        "weights_gib": p.weights_gib,
        "kv_cache_tokens": p.kv_cache_tokens,
    }
    summary = getattr(p, "summary", None) or getattr(p, "verdict", None)
    if summary:
        d["summary"] = summary
    return d


def _drop_conflicting_quantization(cap: _Capacity, model: str) -> list[PlanStep]:
    """The step removing a --quantization flag that would contradict a pre-quantized checkpoint."""
    if cap.flags is None or not cap.flags.quantization or not _QUANT_SUFFIX.search(model):
        return []
    why = f"{model} carries its own quantization; --quantization {cap.flags.quantization} would conflict"
    return [PlanStep(kind=K.SET_VLLM_ARGS, change={"--quantization": None}, why=why)]


def _model_option(cap: _Capacity, model: str, why: str) -> RemediationPlan:
    """set_model (and drop a --quantization flag that would contradict a pre-quantized checkpoint)."""
    return _plan(
        PlanStep(kind=K.SET_MODEL, change={"model": model}, why=why),
        *_drop_conflicting_quantization(cap, model),
    )


def _from_suggestion(s: Suggestion, cap: _Capacity) -> RemediationPlan | None:
    """A planner suggestion as typed steps (its prediction attached to the first step)."""
    pred = _predicted(s)
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
        steps += _drop_conflicting_quantization(cap, model)
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
    return _plan(*steps)


def _planner_options(cap: _Capacity, kinds: set[str] | None = None) -> list[RemediationPlan]:
    if cap.plan is None:
        return []
    out = []
    for s in cap.plan.suggestions:
        if not s.fits or (kinds and s.kind not in kinds):
            continue
        p = _from_suggestion(s, cap)
        if p is not None:
            out.append(p)
    # More GPUs per instance is a GKE-only fix: rank it after everything Cloud Run can do.
    out.sort(key=lambda p: any(st.kind is K.SET_RESOURCES and "gpu_count" in st.change for st in p.steps))
    return out


def _flags_option(cap: _Capacity, change: dict[str, Any], why: str) -> RemediationPlan:
    """A set_vllm_args step, with the planner's prediction for the changed flags when it can compute one."""
    pred = None
    if cap.ok and cap.flags is not None:
        try:
            from mcp_tools.capacity import parse_vllm_args
            from mcp_tools.spec_ops import set_flag

            args = list(cap.spec.args) if cap.spec else []
            for k, v in change.items():
                args = set_flag(args, k, v)
            p = cap.run(parse_vllm_args(args))
            pred = _predicted(p)
        except Exception as e:  # noqa: BLE001
            log.debug("no prediction for %s: %s", change, e)
    return _plan(PlanStep(kind=K.SET_VLLM_ARGS, change=change, why=why, predicted=pred))


def _rollback(obs: Observation, category: str) -> RemediationPlan | None:
    if category not in _STARTUP_FAILURES:
        return None
    target = _known_good_revision(obs)
    if not target:
        return None
    return _plan(
        PlanStep(
            kind=K.ROLLBACK,
            change={"revision": target},
            why=f"the latest revision {obs.latest_created_revision or ''} failed ({category}); route all "
            f"traffic back to {target}, the last ready revision, while the fix is prepared",
        )
    )


#: Cloud Run's GPUs, smallest first (a larger GPU is the fix when no checkpoint fits).
CLOUD_RUN_GPUS = ("nvidia-l4", "nvidia-rtx-pro-6000")
_QUANT_SUFFIX = re.compile(
    r"[-_](?:NVFP4|FP4|FP8(?:[-_](?:Dynamic|block|static))?|qat[-_]w4a16(?:[-_]ct)?|AWQ|GPTQ(?:[-_]Int\d)?|w4a16|int4)$",
    re.IGNORECASE,
)


def _larger_gpu(cap: _Capacity, min_cc: float | None = None) -> str | None:
    """The next Cloud Run GPU above the current one (with at least ``min_cc`` when given)."""
    cur = cap.spec.gpu_type if cap.spec else None
    try:
        from mcp_tools.capacity import resolve_gpu

        cur_mem = resolve_gpu(cur).memory_gib if cur else 0.0
        for name in CLOUD_RUN_GPUS:
            g = resolve_gpu(name)
            if name != cur and g.memory_gib > cur_mem and (min_cc is None or g.cc >= min_cc):
                return name
            if name != cur and min_cc is not None and g.cc >= min_cc and g.memory_gib >= cur_mem:
                return name
    except Exception:  # noqa: BLE001
        return None
    return None


def _gpu_cc(cap: _Capacity) -> float | None:
    """The compute capability of the service's GPU (None: unknown)."""
    gpu = cap.spec.gpu_type if cap.spec else None
    if not gpu:
        return None
    try:
        from mcp_tools.capacity import resolve_gpu

        return float(resolve_gpu(gpu).cc)
    except Exception:  # noqa: BLE001
        return None


def _gpu_option(cap: _Capacity, gpu: str, why: str) -> RemediationPlan:
    pred = None
    if cap.model is not None and cap.flags is not None:
        try:
            from mcp_tools.capacity import plan_capacity

            pred = _predicted(plan_capacity(cap.model, gpu=gpu, gpu_count=1, flags=cap.flags, suggest=False))
        except Exception as e:  # noqa: BLE001
            log.debug("no prediction on %s: %s", gpu, e)
    cur = cap.spec.gpu_type if cap.spec else None
    if cur and cur not in CLOUD_RUN_GPUS and gpu in CLOUD_RUN_GPUS:
        why += (
            f". Cloud Run offers only {' and '.join(CLOUD_RUN_GPUS)} GPUs, not {cur}: a service on "
            f"{cur} runs on GKE, so this means a GKE node pool with {gpu} GPUs (or moving it to Cloud Run)"
        )
    return _plan(PlanStep(kind=K.SET_RESOURCES, change={"gpu_type": gpu}, why=why, predicted=pred))


def _catalog_ids() -> list[str]:
    try:
        from mcp_tools.capacity import list_catalog

        return list(list_catalog())
    except Exception:  # noqa: BLE001
        return []


def _closest_model(ref: str) -> str | None:
    """The catalog checkpoint a mistyped model reference most likely meant (same directory for paths)."""
    import difflib

    ids = _catalog_ids()
    if not ref or not ids:
        return None
    base = ref.rstrip("/").split("/")[-1]
    is_path = ref.startswith(("/", "gs://", "./"))
    names = {i.split("/")[-1]: i for i in ids}
    for name, full in names.items():  # a case typo
        if name.lower() == base.lower() and name != base:
            return ref.rstrip("/")[: -len(base)] + name if is_path else full
    if is_path:
        m = difflib.get_close_matches(base.lower(), [n.lower() for n in names], n=1, cutoff=0.85)
        if m:
            name = next(n for n in names if n.lower() == m[0])
            return ref.rstrip("/")[: -len(base)] + name
        return None
    m = difflib.get_close_matches(ref.lower(), [i.lower() for i in ids], n=1, cutoff=0.8)
    if m:
        return next(i for i in ids if i.lower() == m[0])
    return None


def _sibling_checkpoints(ref: str | None) -> list[str]:
    """Other catalog checkpoints of the same base model (QAT first, then FP8), for a given reference."""
    if not ref:
        return []
    base_name = _QUANT_SUFFIX.sub("", ref.rstrip("/").split("/")[-1])
    try:
        from mcp_tools.capacity import resolve_model
        from mcp_tools.capacity.models import catalog_entry

        base = resolve_model(base_name)
        entry = catalog_entry(base.base or base.id) or base
    except Exception:  # noqa: BLE001
        return []
    variants = dict(entry.variants)
    out = [variants[k] for k in ("qat_w4a16", "fp8") if variants.get(k)]
    cur = ref.rstrip("/").split("/")[-1].lower()
    return [v for v in out if v.split("/")[-1].lower() != cur]


def _known_good_revision(obs: Observation) -> str | None:
    """The last Ready revision, when the failing one is the latest (from the Cloud Run API)."""
    if obs.failing_revision_is_latest and obs.latest_ready_revision:
        return obs.latest_ready_revision
    return None


def _fact(diag: Diagnosis, key: str) -> Any:
    for f in diag.findings:
        if f.category == diag.category and key in f.facts:
            return f.facts[key]
    return None


def _evidence_text(diag: Diagnosis) -> str:
    return "\n".join(e.text for e in diag.evidence)


def _round_len(n: int) -> int:
    step = 1024 if n >= 4096 else 256
    return max(step, n // step * step) if n >= step else max(1, n)


# --------------------------------------------------------------------------------------------------
# Per category
# --------------------------------------------------------------------------------------------------


def _weights_oom(diag: Diagnosis, obs: Observation, cap: _Capacity) -> list[RemediationPlan]:
    opts = _planner_options(cap)
    if opts:
        # Ranked last: a larger Cloud Run GPU, for when no checkpoint or flag change passes preflight.
        bigger = _larger_gpu(cap)
        if bigger:
            gpu = cap.spec.gpu_type if cap.spec else "this GPU"
            opts.append(_gpu_option(cap, bigger, f"the weights do not fit {gpu}: move to {bigger}"))
        return opts
    if cap.plan is not None:  # the planner ran and nothing on this GPU fits
        return [
            _escalate(
                f"{cap.plan.model} does not fit {cap.plan.gpu} in any checkpoint the planner knows: "
                "serve a smaller model or move to a larger GPU (e.g. nvidia-rtx-pro-6000 on Cloud Run).",
                cap.plan.verdict,
            )
        ]
    out: list[RemediationPlan] = []
    note = f" (the planner could not check this: {cap.error})" if cap.error else ""
    ref = get_model(obs.service.args) if obs.service else None
    for sib in _sibling_checkpoints(ref):
        out.append(
            _plan(
                PlanStep(
                    kind=K.SET_MODEL,
                    change={"model": sib},
                    why=f"a smaller checkpoint of the same model{note}",
                )
            )
        )
    quantized = bool(cap.flags and cap.flags.quantization) or bool(ref and _QUANT_SUFFIX.search(ref))
    if not quantized and _gpu_supports(cap, "fp8") is not False:
        out.append(
            _flags_option(
                cap, {"--quantization": "fp8"}, f"FP8 weights take about half the memory of bf16{note}"
            )
        )
    bigger = _larger_gpu(cap)
    if bigger:
        out.append(
            _gpu_option(
                cap,
                bigger,
                f"the weights do not fit {cap.spec.gpu_type if cap.spec else 'this GPU'}: use {bigger}{note}",
            )
        )
    out.append(
        _escalate(
            "Serve a smaller or quantized checkpoint of the model (QAT w4a16 or pre-quantized FP8) or use a "
            "larger GPU.",
            "the weights do not fit the GPU",
        )
    )
    return out


def _kv_cache_oom(diag: Diagnosis, obs: Observation, cap: _Capacity) -> list[RemediationPlan]:
    first: list[RemediationPlan] = []
    if cap.flags is not None and cap.flags.gpu_memory_utilization < 0.85:
        first.append(
            _flags_option(
                cap,
                {"--gpu-memory-utilization": 0.9},
                f"--gpu-memory-utilization {cap.flags.gpu_memory_utilization:g} leaves too little for the KV "
                "cache after the weights",
            )
        )
    opts = _planner_options(cap)
    if opts:
        return first + opts
    fit = _fact(diag, "max_model_len_that_fits")
    cur = _fact(diag, "max_model_len")
    if cur is None and cap.flags is not None:
        cur = cap.flags.max_model_len
    out = []
    if isinstance(fit, int) and fit > 0:
        n = _round_len(fit)
        out.append(
            _flags_option(cap, {"--max-model-len": n}, f"vLLM says about {fit} tokens fit in the KV cache")
        )
    elif isinstance(cur, int) and cur > 2048:
        n = _round_len(cur // 2)
        out.append(
            _flags_option(
                cap, {"--max-model-len": n}, f"halve the context ({cur} -> {n}) so one request fits"
            )
        )
    gpu_fp8 = _gpu_supports(cap, "fp8_kv_cache")
    if gpu_fp8 is not False:
        out.append(_flags_option(cap, {"--kv-cache-dtype": "fp8"}, "an FP8 KV cache holds twice the tokens"))
    if not first:
        out.append(
            _flags_option(
                cap, {"--gpu-memory-utilization": 0.95}, "give vLLM more of the GPU for the KV cache"
            )
        )
    return first + out


def _runtime_oom(diag: Diagnosis, obs: Observation, cap: _Capacity) -> list[RemediationPlan]:
    text = _evidence_text(diag)
    out = []
    if re.search(r"capture_model|cuda_graph|CUDAGraph|capture_graph", text):
        out.append(
            _flags_option(cap, {"--enforce-eager": True}, "the OOM hit CUDA-graph capture: run eagerly")
        )
    if re.search(r"sampler|max_num_seqs", text):
        seqs = cap.flags.max_num_seqs if cap.flags and cap.flags.max_num_seqs else 256
        out.append(
            _flags_option(
                cap, {"--max-num-seqs": max(8, seqs // 2)}, "the sampler warm-up OOMed: fewer sequences"
            )
        )
    mnbt = cap.plan.max_num_batched_tokens if cap.plan else None
    out.append(
        _flags_option(
            cap,
            {"--max-num-batched-tokens": max(512, (mnbt or 4096) // 2)},
            "a smaller prefill batch lowers the activation peak of the profiling run",
        )
    )
    if not re.search(r"capture_model|cuda_graph|CUDAGraph", text):
        out.append(_flags_option(cap, {"--enforce-eager": True}, "skip CUDA graphs to free their memory"))
    util = cap.flags.gpu_memory_utilization if cap.flags else 0.9
    if util > 0.8:
        out.append(
            _flags_option(
                cap,
                {"--gpu-memory-utilization": round(util - 0.05, 2)},
                "leave more headroom outside vLLM's budget for activations",
            )
        )
    return out


_DERIVED = re.compile(r"derived max_model_len \((?:[^)]*?=)?\s*(\d+)")
_MAXCTX = re.compile(r"maximum context length is (\d+)")
_USER = re.compile(r"User-specified max_model_len \((\d+)\)")


def _context_too_long(diag: Diagnosis, obs: Observation, cap: _Capacity) -> list[RemediationPlan]:
    text = _evidence_text(diag)
    m = _DERIVED.search(text)
    limit = int(m.group(1)) if m else (cap.model.max_position_embeddings if cap.model else None)
    if _USER.search(text) or m:  # start-up: the flag is above the model's limit
        if limit:
            return [
                _flags_option(
                    cap,
                    {"--max-model-len": int(limit)},
                    f"--max-model-len is above the model's {limit}-token limit",
                )
            ]
        return [_escalate("Set --max-model-len at or below the model's max_position_embeddings.", text[:200])]
    # Requests longer than the served context.
    mc = _MAXCTX.search(text)
    served = int(mc.group(1)) if mc else (cap.flags.max_model_len if cap.flags else None)
    out = []
    if cap.ok and cap.plan is not None and served and cap.plan.model_context_limit > served:
        target = min(cap.plan.model_context_limit, max(served * 2, served + 4096))
        target = min(target, cap.plan.max_model_len_that_fits or target)
        if target > served:
            opt = _flags_option(
                cap, {"--max-model-len": _round_len(target)}, "serve a longer context (the KV cache fits)"
            )
            if opt.steps[0].predicted and opt.steps[0].predicted.get("fits"):
                out.append(opt)
    out.append(
        _escalate(
            f"Clients send requests longer than the served context ({served or '?'} tokens): shorten "
            "prompts or max_tokens on the client side, or approve a longer --max-model-len if the "
            "planner says it fits.",
            "requests exceed the context length",
        )
    )
    return out


_MEM_STEPS_GIB = (16, 24, 32)


def _gib(mem: str | None) -> float | None:
    if not mem:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(Gi|G|Mi|M)?\s*", mem)
    if not m:
        return None
    v = float(m.group(1))
    unit = m.group(2) or "Gi"
    return v / 1024 if unit in ("Mi", "M") else v


def _min_cpu_for(mem_gib: float) -> int:
    """Cloud Run's CPU floor for a memory size (more than 4/8/16/24 GiB needs 2/4/6/8 vCPU)."""
    for limit, cpu in ((24, 8), (16, 6), (8, 4), (4, 2)):
        if mem_gib > limit:
            return cpu
    return 1


def _host_memory(diag: Diagnosis, obs: Observation, cap: _Capacity) -> list[RemediationPlan]:
    flags_opt: list[RemediationPlan] = []
    args = obs.service.args if obs.service else []
    change: dict[str, Any] = {}
    swap = get_flag(args, "--swap-space")
    if isinstance(swap, str) and swap.replace(".", "", 1).isdigit() and float(swap) > 4:
        change["--swap-space"] = None  # back to vLLM's default (4 GiB of host RAM per GPU)
    off = get_flag(args, "--cpu-offload-gb")
    if isinstance(off, str) and off.replace(".", "", 1).isdigit() and float(off) > 0:
        change["--cpu-offload-gb"] = None
    if change:
        flags_opt.append(
            _flags_option(
                cap,
                change,
                "--swap-space / --cpu-offload-gb reserve host RAM for vLLM: drop them back to defaults",
            )
        )
    return flags_opt + _more_memory(obs)


def _more_memory(obs: Observation) -> list[RemediationPlan]:
    cur = _gib(obs.service.memory if obs.service else None)
    target = next((g for g in _MEM_STEPS_GIB if cur is None or g > cur), None)
    if target is None:
        return [
            _escalate(
                f"The container already has {obs.service.memory if obs.service else '?'} of RAM, "
                "Cloud Run's maximum here: lower --max-num-seqs / --swap-space, load a smaller "
                "checkpoint, or move to GKE.",
                "host memory is exhausted at the largest size",
            )
        ]
    change: dict[str, Any] = {"memory": f"{target}Gi"}
    cpu = obs.service.cpu if obs.service else None
    try:
        cpu_n = float(cpu) if cpu is not None else None
    except (TypeError, ValueError):
        cpu_n = None
    need = _min_cpu_for(target)
    if cpu_n is None or cpu_n < need:
        change["cpu"] = need
    cur_mem = obs.service.memory if obs.service and obs.service.memory else "?"
    return [
        _plan(
            PlanStep(
                kind=K.SET_RESOURCES,
                change=change,
                why=f"the container ran out of RAM at {cur_mem}; give it {target} GiB",
            )
        )
    ]


#: Cloud Run startup-probe limits: initial delay and period at most 240 s each; the failure window
#: (failure_threshold x period_seconds) at most 1800 s with a GPU (600 s without).
PROBE_MAX_DELAY_S = 240
PROBE_MAX_PERIOD_S = 240
PROBE_MAX_WINDOW_GPU_S = 1800
PROBE_MAX_WINDOW_S = 600


def _startup_timeout(diag: Diagnosis, obs: Observation, cap: _Capacity) -> list[RemediationPlan]:
    from mcp_tools.incident import StartupProbe

    probe = (obs.service.startup_probe if obs.service else None) or StartupProbe()
    budget = probe.budget_seconds
    gpu = bool(obs.service and obs.service.gpu_type)
    max_window = PROBE_MAX_WINDOW_GPU_S if gpu else PROBE_MAX_WINDOW_S
    period = PROBE_MAX_PERIOD_S
    max_threshold = max(1, max_window // period)
    target = max(2 * budget, 900)
    initial = min(PROBE_MAX_DELAY_S, probe.initial_delay_seconds)
    threshold = max(1, math.ceil((target - initial) / period))
    if threshold > max_threshold:  # the window is at its limit: the initial delay adds the rest
        threshold = max_threshold
        initial = min(PROBE_MAX_DELAY_S, max(initial, target - period * threshold))
    new_budget = initial + period * threshold
    if new_budget <= budget:
        return [
            _escalate(
                f"vLLM needs more than the {budget} s Cloud Run's startup probe can allow: make loading "
                "faster (a smaller or quantized checkpoint, weights on a Cloud Storage volume with "
                "streaming, or baked into the image), or keep an instance warm with min_instances=1.",
                "the start-up is longer than the longest startup probe",
            )
        ]
    return [
        _plan(
            PlanStep(
                kind=K.SET_PROBE,
                change={
                    "initial_delay_seconds": initial,
                    "period_seconds": period,
                    "timeout_seconds": period,
                    "failure_threshold": threshold,
                },
                why=f"vLLM was still loading when the startup probe gave up after {budget} s; "
                f"allow {new_budget} s",
                predicted={"startup_budget_seconds": new_budget},
            )
        )
    ]


def _overload(diag: Diagnosis, obs: Observation, cap: _Capacity) -> list[RemediationPlan]:
    svc = obs.service
    out = []
    cur = svc.max_instances if svc else None
    target = (cur * 2 if cur else 2) if cur is None or cur < 50 else cur + 10
    out.append(
        _plan(
            PlanStep(
                kind=K.SET_SCALING,
                change={"max_instances": target},
                why=f"requests queue on {cur or 'the current'} instance(s); allow up to {target} "
                "(each needs a GPU: check the GPU quota)",
            )
        )
    )
    kv = _fact(diag, "kv_cache_usage")
    kv_full = (isinstance(kv, float) and kv >= 0.95) or "KV cache" in _evidence_text(diag)
    if kv_full and _gpu_supports(cap, "fp8_kv_cache") is not False:
        out.append(
            _flags_option(cap, {"--kv-cache-dtype": "fp8"}, "an FP8 KV cache doubles the tokens in flight")
        )
    return out


def _engine_hung(diag: Diagnosis, obs: Observation, cap: _Capacity) -> list[RemediationPlan]:
    return [
        _plan(
            PlanStep(
                kind=K.RESTART,
                change={},
                why="the engine is alive but makes no progress: a fresh revision starts a new engine",
            )
        )
    ]


def _engine_crash(diag: Diagnosis, obs: Observation, cap: _Capacity) -> list[RemediationPlan]:
    out = [
        _plan(
            PlanStep(
                kind=K.RESTART,
                change={},
                why="the engine died for a reason its configuration does not explain: start a fresh revision",
            )
        )
    ]
    text = _evidence_text(diag)
    if re.search(r"illegal memory access|CUDA error|cudaError", text):
        out.append(
            _flags_option(
                cap, {"--enforce-eager": True}, "CUDA faults often come from graph capture: run eagerly"
            )
        )
    return out


def _gpu_supports(cap: _Capacity, feature: str) -> bool | None:
    if cap.spec is None or not cap.spec.gpu_type:
        return None
    try:
        from mcp_tools.capacity import resolve_gpu
        from mcp_tools.capacity.gpus import supports_for_cc

        g = resolve_gpu(cap.spec.gpu_type)
        return feature in supports_for_cc(g.cc)
    except Exception:  # noqa: BLE001
        return None


_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.+)$")


def _unsupported(diag: Diagnosis, obs: Observation, cap: _Capacity) -> list[RemediationPlan]:
    text = _evidence_text(diag)
    out: list[RemediationPlan] = []
    m = _UNRECOGNIZED.search(text)
    if m:
        bad = [a.split("=")[0] for a in m.group(1).split() if a.startswith("--")]
        if bad:
            out.append(
                _flags_option(cap, dict.fromkeys(bad), f"this vLLM does not know {', '.join(bad)}: remove it")
            )
    if re.search(r"Bfloat16|bfloat16|bf16", text):
        out.append(_flags_option(cap, {"--dtype": "float16"}, "this GPU has no bfloat16: use float16"))
    ref = get_model(obs.service.args) if obs.service else None
    prequantized = bool(ref and _QUANT_SUFFIX.search(ref))
    need = re.search(r"Minimum capability: (\d+)|requires capability (\d+)", text)
    if re.search(r"fp8|FP8|fp4|FP4|quantization", text) and prequantized:
        for sib in _sibling_checkpoints(ref):
            out.append(
                _plan(
                    PlanStep(
                        kind=K.SET_MODEL,
                        change={"model": sib},
                        why=f"{ref} is quantized in a format this GPU cannot run; serve {sib} instead",
                    )
                )
            )
        if need:
            cc = int(need.group(1) or need.group(2)) / 10
            gpu = _larger_gpu(cap, min_cc=cc)
            if gpu:
                out.append(
                    _gpu_option(cap, gpu, f"the checkpoint needs compute capability {cc:g}: {gpu} has it")
                )
    elif re.search(r"fp8|FP8|quantization", text) and cap.flags and cap.flags.quantization:
        # Drop the online quantization and serve the checkpoint in 16 bits; a GPU without bf16
        # (cc < 8.0, e.g. a T4) needs --dtype half for that.
        change: dict[str, Any] = {"--quantization": None}
        why = f"--quantization {cap.flags.quantization} is not supported on this GPU: drop it"
        if (
            _gpu_cc(cap) is not None
            and (_gpu_cc(cap) or 0) < 8.0
            and cap.flags.dtype in (None, "auto", "bfloat16")
        ):
            change["--dtype"] = "half"
            why += " and serve 16-bit weights as float16 (--dtype half: this GPU has no bfloat16)"
        out.append(_flags_option(cap, change, why))
    gpu_options: list[RemediationPlan] = []
    if not prequantized:  # the same checkpoint and flags on a GPU that supports them
        min_cc = int(need.group(1) or need.group(2)) / 10 if need else None
        if min_cc is None and re.search(r"Bfloat16|bfloat16|bf16", text):
            min_cc = 8.0
        if min_cc is not None:
            gpu = _larger_gpu(cap, min_cc=min_cc)
            if gpu:
                gpu_options.append(
                    _gpu_option(cap, gpu, f"this needs compute capability {min_cc:g}: {gpu} has it")
                )
    if (
        re.search(r"kv.?cache.?dtype|fp8_e|nvfp4", text, re.IGNORECASE)
        and cap.flags
        and cap.flags.kv_cache_dtype != "auto"
    ):
        out.append(
            _flags_option(cap, {"--kv-cache-dtype": "auto"}, "this KV-cache dtype is not supported here")
        )
    out += _planner_options(cap, {"set_vllm_args", "set_model"})
    for sib in _sibling_checkpoints(ref) if not prequantized else []:
        if not any(s.kind is K.SET_MODEL and s.change.get("model") == sib for o in out for s in o.steps):
            out.append(_model_option(cap, sib, "a checkpoint of the same model this GPU can run"))
    # Ranked last: keeping the GPU (flags, then a checkpoint this GPU runs) is the smaller change;
    # preflight takes the first option the planner says fits and the GPU supports.
    out += gpu_options
    if not out:
        out.append(
            _escalate(
                "The model architecture or kernel is not supported by this vLLM image: use a vLLM image that "
                "supports it, or a supported checkpoint.",
                text[:200] or "unsupported configuration",
            )
        )
    return out


def _fixed_model_plan(cap: _Capacity, model: str | None, fix: str) -> RemediationPlan:
    """set_model to the checkpoint meant; when the planner says it would not fit as configured, the
    planner's best fitting flag change goes with it (or its best fitting checkpoint instead)."""
    step = PlanStep(
        kind=K.SET_MODEL,
        change={"model": fix},
        why=f"{model!r} was not found; {fix!r} is the known checkpoint it most likely means",
    )
    if cap.flags is None or cap.spec is None or not cap.spec.gpu_type:
        return _plan(step)
    try:
        from mcp_tools.capacity import plan_capacity

        p = plan_capacity(fix, gpu=cap.spec.gpu_type, gpu_count=cap.spec.gpu_count, flags=cap.flags)
    except Exception as e:  # noqa: BLE001
        log.debug("no plan for %s: %s", fix, e)
        return _plan(step)
    step.predicted = _predicted(p)
    if p.fits:
        return _plan(step)
    for s in p.suggestions:  # a flag change keeps the checkpoint the service already has
        if s.fits and s.kind == "set_vllm_args":
            return _plan(
                step,
                PlanStep(kind=K.SET_VLLM_ARGS, change=dict(s.change), why=s.summary, predicted=_predicted(s)),
            )
    for s in p.suggestions:
        if s.fits and s.kind == "set_model":
            return _plan(
                PlanStep(
                    kind=K.SET_MODEL,
                    change=dict(s.change),
                    why=f"{model!r} was not found and {fix!r} would not fit as configured: {s.summary}",
                    predicted=_predicted(s),
                )
            )
    return _plan(step)


def _escalations(diag: Diagnosis, obs: Observation, cap: _Capacity) -> list[RemediationPlan]:
    text = _evidence_text(diag)
    region = obs.service.region if obs.service and obs.service.region else "the service's region"
    gpu = obs.service.gpu_type if obs.service and obs.service.gpu_type else "the GPU"
    model = get_model(obs.service.args) if obs.service else None
    if diag.category == "gpu_quota":
        return [
            _escalate(
                f"Request more Cloud Run GPU quota for {gpu} in {region} (IAM & Admin > Quotas: the "
                "'Total Nvidia ... GPU allocation' quota, with or without zonal redundancy as the service "
                "uses), or deploy without GPU zonal redundancy, or pick a region with capacity.",
                "no GPU could be allocated: quota or capacity",
                region=region,
                gpu=gpu,
            )
        ]
    if diag.category == "auth_denied":
        if re.search(r"gated|restricted|huggingface|401 Client|403 Client|hf_|token", text, re.IGNORECASE):
            action = (
                f"Accept the model's license on huggingface.co with the account that owns the token"
                f"{f' for {model}' if model else ''}, then give the service a valid read token as HF_TOKEN "
                "(from Secret Manager), or copy the weights to a bucket the service can read."
            )
        elif re.search(r"storage|bucket|gs://|/mnt/", text, re.IGNORECASE):
            action = (
                "Grant the service's runtime service account roles/storage.objectViewer on the "
                "weights bucket (and check the volume mount)."
            )
        elif re.search(r"secret", text, re.IGNORECASE):
            action = "Grant the runtime service account roles/secretmanager.secretAccessor on the secret."
        else:
            action = "Grant the service's identity access to the resource named in the cited line."
        return [_escalate(action, "access was denied", evidence=text[:200])]
    if diag.category == "model_not_found":
        fix = _closest_model(model or "")
        fixes = [_fixed_model_plan(cap, model, fix)] if fix and fix != model else []
        return fixes + [
            _escalate(
                f"The model path or repo id{f' {model!r}' if model else ''} does not exist where the service "
                "looks: fix --model (typo, missing config.json, wrong bucket path) or upload the weights.",
                "the weights / config were not found",
                evidence=text[:200],
            )
        ]
    if diag.category == "image_pull":
        image = obs.service.image if obs.service else None
        return [
            _escalate(
                f"The image{f' {image}' if image else ''} cannot be pulled: push it or fix the tag, "
                "and grant the Cloud Run service agent roles/artifactregistry.reader on the repository.",
                "the container image is missing or not readable",
            )
        ]
    return [
        _escalate(
            "A person must read the cited lines: the evidence matches no known failure family.",
            diag.summary[:200],
        )
    ]


_BY_CATEGORY = {
    "weights_oom": _weights_oom,
    "kv_cache_oom": _kv_cache_oom,
    "runtime_oom": _runtime_oom,
    "context_too_long": _context_too_long,
    "host_memory_exceeded": _host_memory,
    "startup_timeout": _startup_timeout,
    "overload": _overload,
    "engine_crash": _engine_crash,
    "engine_hung": _engine_hung,
    "unsupported_config": _unsupported,
    "gpu_quota": _escalations,
    "auth_denied": _escalations,
    "model_not_found": _escalations,
    "image_pull": _escalations,
    "unknown": _escalations,
}


def propose_options(diagnosis: Diagnosis, obs: Observation) -> list[RemediationPlan]:
    """Candidate plans for the diagnosis, best first (empty for ``healthy``)."""
    if diagnosis.category == "healthy":
        return []
    cap = _Capacity(obs)
    fn = _BY_CATEGORY.get(diagnosis.category, _escalations)
    opts = fn(diagnosis, obs, cap)
    rb = _rollback(obs, diagnosis.category)
    if rb is not None:
        opts = [rb, *opts]
    if cap.error and diagnosis.category in ("weights_oom", "kv_cache_oom", "runtime_oom"):
        for o in opts:
            o.preflight.notes.append(f"planner: {cap.error}")
    return opts


def propose_plan(diagnosis: Diagnosis, obs: Observation) -> RemediationPlan:
    """The best-ranked plan (``propose_options``' first), or an empty plan for a healthy service."""
    opts = propose_options(diagnosis, obs)
    return opts[0] if opts else RemediationPlan()
