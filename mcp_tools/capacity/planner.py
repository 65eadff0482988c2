"""Will this model, at these vLLM flags, fit this GPU, and how much KV cache is left?

The budget follows vLLM v1's ``Worker.determine_available_memory``:

    kv_cache_memory = total x gpu_memory_utilization - weights - peak activation (profile run)
                      - non-torch memory - CUDA-graph memory (none with --enforce-eager)

and the KV cache is laid out as ``vllm/v1/core/kv_cache_utils.py`` lays it out: one group when
every layer has the same spec, otherwise page sizes unified by growing the block size of the
smaller pages, layers split into equal-size groups per attention type, ``num_blocks =
memory // page_size // group_size``, and the reported "GPU KV cache size" is
``num_blocks // num_groups * min_block_size`` tokens. A sliding-window layer needs at most
``sliding_window - 1 + max_num_batched_tokens`` tokens per request (plus one block).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp_tools.capacity.flags import VllmFlags, parse_vllm_args
from mcp_tools.capacity.gpus import GpuSpec, resolve_gpu, supports_for_cc
from mcp_tools.capacity.models import DTYPE_BYTES, ModelSpec, Quantization, catalog_entry, resolve_model
from mcp_tools.capacity.plan import CapacityPlan, Suggestion
from mcp_tools.errors import UserError

log = logging.getLogger(__name__)

GIB = 1024**3


@dataclass(frozen=True)
class VllmBehaviour:
    """What changes between vLLM releases in the memory accounting (each with its evidence)."""

    engine: str  # "v0" (LLMEngine, default before 0.8) | "v1"
    # v1 >= 0.21 logs "GPU KV cache size" as int(max_concurrency * max_model_len); before, as
    # num_blocks // num_groups * min_block_size (vllm-project/vllm#43308: ~10x more tokens reported
    # for Gemma 4 from 0.21.0 with the same memory).
    tokens_from_concurrency: bool
    # CUDA-graph memory estimated and taken from the KV budget at start-up
    # (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, vllm-project/vllm#30515): opt-in until 0.20, on by
    # default since 0.21.0 (the 0.27.1 log: "CUDA graph memory profiling is enabled (default since
    # v0.21.0)", gpustack/runner#251; a 0.19.0 log estimates it but does not subtract it: "In v0.19,
    # ... To try it now, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1", llm-d-planner logs).
    subtract_cuda_graphs: bool
    # Sliding-window layers keep sliding_window - 1 + N x max_num_batched_tokens tokens per
    # request, N in-flight batches: 1 before 0.26, 2 with async scheduling since 0.26
    # (vllm-project/vllm#47728, analysed in vllm-project/vllm#49878).
    sliding_inflight_batches: int = 1
    # Before 0.6.5, gpu_memory_utilization was a share of the whole device: the profiler measured
    # total - free, so memory held by other processes came out of the KV cache. From 0.6.5 it is
    # this instance's budget ("the current vLLM instance can use total_gpu_memory x
    # gpu_memory_utilization"), and another process's memory must fit beside it (V1 refuses to
    # start: "Free memory on device ... is less than desired GPU memory utilization").
    others_share_budget: bool = False
    # Bytes per (request x vocabulary entry) of the dummy sampler run: V1 before 0.17 profiled a
    # heavier sampler (Qwen3-14B on H100 at 1,024 seqs: "PyTorch activation peak" 5.64 GiB on
    # 0.15/0.16, 2.23 GiB from 0.17; llm-d-planner's version sweep).
    sampler_bytes_per_logit: int = 14
    # Non-torch memory of one GPU measured in the profile run: ~0.13 GiB on V1 0.15-0.17, 0.25 GiB
    # from 0.18 (Qwen3-14B version sweep; every vLLM 0.19 single-GPU log in llm-d-planner).
    non_torch_gib: float = 0.15
    # A tower whose modalities --limit-mm-per-prompt sets to 0 is not built
    # (SupportsMultiModal._mark_tower_model: "Tower model components are automatically skipped when
    # `--limit-mm-per-prompt` is set to zero for all of their modalities"). Assumed from 0.12 (the
    # vLLM recipes used it to skip vision encoders by 2025-12, vllm-project/recipes#133); earlier
    # releases are taken to build every tower (the pessimistic side).
    skips_unused_towers: bool = True


def vllm_behaviour(version: str | None) -> VllmBehaviour:
    """``None`` means the current release."""
    if not version:
        return VllmBehaviour("v1", True, True, 2, non_torch_gib=NON_TORCH_GIB_SINGLE_V018)
    parts: list[int] = []
    for piece in version.lstrip("v").split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    if len(parts) < 2:
        raise UserError(f"vLLM version {version!r}: expected something like 0.11.0")
    v = tuple(parts + [0] * (3 - len(parts)))
    engine = "v0" if v < (0, 8, 0) else "v1"
    return VllmBehaviour(
        engine=engine,
        tokens_from_concurrency=v >= (0, 21, 0),
        subtract_cuda_graphs=v >= (0, 21, 0),
        sliding_inflight_batches=2 if v >= (0, 26, 0) else 1,
        others_share_budget=v < (0, 6, 5),
        sampler_bytes_per_logit=SAMPLER_BYTES_PER_LOGIT_V1_PRE_017
        if engine == "v1" and v < (0, 17, 0)
        else SAMPLER_BYTES_PER_LOGIT,
        non_torch_gib=NON_TORCH_GIB_SINGLE_V018 if v >= (0, 18, 0) else NON_TORCH_GIB_SINGLE,
        skips_unused_towers=v >= (0, 12, 0),
    )


# --- calibration constants (one set for every model; see tests/data/vllm_startup_cases.yaml) ----
#: non-torch memory vLLM measures on one GPU (CUDA context growth, cuBLAS workspaces), GiB.
NON_TORCH_GIB_SINGLE = 0.15
NON_TORCH_GIB_SINGLE_V018 = 0.25
#: extra non-torch memory per worker with tensor parallelism and custom all-reduce, GiB:
#: V1 logs "non-torch forward increase memory" of 2.06-2.21 GiB at TP 2 and 4 against ~0.25 GiB at
#: TP 1 (vLLM 0.19 on H100, llm-d-planner logs).
NON_TORCH_GIB_TP = 1.95
#: forward-pass activation bytes per token = ACT_HIDDEN_FACTOR x hidden + ACT_INTER_FACTOR x MLP width
ACT_HIDDEN_FACTOR = 2
ACT_INTER_FACTOR = 3
#: bytes per (request x vocabulary entry) in the dummy sampler run (bf16 logits, fp32 copy, sort).
SAMPLER_BYTES_PER_LOGIT = 14
SAMPLER_BYTES_PER_LOGIT_V1_PRE_017 = 36
#: vLLM's own CUDA-graph estimate ("Estimated CUDA graph memory: X GiB total", 51 piecewise + 51
#: full graphs): ~0.35 GiB of first captures plus ~0.015 GiB per layer (0.6-1.1 GiB for 7-27B
#: models on vLLM 0.19).
CUDA_GRAPH_GIB_BASE = 0.35
CUDA_GRAPH_GIB_PER_LAYER = 0.015

#: Model types vLLM does not serve in float16 (``_FLOAT16_NOT_SUPPORTED_MODELS`` in its config: "The model
#: type 'gemma3' does not support float16. Reason: Numerical instability. Please use bfloat16 or float32
#: instead", v0.11 refuses it at start, vllm#28857); releases before the check ran the pair and answered
#: empty or wrong text (vllm#15097, #17622). The analyzers name the same types by checkpoint name
#: (``mcp_tools.vocabulary.FACT_FLOAT16_REFUSED_MODEL``) for logs without a spec.
FLOAT16_REFUSED_TYPES = frozenset({"gemma2", "gemma3", "gemma3_text", "plamo2", "glm4"})

KV_DTYPE_BYTES: dict[str, float] = {
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "fp8_ds_mla": 1,
    "nvfp4": 0.5 + 1 / 16,  # FP4 values plus one FP8 scale per 16
    "int8_per_token_head": 1,
    "fp8_per_token_head": 1,
    "bfloat16": 2,
    "float16": 2,
}


# --- the KV cache as vLLM lays it out -----------------------------------------------------------


@dataclass(frozen=True)
class _KVSpec:
    kind: str  # "full" | "sliding"
    num_kv_heads: int  # per GPU
    head_dim: int
    sliding_window: int | None
    block_size: int
    dtype_bytes: float

    @property
    def page_bytes(self) -> int:
        return int(self.block_size * self.num_kv_heads * self.head_dim * 2 * self.dtype_bytes)

    def with_block_size(self, block_size: int) -> _KVSpec:
        return _KVSpec(
            self.kind, self.num_kv_heads, self.head_dim, self.sliding_window, block_size, self.dtype_bytes
        )

    def max_memory_usage_bytes(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        if self.kind == "sliding" and self.sliding_window:
            tokens = min(self.sliding_window - 1 + max_num_batched_tokens, max_model_len)
            return (math.ceil(tokens / self.block_size) + 1) * self.page_bytes
        return math.ceil(max_model_len / self.block_size) * self.page_bytes


@dataclass
class _KVLayout:
    groups: list[tuple[_KVSpec, int]]  # (spec, number of layers in the group)
    uniform_type: bool  # one group of same-type layers with different shapes (per-layer pages)
    group_size: int
    page_bytes: int  # per layer per block (uniform), or the sum over layers (uniform_type)

    @property
    def is_uniform(self) -> bool:
        return len(self.groups) == 1 and not self.uniform_type

    def num_blocks(self, available_bytes: int) -> int:
        if available_bytes <= 0 or not self.groups:
            return 0
        if self.uniform_type:
            return int(available_bytes // self.page_bytes)
        return int(available_bytes // self.page_bytes // self.group_size)

    def reported_tokens(self, num_blocks: int) -> int:
        if not self.groups:
            return 0
        min_block = min(spec.block_size for spec, _ in self.groups)
        return num_blocks // len(self.groups) * min_block

    def marginal_bytes_per_token(self) -> int:
        """KV bytes one more token of context costs once sliding windows are full: the
        full-attention layers only (a sliding-window layer holds a fixed window)."""
        total = 0
        for spec, n in self.groups:
            if spec.kind == "full":
                total += int(spec.num_kv_heads * spec.head_dim * 2 * spec.dtype_bytes) * n
        return total

    def max_memory_usage_bytes(self, max_model_len: int, mnbt: int) -> int:
        """What one request of max_model_len tokens needs (vLLM's check_enough_kv_cache_memory)."""
        if not self.groups:
            return 0
        if self.uniform_type:
            spec0 = self.groups[0][0]
            return (
                sum(spec.max_memory_usage_bytes(max_model_len, mnbt) * n for spec, n in self.groups)
                or spec0.page_bytes
            )
        blocks = sum(
            math.ceil(spec.max_memory_usage_bytes(max_model_len, mnbt) / self.page_bytes)
            for spec, _ in self.groups
        )
        return self.group_size * self.page_bytes * blocks

    def max_concurrency(self, num_blocks: int, max_model_len: int, mnbt: int) -> float:
        """vLLM's get_max_concurrency_for_kv_cache_config."""
        if not self.groups:
            return 0.0
        if self.uniform_type:
            per_req = self.max_memory_usage_bytes(max_model_len, mnbt)
            blocks = math.ceil(per_req / self.page_bytes)
            return num_blocks / blocks if blocks else 0.0
        per_req = self.group_size * sum(
            spec.max_memory_usage_bytes(max_model_len, mnbt) for spec, _ in self.groups
        )
        blocks = math.ceil(per_req / (self.page_bytes * self.group_size))
        return num_blocks / blocks if blocks else 0.0


def kv_layout(
    spec: ModelSpec, *, tp: int, block_size: int, kv_bytes: float, hybrid: bool = True
) -> _KVLayout:
    """The KV cache groups vLLM builds for this model. ``hybrid=False`` is V0 (and
    --disable-hybrid-kv-cache-manager): sliding-window layers are allocated like full ones."""
    specs: list[_KVSpec] = []
    for layer in spec.kv_layers():
        if layer.shared:
            continue
        heads = max(1, layer.num_kv_heads // tp)
        dim = layer.head_dim
        if spec.kv_lora_rank:
            heads, dim = 1, (spec.kv_lora_rank + spec.qk_rope_head_dim) // 2  # MLA: one latent, no separate V
        kind = layer.kind if hybrid else "full"
        window = layer.sliding_window if hybrid else None
        specs.append(_KVSpec(kind, heads, dim, window, block_size, kv_bytes))
    if not specs:
        return _KVLayout([], False, 0, 0)
    distinct = list(dict.fromkeys(specs))
    if len(distinct) == 1:
        return _KVLayout([(distinct[0], len(specs))], False, len(specs), distinct[0].page_bytes)
    kinds = {(s.kind, s.sliding_window) for s in specs}
    if len(kinds) == 1:
        # UniformTypeKVCacheSpecs: one group, each layer its own page size.
        return _KVLayout(
            [(s, specs.count(s)) for s in distinct], True, len(specs), sum(s.page_bytes for s in specs)
        )
    # Hybrid: unify page sizes by growing the block size of the smaller pages.
    max_page = max(s.page_bytes for s in specs)
    unified: list[_KVSpec] = []
    for s in specs:
        if s.page_bytes != max_page:
            ratio = max_page // s.page_bytes
            s = s.with_block_size(s.block_size * ratio)
        unified.append(s)
    by_spec: dict[_KVSpec, int] = {}
    for s in unified:
        by_spec[s] = by_spec.get(s, 0) + 1
    counts = list(by_spec.values())
    group_size = min(counts)
    if max(counts) < min(counts) * 1.5:
        group_size = max(counts)
    groups: list[tuple[_KVSpec, int]] = []
    for s, n in by_spec.items():
        for _ in range(math.ceil(n / group_size)):
            groups.append((s, group_size))
    return _KVLayout(groups, False, group_size, max_page)


# --- the plan -----------------------------------------------------------------------------------


def _scheduler_defaults(gpu: GpuSpec, behaviour: VllmBehaviour, max_model_len: int) -> tuple[int, int]:
    """vLLM's OpenAI-server defaults: (max_num_seqs, max_num_batched_tokens).

    V1 (EngineArgs._set_default_args): 1024 / 8192 on GPUs of 70 GiB or more other than A100,
    else 256 / 2048. V0: chunked prefill only above 32K context (then 512 batched tokens),
    otherwise a whole max_model_len prompt is profiled at once."""
    if behaviour.engine == "v0":
        return 256, (512 if max_model_len > 32768 else max(max_model_len, 2048))
    big = gpu.memory_gib * GIB >= 70 * GIB and "a100" not in (gpu.name + gpu.label).lower()
    return (1024, 8192) if big else (256, 2048)


def _resolve_weight_format(
    spec: ModelSpec, flags: VllmFlags, gpu: GpuSpec | None, unsupported: list[str], warnings: list[str]
) -> Quantization | None:
    q = spec.quantization
    want = (flags.quantization or "").lower() or None
    if want is None:
        return q
    if q is not None:
        compatible = {
            "compressed-tensors": {"compressed-tensors"},
            "fp8": {"fp8"},
            "awq": {"awq", "awq_marlin"},
            "gptq": {"gptq", "gptq_marlin", "gptq_marlin_24"},
            "modelopt": {"modelopt", "modelopt_fp4", "nvfp4"},
            "mxfp4": {"mxfp4"},
            "bitsandbytes": {"bitsandbytes"},
        }
        if want not in compatible.get(q.method, {q.method}):
            unsupported.append(
                f"--quantization {want} does not match the checkpoint's quantization ({q.method}); "
                "vLLM refuses it"
            )
        return q
    if want in ("fp8", "ptpc_fp8", "fbgemm_fp8"):
        return Quantization(method="fp8-online", format="fp8", weight_bits=8, group_size=0, scale_bytes=4)
    if want == "bitsandbytes":
        return Quantization(method="bitsandbytes", format="bnb4", weight_bits=4, group_size=64, scale_bytes=1)
    if want in ("mxfp4",):
        return Quantization(
            method="mxfp4-online", format="mxfp4", weight_bits=4, group_size=32, scale_bytes=1
        )
    unsupported.append(
        f"--quantization {want} needs a checkpoint quantized that way; {spec.id} is a {spec.dtype} checkpoint"
    )
    return None


def _check_support(
    gpu: GpuSpec | None,
    dtype: str,
    q: Quantization | None,
    kv_dtype: str,
    unsupported: list[str],
    warnings: list[str],
) -> None:
    if gpu is None or not gpu.compute_capability:
        return
    cc = gpu.cc
    name = gpu.name
    if dtype == "bfloat16" and cc < 8.0:
        unsupported.append(
            "Bfloat16 is only supported on GPUs with compute capability of at least 8.0; "
            f"{name} is cc {gpu.compute_capability}"
        )
    if q is not None:
        if q.format == "fp8":
            if cc < 8.0:
                unsupported.append(
                    "FP8 weights need compute capability 8.0+ (8.9+ for FP8 compute); "
                    f"{name} is cc {gpu.compute_capability}"
                )
            elif cc < 8.9:
                warnings.append(
                    f"{name} (cc {gpu.compute_capability}) has no FP8 compute: "
                    "vLLM runs FP8 weights weight-only through Marlin"
                )
        if q.format in ("nvfp4",):
            if cc < 8.0:
                unsupported.append(
                    f"NVFP4 weights need a Blackwell GPU (cc 10.0+); {name} is cc {gpu.compute_capability}"
                )
            elif cc < 10.0:
                warnings.append(
                    f"NVFP4 weights are native on Blackwell (cc 10.0+); on {name} "
                    "vLLM falls back to FP4 Marlin weight-only"
                )
        if q.format == "mxfp4" and cc < 8.0:
            unsupported.append(
                f"MXFP4 weights need compute capability 8.0+; {name} is cc {gpu.compute_capability}"
            )
        if q.format.startswith("w") and q.format.endswith("a16") and cc < 7.5:
            unsupported.append(
                f"{q.format} weights need compute capability 7.5+; {name} is cc {gpu.compute_capability}"
            )
        elif q.method == "compressed-tensors" and q.format.endswith("a16") and cc < 8.0:
            # vLLM's CompressedTensorsWNA16 scheme declares min capability 80 (its Marlin kernels);
            # AWQ (cc 7.5) and GPTQ (cc 6.0) checkpoints have pre-Ampere kernels, compressed-tensors not.
            unsupported.append(
                f"compressed-tensors {q.format} weights run on vLLM's Marlin kernels, which need compute "
                f"capability 8.0+; {name} is cc {gpu.compute_capability} (an AWQ or GPTQ checkpoint can run)"
            )
    if kv_dtype.startswith("fp8"):
        if cc < 8.0:
            unsupported.append(
                f"FP8 KV cache needs compute capability 8.9+; {name} is cc {gpu.compute_capability}"
            )
        elif cc < 8.9:
            warnings.append(
                f"FP8 KV cache on {name} (cc {gpu.compute_capability}) "
                "is stored as FP8 but computed in 16-bit"
            )
    if kv_dtype == "nvfp4" and cc < 10.0:
        unsupported.append(
            f"NVFP4 KV cache needs a Blackwell GPU (cc 10.0+); {name} is cc {gpu.compute_capability}"
        )


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def _mxfp4_expert_params(spec: ModelSpec, gpu: GpuSpec | None, tp: int) -> int:
    """Expert parameters as vLLM's Mxfp4MoEMethod allocates them, padding included: Marlin
    (GPUs without FP4, cc < 9.0) rounds the per-GPU intermediate size up to 128 and the hidden size
    to 256; triton kernels (cc 9.x) round the intermediate size to 32; FlashInfer on Blackwell
    rounds both to 256."""
    h, inter = spec.hidden_size, spec.moe_intermediate_size // max(1, tp)
    cc = gpu.cc if gpu is not None and gpu.compute_capability else 9.0
    if cc >= 10.0:
        inter, h = _round_up(inter, 256), _round_up(h, 256)
    else:
        # Hopper as Marlin: 7.01 GiB per GPU for gpt-oss-20b at TP 2 on H100 (vLLM 0.19) is the
        # 1440 -> 1536 / 2880 -> 3072 padded size, not the unpadded 6.4 GiB.
        inter, h = _round_up(inter, 128), _round_up(h, 256)
    layers = spec.num_hidden_layers if spec.moe_layers is None else len(spec.moe_layers)
    return layers * spec.num_experts * 3 * h * inter * max(1, tp)


def _weights_bytes(
    spec: ModelSpec, q: Quantization | None, act_bytes: float, gpu: GpuSpec | None = None, tp: int = 1
) -> float:
    parts = spec.param_breakdown()
    if q is None:
        return sum(parts.values()) * act_bytes
    quant = q.bytes_per_param()
    attention_bpp = quant if q.scope == "all" else act_bytes
    mlp_bpp = quant if q.scope in ("all", "mlp") else act_bytes
    experts = parts["experts"]
    if q.format == "mxfp4" and experts:
        experts = _mxfp4_expert_params(spec, gpu, tp)
    return (
        parts["attention"] * attention_bpp
        + parts["mlp"] * mlp_bpp
        + experts * quant
        + (parts["embedding"] + parts["other"]) * act_bytes
    )


def _activation_bytes(
    spec: ModelSpec,
    *,
    tokens: int,
    num_reqs: int,
    tp: int,
    act_bytes: float,
    sampler_bytes_per_logit: int = SAMPLER_BYTES_PER_LOGIT,
) -> float:
    h = spec.hidden_size
    if spec.num_experts:
        topk = max(1, spec.num_experts_per_tok)
        inter = topk * (3 * spec.moe_intermediate_size / tp + h)
        if spec.moe_with_dense_mlp or spec.shared_expert_intermediate_size:
            inter += (spec.intermediate_size + spec.shared_expert_intermediate_size) / tp
    else:
        inter = spec.intermediate_size * (2 if spec.use_double_wide_mlp else 1) / tp
    qkv = (
        (spec.num_attention_heads + 2 * spec.num_key_value_heads)
        * max(spec.head_dim, spec.global_head_dim or 0)
        / tp
    )
    forward = tokens * act_bytes * (ACT_HIDDEN_FACTOR * h + ACT_INTER_FACTOR * inter + qkv)
    sampler = num_reqs * spec.vocab_size * sampler_bytes_per_logit + tokens * h * act_bytes
    return max(forward, sampler)


def _fmt_tokens(n: int) -> str:
    return f"{n:,}"


def plan_capacity(
    model: str | ModelSpec,
    *,
    gpu: str | None = None,
    gpu_memory_gib: float | None = None,
    gpu_count: int = 1,
    flags: VllmFlags | None = None,
    suggest: bool = True,
    vllm_version: str | None = None,
    gpu_memory_used_gib: float | None = None,
) -> CapacityPlan:
    """Compute the fit of ``model`` on ``gpu_count`` x ``gpu`` with these vLLM flags.

    ``vllm_version`` selects release-specific accounting (see :class:`VllmBehaviour`); ``None``
    means the current release. ``gpu_memory_used_gib``: memory other processes already hold on
    each GPU (a desktop, another server), which vLLM cannot use."""
    behaviour = vllm_behaviour(vllm_version)
    spec = resolve_model(model) if isinstance(model, str) else model
    flags = flags or VllmFlags()
    if gpu_count <= 0:
        raise UserError(f"gpu count: must be positive, got {gpu_count}")
    if gpu_memory_gib is not None and gpu_memory_gib <= 0:
        raise UserError(f"--gpu-memory-gib: must be positive, got {gpu_memory_gib}")
    used_gib = float(gpu_memory_used_gib or 0.0)
    if used_gib < 0:
        raise UserError(f"--gpu-memory-used-gib: must not be negative, got {gpu_memory_used_gib}")
    gspec: GpuSpec | None = resolve_gpu(gpu) if gpu else None
    if gspec is None and gpu_memory_gib is None:
        raise UserError("gpu: give a GPU name (--gpu) or its memory (--gpu-memory-gib)")
    if gspec is None:
        gspec = GpuSpec(
            name="custom",
            label=f"{gpu_memory_gib:g} GiB GPU",
            memory_gib=float(gpu_memory_gib or 0),
            compute_capability="",
            bandwidth_gbps=0.0,
        )
    elif gpu_memory_gib is not None:
        gspec = gspec.model_copy(update={"memory_gib": float(gpu_memory_gib)})
    if used_gib >= gspec.memory_gib:
        raise UserError(
            f"--gpu-memory-used-gib: {used_gib:g} GiB is not less than the GPU's {gspec.memory_gib:g} GiB"
        )
    if gspec.compute_capability:
        gspec.supports = supports_for_cc(gspec.cc)

    warnings: list[str] = []
    unsupported: list[str] = []

    tp = flags.tensor_parallel_size
    if tp == 1 and gpu_count > 1:
        tp = gpu_count
        warnings.append(f"{gpu_count} GPUs: assuming --tensor-parallel-size={gpu_count}")
    if tp > gpu_count:
        gpu_count = tp
    if spec.num_attention_heads % tp:
        unsupported.append(
            f"--tensor-parallel-size {tp} does not divide the {spec.num_attention_heads} attention heads"
        )

    # --language-model-only: vLLM skips the vision / audio towers (the Gemma 4 12B "unified" model
    # has no towers, only small embedders that are always built).
    text_only = any(a.split("=")[0] == "--language-model-only" for a in flags.extra)
    if spec.extra_params and text_only and "Unified" not in spec.architecture:
        spec = spec.model_copy(update={"extra_params": 0})
    elif spec.tower_params and behaviour.skips_unused_towers:
        skipped = sum(
            n for modality, n in spec.tower_params.items() if flags.limit_mm_per_prompt.get(modality) == 0
        )
        if skipped:
            spec = spec.model_copy(update={"extra_params": max(0, spec.extra_params - skipped)})

    # Precision.
    ckpt_dtype = spec.dtype if spec.dtype in DTYPE_BYTES else "bfloat16"
    if flags.dtype == "auto":
        dtype = "bfloat16" if ckpt_dtype in ("float32", "float") else ckpt_dtype
        if dtype == "bfloat16" and gspec.compute_capability and gspec.cc < 8.0:
            dtype = "float16"
            warnings.append(f"{gspec.name} has no bfloat16: vLLM casts the weights to float16")
        if dtype == "float16" and spec.model_type in FLOAT16_REFUSED_TYPES:
            # vLLM's _resolve_auto_dtype leaves float16 out of the platform's dtypes for these types
            # and takes the first that is left: bfloat16, or float32 on a GPU without it.
            dtype = "bfloat16" if not gspec.compute_capability or gspec.cc >= 8.0 else "float32"
            warnings.append(
                f"vLLM serves {spec.model_type!r} in {dtype} under --dtype auto (it refuses float16 for "
                "this type)"
            )
    else:
        dtype = {"half": "float16", "float": "float32"}.get(flags.dtype, flags.dtype)
        if dtype == "float16" and spec.model_type in FLOAT16_REFUSED_TYPES:
            unsupported.append(
                f"The model type {spec.model_type!r} does not support float16 (numerical instability: empty "
                "or wrong answers, and vLLM refuses it from v0.11); serve bfloat16 or float32"
            )
    act_bytes = DTYPE_BYTES[dtype]
    q = _resolve_weight_format(spec, flags, gspec, unsupported, warnings)
    kv_dtype = flags.kv_cache_dtype
    kv_bytes = act_bytes if kv_dtype == "auto" else KV_DTYPE_BYTES[kv_dtype]
    _check_support(gspec, dtype, q, kv_dtype, unsupported, warnings)

    # Lengths and scheduler limits.
    limit = spec.max_position_embeddings
    max_model_len = flags.max_model_len or limit
    if max_model_len > limit:
        raise UserError(
            f"--max-model-len {max_model_len} is above {spec.id}'s limit of {limit} tokens "
            "(max_position_embeddings)"
        )
    d_seqs, d_tokens = _scheduler_defaults(gspec, behaviour, max_model_len)
    max_num_seqs = flags.max_num_seqs or d_seqs
    mnbt = flags.max_num_batched_tokens or d_tokens
    if flags.max_num_batched_tokens is None and max_num_seqs > mnbt:
        max_num_seqs = mnbt

    # Memory budget (per GPU).
    total = gspec.memory_gib * GIB
    requested = total * flags.gpu_memory_utilization
    # The RoPE cos/sin caches are buffers built with the model, whole on every rank.
    weights = _weights_bytes(spec, q, act_bytes, gspec, tp) / tp + spec.rope_cache_elements * act_bytes
    activation = _activation_bytes(
        spec,
        tokens=mnbt,
        num_reqs=min(max_num_seqs, mnbt),
        tp=tp,
        act_bytes=act_bytes,
        sampler_bytes_per_logit=behaviour.sampler_bytes_per_logit,
    )
    # The TP share is custom all-reduce's buffers: none where vLLM disables it (PCIe-only GPUs past
    # TP 2: 0.21 GiB non-torch at TP 8 on 8 x L40S, vLLM 0.10.2).
    custom_all_reduce = tp == 2 or (tp > 2 and gspec.nvlink)
    non_torch = (behaviour.non_torch_gib + (NON_TORCH_GIB_TP if custom_all_reduce else 0.0)) * GIB
    graphs = 0.0
    if behaviour.subtract_cuda_graphs and not flags.enforce_eager:
        graphs = (CUDA_GRAPH_GIB_BASE + CUDA_GRAPH_GIB_PER_LAYER * spec.num_hidden_layers) * GIB
    available = requested - weights - activation - non_torch - graphs
    used = used_gib * GIB
    if behaviour.others_share_budget:
        available -= used  # the profiler's total - free counts the other processes' memory
    low_margin, high_margin = _budget_margins(
        behaviour, weights=weights, activation=activation, graphs=graphs, tp=tp, total=total
    )
    available_low, available_high = available - low_margin, available + high_margin

    layout = kv_layout(
        spec, tp=tp, block_size=flags.block_size, kv_bytes=kv_bytes, hybrid=behaviour.engine == "v1"
    )
    kv_mnbt = mnbt * behaviour.sliding_inflight_batches

    def reported(avail: float) -> tuple[int, float, int]:
        """(blocks, max concurrency, "GPU KV cache size" tokens) for this much KV memory."""
        blocks = layout.num_blocks(int(avail))
        conc = layout.max_concurrency(blocks, max_model_len, kv_mnbt)
        if behaviour.tokens_from_concurrency and layout.groups and not layout.is_uniform:
            return blocks, conc, int(conc * max_model_len)
        return blocks, conc, layout.reported_tokens(blocks)

    num_blocks, concurrency, tokens = reported(available)
    tokens_low = reported(available_low)[2]
    tokens_high = reported(available_high)[2]
    needed = layout.max_memory_usage_bytes(max_model_len, kv_mnbt)
    # The longest max_model_len that fits at the pessimistic end (what `fits` is judged on).
    fit_len = max_len_that_fits(layout, int(min(available, available_low)), limit, kv_mnbt)

    binding: str | None = None
    free = total - used
    if unsupported:
        binding = "unsupported"
    elif not behaviour.others_share_budget and used > 0 and requested > free:
        # V1 refuses: "Free memory on device (F/T GiB) on startup is less than desired GPU memory
        # utilization (U, R GiB)"; older releases ran out of memory allocating the cache.
        binding = "memory_in_use"
    elif weights >= requested or weights >= total:
        binding = "weights"
    elif available <= 0 or needed > available:
        # The weights load, but too little is left for the cache (vLLM: "No available memory for
        # the cache blocks" or "... KV cache is needed, which is larger than the available ...").
        binding = "kv_cache"
    fits_expected = binding is None
    uncertain = fits_expected and (available_low <= 0 or needed > available_low)
    if uncertain:
        binding = "kv_cache"  # fits only at the optimistic end of the accounting
    fits = binding is None

    gib = lambda b: round(b / GIB, 2)  # noqa: E731
    label = gspec.name if gpu_count == 1 else f"{gpu_count} x {gspec.name}"
    if binding == "unsupported":
        verdict = "does not run: " + "; ".join(unsupported)
    elif binding == "memory_in_use":
        verdict = (
            f"does not start: other processes hold {used_gib:.2f} GiB, leaving {gib(free):.2f} of "
            f"{gspec.memory_gib:.2f} GiB free, less than --gpu-memory-utilization "
            f"{flags.gpu_memory_utilization:g} asks for ({gib(requested):.2f} GiB)"
        )
    elif uncertain:
        verdict = (
            f"does not fit safely: one {_fmt_tokens(max_model_len)}-token request needs "
            f"{gib(needed):.2f} GiB of KV cache; {gib(available):.2f} GiB is expected but vLLM's "
            f"accounting may leave as little as {gib(max(0.0, available_low)):.2f} GiB"
        )
    elif binding == "weights":
        verdict = (
            f"does not fit: the weights need {gib(weights):.2f} GiB per GPU but {label} offers "
            f"{gib(requested):.2f} GiB at gpu_memory_utilization {flags.gpu_memory_utilization:g} "
            f"({gspec.memory_gib:.2f} GiB total)"
        )
    elif binding == "kv_cache":
        if available <= 0:
            verdict = (
                f"does not fit: after {gib(weights):.2f} GiB of weights and "
                f"{gib(activation + non_torch + graphs):.2f} GiB "
                f"of activations and overhead no memory is left for the KV cache"
            )
        else:
            verdict = (
                f"does not fit: one {_fmt_tokens(max_model_len)}-token request needs "
                f"{gib(needed):.2f} GiB of KV cache "
                f"but only {gib(available):.2f} GiB is left (max_model_len that fits: {_fmt_tokens(fit_len)})"
            )
    else:
        verdict = (
            f"fits: {gib(weights):.2f} GiB weights, {gib(available):.2f} GiB KV cache = "
            f"{_fmt_tokens(tokens)} tokens, "
            f"{concurrency:.2f}x concurrency at {_fmt_tokens(max_model_len)} tokens"
        )
    if any(k == "sliding" for k in spec.layer_kinds()):
        warnings.append(
            "sliding-window layers hold at most sliding_window + max_num_batched_tokens tokens per request; "
            "kv_cache_tokens is max concurrency x max_model_len, as vLLM 0.21+ reports it"
        )
    if spec.derived:
        warnings.append(
            f"{spec.id}: some figures are derived, not read from a published config: "
            + "; ".join(spec.derived)
        )

    plan = CapacityPlan(
        model=spec.id,
        gpu=gspec.name,
        gpu_memory_gib=round(gspec.memory_gib, 2),
        weights_gib=gib(weights),
        activation_gib=gib(activation),
        overhead_gib=gib(non_torch + graphs),
        kv_cache_gib=gib(max(0.0, available)),
        kv_bytes_per_token=layout.marginal_bytes_per_token(),
        kv_cache_tokens=tokens,
        max_concurrency=round(concurrency, 2),
        fits=fits,
        verdict=verdict,
        warnings=warnings,
        binding_constraint=binding,
        unsupported=unsupported,
        gpu_count=gpu_count,
        gpu_compute_capability=gspec.compute_capability or None,
        gpu_bandwidth_gbps=gspec.bandwidth_gbps or None,
        num_params=spec.num_params,
        weight_format=q.format if q else dtype,
        dtype=dtype,
        kv_cache_dtype=kv_dtype,
        max_model_len=max_model_len,
        model_context_limit=limit,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=mnbt,
        tensor_parallel_size=tp,
        gpu_memory_utilization=flags.gpu_memory_utilization,
        enforce_eager=flags.enforce_eager,
        non_torch_gib=gib(non_torch),
        cuda_graph_gib=gib(graphs),
        gpu_blocks=num_blocks,
        kv_needed_gib_one_request=gib(needed),
        max_model_len_that_fits=fit_len,
        kv_cache_tokens_range=[min(tokens_low, tokens), max(tokens_high, tokens)],
        kv_cache_gib_range=[gib(max(0.0, available_low)), gib(max(0.0, available_high))],
        fits_expected=fits_expected,
        gpu_memory_used_gib=round(used_gib, 2),
        vllm_version=vllm_version,
    )
    if suggest and not fits:
        plan.suggestions = _suggest(
            spec, plan, gspec, gpu, gpu_memory_gib, gpu_count, flags, vllm_version, gpu_memory_used_gib
        )
        if plan.suggestions and plan.suggestions[0].fits:
            plan.verdict += f"; best fix: {plan.suggestions[0].summary}"
    return plan


#: Known spread of vLLM's own accounting around the planner's estimate (GiB or shares; dev split).
ACTIVATION_SPREAD = 0.25  # profile-run peak: V1 estimates land within ~25% of the logged peak
ACTIVATION_SPREAD_V0 = 0.5  # V0 profiled whole max_model_len prompts, less regular
NON_TORCH_SPREAD_GIB = 0.1
NON_TORCH_SPREAD_GIB_TP = 0.3
WEIGHTS_SPREAD = 0.01
#: V0 with tensor parallelism measured the device's total - free during the profile run
#: (vllm-project/vllm#2031): on 4 x A100 it saw ~12.7 GiB (16% of the GPU) more in use per worker
#: than the model needs; the pessimistic end allows for that share.
V0_TP_EXTRA_SHARE = 0.16


def _budget_margins(
    behaviour: VllmBehaviour, *, weights: float, activation: float, graphs: float, tp: int, total: float
) -> tuple[float, float]:
    """(pessimistic, optimistic) bytes around the planner's KV budget, from what is known about
    vLLM's accounting: the activation peak, non-torch memory, weights padding, and the CUDA-graph
    estimate (vLLM's own can overshoot several-fold, vllm-project/vllm#45178; when subtracted, the
    pessimistic end doubles it)."""
    act = activation * (ACTIVATION_SPREAD_V0 if behaviour.engine == "v0" else ACTIVATION_SPREAD)
    nt = (NON_TORCH_SPREAD_GIB_TP if tp > 1 else NON_TORCH_SPREAD_GIB) * GIB
    w = weights * WEIGHTS_SPREAD
    low = act + nt + w + graphs
    high = act + nt + w + graphs / 2
    if behaviour.engine == "v0" and tp > 1:
        low += V0_TP_EXTRA_SHARE * total
    return low, high


#: A plan request's parameters that are not vLLM flags (beside ``model`` and ``vllm_args``).
_REQUEST_KEYS = ("gpu", "gpu_memory_gib", "gpu_count", "vllm_version", "gpu_memory_used_gib")


def _given(value: Any) -> bool:
    """A flag's value that is sent: anything but None and False (0 and 0.0 are values, refused or not
    by the flags' own checks; ``0 in (None, False)`` would drop them)."""
    return value is not None and value is not False


def plan_request(params: Mapping[str, Any]) -> CapacityPlan:
    """A plan asked for as ``gemma-sre plan`` and the MCP tool ``plan_capacity`` ask, from their
    parameters by name: ``model``, the GPU and release (``_REQUEST_KEYS``), ``vllm_args`` (a list),
    and vLLM flags by their snake_case names (``max_model_len=16384``, ``enforce_eager=True``), which
    override ``vllm_args`` as if they came last. Other names (a CLI's ``--json``) are not read."""
    args = [str(a) for a in params.get("vllm_args") or []]
    for name, value in params.items():
        if name in VllmFlags.model_fields and name not in ("model", "extra") and _given(value):
            flag = "--" + name.replace("_", "-")
            args.append(flag if value is True else f"{flag}={value}")
    request = {k: params[k] for k in _REQUEST_KEYS if k in params}
    return plan_capacity(str(params["model"]), flags=parse_vllm_args(args), **request)


def max_len_that_fits(layout: _KVLayout, available: int, limit: int, mnbt: int) -> int:
    """vLLM's _estimate_max_model_len_from_groups: binary search on max_model_len."""
    if available <= 0 or not layout.groups:
        return 0
    if layout.max_memory_usage_bytes(1, mnbt) > available:
        return 0
    lo, hi, best = 1, limit, 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if layout.max_memory_usage_bytes(mid, mnbt) <= available:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def _round_len(n: int) -> int:
    """A max_model_len a person would write: a multiple of 1024 (or 256 below 4096)."""
    step = 1024 if n >= 4096 else 256
    return max(step, n // step * step) if n >= step else n


def _suggest(
    spec: ModelSpec,
    plan: CapacityPlan,
    gspec: GpuSpec,
    gpu: str | None,
    gpu_memory_gib: float | None,
    gpu_count: int,
    flags: VllmFlags,
    vllm_version: str | None = None,
    gpu_memory_used_gib: float | None = None,
) -> list[Suggestion]:
    out: list[Suggestion] = []

    def run(model: ModelSpec, f: VllmFlags, count: int = gpu_count) -> CapacityPlan:
        return plan_capacity(
            model,
            gpu=gpu,
            gpu_memory_gib=gpu_memory_gib,
            gpu_count=count,
            flags=f,
            suggest=False,
            vllm_version=vllm_version,
            gpu_memory_used_gib=gpu_memory_used_gib,
        )

    def add(
        kind: str,
        change: dict[str, object],
        summary: str,
        p: CapacityPlan,
        also: dict[str, object] | None = None,
    ) -> None:
        desc = (
            f"{summary}: {p.weights_gib:.2f} GiB weights, {_fmt_tokens(p.kv_cache_tokens)} KV tokens"
            if p.fits
            else f"{summary}: still does not fit ({p.binding_constraint})"
        )
        out.append(
            Suggestion(
                kind=kind,
                change=change,
                summary=desc,
                fits=p.fits,
                kv_cache_tokens=p.kv_cache_tokens,
                weights_gib=p.weights_gib,
                also=also or {},
            )
        )

    if plan.binding_constraint == "memory_in_use":
        # The largest utilization the free memory allows, rounded down to a hundredth.
        util = math.floor((1 - plan.gpu_memory_used_gib / gspec.memory_gib) * 100) / 100 - 0.01
        if util > 0:
            p = run(spec, flags.model_copy(update={"gpu_memory_utilization": round(util, 2)}))
            add(
                "set_vllm_args",
                {"--gpu-memory-utilization": round(util, 2)},
                f"--gpu-memory-utilization {util:.2f} (what the free memory allows)",
                p,
            )
    # Fix what is unsupported first.
    if plan.binding_constraint == "unsupported":
        if flags.kv_cache_dtype == "nvfp4" or (
            flags.kv_cache_dtype.startswith("fp8") and "fp8_kv_cache" not in gspec.supports
        ):
            alt = "fp8" if "fp8_kv_cache" in gspec.supports else "auto"
            p = run(spec, flags.model_copy(update={"kv_cache_dtype": alt}))
            add("set_vllm_args", {"--kv-cache-dtype": alt}, f"--kv-cache-dtype {alt}", p)
        no_bf16 = bool(gspec.compute_capability) and gspec.cc < 8.0
        refuses_fp16 = spec.model_type in FLOAT16_REFUSED_TYPES
        if (plan.dtype == "bfloat16" and no_bf16) or (plan.dtype == "float16" and refuses_fp16):
            alt = "float32" if no_bf16 and refuses_fp16 else "float16" if no_bf16 else "bfloat16"
            p = run(spec, flags.model_copy(update={"dtype": alt}))
            add("set_vllm_args", {"--dtype": alt}, f"--dtype {alt}", p)
        if flags.quantization and any("--quantization" in u for u in plan.unsupported):
            p = run(spec, flags.model_copy(update={"quantization": None}))
            add("set_vllm_args", {"--quantization": None}, "drop --quantization", p)

    # Other checkpoints of the same model.
    base_id = spec.base or spec.id
    base = catalog_entry(base_id)
    variants = dict(base.variants) if base else {}
    if spec.base and spec.base != spec.id:
        variants.setdefault("base", spec.base)
    order = ["qat_w4a16", "fp8", "nvfp4"]
    for key in order:
        vid = variants.get(key)
        if not vid or vid == spec.id:
            continue
        vspec = catalog_entry(vid)
        if vspec is None:
            continue
        f = flags.model_copy(update={"quantization": None, "model": None})
        p = run(vspec, f)
        also: dict[str, object] = {}
        if not p.fits and p.binding_constraint == "kv_cache" and p.max_model_len_that_fits > 0:
            n = _round_len(p.max_model_len_that_fits)
            p2 = run(vspec, f.model_copy(update={"max_model_len": n}))
            if p2.fits:
                also = {"--max-model-len": n}
                p = p2
        label = f"serve {vid}" + (f" with --max-model-len {also['--max-model-len']}" if also else "")
        add("set_model", {"model": vid}, label, p, also)

    # Online FP8 weights on an unquantized checkpoint.
    if (
        plan.binding_constraint in ("kv_cache", "weights")
        and spec.quantization is None
        and not flags.quantization
        and "fp8" in gspec.supports
    ):
        p = run(spec, flags.model_copy(update={"quantization": "fp8"}))
        add("set_vllm_args", {"--quantization": "fp8"}, "--quantization fp8 (online FP8 weights)", p)
    if plan.binding_constraint == "kv_cache":
        if flags.kv_cache_dtype == "auto" and "fp8_kv_cache" in gspec.supports:
            p = run(spec, flags.model_copy(update={"kv_cache_dtype": "fp8"}))
            add("set_vllm_args", {"--kv-cache-dtype": "fp8"}, "--kv-cache-dtype fp8", p)
        if plan.max_model_len_that_fits > 0:
            n = _round_len(plan.max_model_len_that_fits)
            p = run(spec, flags.model_copy(update={"max_model_len": n}))
            add("set_vllm_args", {"--max-model-len": n}, f"--max-model-len {n}", p)
        if flags.gpu_memory_utilization < 0.95:
            p = run(spec, flags.model_copy(update={"gpu_memory_utilization": 0.95}))
            add("set_vllm_args", {"--gpu-memory-utilization": 0.95}, "--gpu-memory-utilization 0.95", p)
    if plan.binding_constraint in ("kv_cache", "weights"):
        for n in (2, 4, 8):
            if n <= gpu_count or spec.num_attention_heads % n:
                continue
            p = run(spec, flags.model_copy(update={"tensor_parallel_size": n}), n)
            add("set_resources", {"gpu_count": n}, f"{n} x {gspec.name} with --tensor-parallel-size {n}", p)
            if p.fits:
                break
    # Fitting first; among those, the cheapest kind for the binding constraint, then most KV.
    pref = {"set_vllm_args": 0, "set_model": 1, "set_resources": 2}
    if plan.binding_constraint == "weights":
        pref = {"set_model": 0, "set_vllm_args": 1, "set_resources": 2}
    out.sort(key=lambda s: (not s.fits, pref.get(s.kind, 3), -s.kv_cache_tokens))
    return out
