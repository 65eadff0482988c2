"""weights_oom: a checkpoint or flags the planner says fit, else a smaller checkpoint, FP8, a larger GPU."""

from __future__ import annotations

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import escalate, fact
from graph.remedies.catalog import QUANT_SUFFIX, gpu_supports, larger_gpu, sibling_checkpoints
from graph.remedies.planner import Capacity, flags_option, gpu_option, model_option, planner_options
from mcp_tools.remediation import RemediationPlan
from mcp_tools.spec_ops import get_model


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    opts = planner_options(cap)
    if opts:
        # Ranked last: a larger Cloud Run GPU, for when no checkpoint or flag change passes preflight.
        bigger = larger_gpu(cap.gpu)
        if bigger:
            opts.append(
                gpu_option(cap, bigger, f"the weights do not fit {cap.gpu or 'this GPU'}: move to {bigger}")
            )
        return opts
    if cap.plan is not None:  # the planner ran and nothing on this GPU fits
        return [
            escalate(
                f"{cap.plan.model} does not fit {cap.plan.gpu} in any checkpoint the planner knows: "
                "serve a smaller model or move to a larger GPU (e.g. nvidia-rtx-pro-6000 on Cloud Run).",
                cap.plan.verdict,
            )
        ]
    out: list[RemediationPlan] = []
    note = f" (the planner could not check this: {cap.error})" if cap.error else ""
    ref = get_model(obs.service.args) if obs.service else None
    for sib in sibling_checkpoints(ref):
        out.append(model_option(cap, sib, f"a smaller checkpoint of the same model{note}"))
    quantized = bool(cap.flags and cap.flags.quantization) or bool(ref and QUANT_SUFFIX.search(ref))
    fp8 = (
        [
            flags_option(
                cap, {"--quantization": "fp8"}, f"FP8 weights take about half the memory of bf16{note}"
            )
        ]
        if not quantized and gpu_supports(cap.gpu, "fp8") is not False
        else []
    )
    if cap.gpu:
        bigger = larger_gpu(cap.gpu)
    else:
        # No spec says which GPU: the log's out-of-memory message may say how much memory it had.
        had = fact(diag, "gpu_total_gib")
        bigger = larger_gpu(None, than_gib=float(had)) if isinstance(had, (int, float)) else None
    grow = (
        [gpu_option(cap, bigger, f"the weights do not fit {cap.gpu or 'this GPU'}: use {bigger}{note}")]
        if bigger
        else []
    )
    # FP8 keeps the GPU (the smaller change) where both the GPU and the checkpoint are known; where either
    # is not, whether FP8 runs (this GPU's kernels, a checkpoint already quantized) nobody can say, and a
    # GPU with more memory surely holds more.
    out += [*fp8, *grow] if (cap.gpu and ref) or not grow else [*grow, *fp8]
    out.append(
        escalate(
            "Serve a smaller or quantized checkpoint of the model (QAT w4a16 or pre-quantized FP8) or use a "
            "larger GPU.",
            "the weights do not fit the GPU",
        )
    )
    return out
