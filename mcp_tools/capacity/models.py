"""Model architecture from a Hugging Face ``config.json`` or the built-in catalog.

Everything the planner needs is derived from the architecture: the parameter count (and so the
weight bytes for a precision) and the per-layer KV-cache shape, following how vLLM builds the
model (e.g. Gemma 4 ``attention_k_eq_v`` layers get a V slot in ``qkv_proj`` and in the cache).
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from mcp_tools.errors import UserError

log = logging.getLogger(__name__)

# Bytes per element of the dtypes a checkpoint or a flag can name.
DTYPE_BYTES: dict[str, float] = {
    "float32": 4,
    "float": 4,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
}


class Quantization(BaseModel):
    """A weight format, normalised from ``quantization_config`` or ``--quantization``."""

    method: str  # compressed-tensors, fp8, awq, gptq, modelopt, bitsandbytes, mxfp4, ...
    format: str  # fp8 | w4a16 | nvfp4 | mxfp4 | int8 | w8a8 | bnb4
    weight_bits: int
    group_size: int = 0  # 0 = per channel / per tensor
    scale_bytes: float = 2
    zero_point: bool = False
    # Which decoder linears the checkpoint quantizes: "all" (attention, MLP, experts), "mlp"
    # (MLP and experts; attention kept 16-bit, e.g. nvidia/Gemma-4-31B-IT-NVFP4 ignores self_attn),
    # or "experts" (gpt-oss MXFP4).
    scope: str = "all"

    def bytes_per_param(self) -> float:
        """Bytes per quantized linear weight, scales (and zero points) included."""
        b = self.weight_bits / 8
        if self.group_size > 0:
            b += self.scale_bytes / self.group_size
            if self.zero_point:
                b += (self.weight_bits / 8) / self.group_size
        return b


class LayerKV(BaseModel):
    """The KV cache one attention layer allocates (per GPU before tensor parallelism)."""

    index: int
    kind: str  # "full" | "sliding"
    num_kv_heads: int
    head_dim: int
    sliding_window: int | None = None
    shared: bool = False  # KV-shared layer: reuses an earlier layer's cache, allocates none


class ModelSpec(BaseModel):
    """One model: its architecture (text decoder) and the checkpoint's precision."""

    id: str
    name: str
    source: str
    architecture: str = ""
    model_type: str = ""
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    # Hybrid attention (Gemma 2/3/4, Mistral, gpt-oss ...).
    layer_types: list[str] = Field(default_factory=list)  # "full_attention" | "sliding_attention"
    sliding_window: int | None = None
    global_head_dim: int | None = None
    num_global_key_value_heads: int | None = None
    attention_k_eq_v: bool = False
    num_kv_shared_layers: int = 0
    use_double_wide_mlp: bool = False
    # Per-layer embeddings (Gemma 3n / Gemma 4 E-models).
    hidden_size_per_layer_input: int = 0
    vocab_size_per_layer_input: int = 0
    # Mixture of experts.
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    moe_with_dense_mlp: bool = False  # Gemma 4: a dense MLP runs beside the experts in every layer
    moe_layers: list[int] | None = None  # None = every layer when num_experts > 0
    # MLA (DeepSeek): latent KV cache.
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    # Parameters outside the text decoder that vLLM also loads (vision / audio towers).
    extra_params: int = 0
    extra_params_source: str = ""
    # The part of extra_params in towers counted from the config's sub-configs, by the modality
    # that loads them ("image", "audio"): vLLM skips a tower whose modality is limited to 0.
    tower_params: dict[str, int] = Field(default_factory=dict)
    # Rotary embedding (its cos/sin cache is a buffer vLLM allocates with the weights): the
    # config's rope_scaling / rope_parameters of the full-attention layers, and the rotated share.
    rope_scaling: dict[str, Any] | None = None
    partial_rotary_factor: float = 1.0
    # Checkpoint precision.
    dtype: str = "bfloat16"
    quantization: Quantization | None = None
    # Catalog bookkeeping.
    derived: list[str] = Field(default_factory=list)
    variants: dict[str, str] = Field(default_factory=dict)
    base: str | None = None

    # --- derived architecture ------------------------------------------------------------------

    def layer_kinds(self) -> list[str]:
        if self.layer_types:
            return ["sliding" if t.startswith("sliding") else "full" for t in self.layer_types]
        if self.sliding_window:
            return ["sliding"] * self.num_hidden_layers
        return ["full"] * self.num_hidden_layers

    def _layer_attention(self, kind: str) -> tuple[int, int]:
        """(num_kv_heads, head_dim) of a layer of this kind, as vLLM builds it."""
        if kind == "full" and self.global_head_dim:
            heads = self.num_key_value_heads
            if self.attention_k_eq_v and self.num_global_key_value_heads:
                heads = self.num_global_key_value_heads
            return heads, self.global_head_dim
        return self.num_key_value_heads, self.head_dim

    def kv_layers(self) -> list[LayerKV]:
        kinds = self.layer_kinds()
        first_shared = self.num_hidden_layers - self.num_kv_shared_layers
        out = []
        for i, kind in enumerate(kinds):
            heads, dim = self._layer_attention(kind)
            out.append(
                LayerKV(
                    index=i,
                    kind=kind,
                    num_kv_heads=heads,
                    head_dim=dim,
                    sliding_window=self.sliding_window if kind == "sliding" else None,
                    shared=self.num_kv_shared_layers > 0 and i >= first_shared,
                )
            )
        return out

    # --- parameter count -----------------------------------------------------------------------

    def param_breakdown(self) -> dict[str, int]:
        """Parameters by how they are stored.

        ``attention`` and ``mlp``: quantizable decoder linears (per-layer-embedding gates count as
        MLP); ``experts``: MoE experts; ``embedding``: token and per-layer embeddings and an untied
        lm_head; ``other``: norms, routers, scalars and towers outside the decoder. Counted as vLLM
        allocates them: a Gemma 4 k_eq_v layer has a V slot in ``qkv_proj``."""
        h = self.hidden_size
        attention = 0
        mlp = 0
        experts = 0
        other = 0
        kinds = self.layer_kinds()
        first_shared = self.num_hidden_layers - self.num_kv_shared_layers
        moe_layers = set(range(self.num_hidden_layers)) if self.moe_layers is None else set(self.moe_layers)
        mt = self.model_type
        layer_norms = 4 if mt.startswith("gemma") else 2  # Gemma: pre/post attention and MLP norms
        qk_norm = mt.startswith(("gemma3", "gemma4", "qwen3", "olmo2"))
        for i, kind in enumerate(kinds):
            kv_heads, hd = self._layer_attention(kind)
            q = self.num_attention_heads * hd
            kv = kv_heads * hd
            if self.kv_lora_rank:
                # MLA: q projection + compressed KV projection + up-projections (approximate).
                attention += h * q + h * (self.kv_lora_rank + self.qk_rope_head_dim)
                attention += self.kv_lora_rank * self.num_attention_heads * (hd * 2) + q * h
            else:
                attention += h * (q + 2 * kv) + q * h
                if self.attention_bias:
                    other += q + 2 * kv
            if qk_norm:
                other += 2 * hd
            other += layer_norms * h
            is_moe = self.num_experts > 0 and i in moe_layers
            inter = self.intermediate_size
            if self.use_double_wide_mlp and self.num_kv_shared_layers and i >= first_shared:
                inter *= 2
            if not is_moe or self.moe_with_dense_mlp:
                mlp += 3 * h * inter
            if is_moe:
                experts += self.num_experts * 3 * h * self.moe_intermediate_size
                if self.shared_expert_intermediate_size:
                    mlp += 3 * h * self.shared_expert_intermediate_size
                    other += h  # shared expert gate
                other += h * self.num_experts + h + self.num_experts  # router
            if self.hidden_size_per_layer_input:
                mlp += 2 * h * self.hidden_size_per_layer_input
                other += h
        embedding = self.vocab_size * h
        if not self.tie_word_embeddings:
            embedding += self.vocab_size * h
        if self.hidden_size_per_layer_input:
            ple = self.num_hidden_layers * self.hidden_size_per_layer_input
            embedding += (self.vocab_size_per_layer_input or self.vocab_size) * ple
            other += h * ple + self.hidden_size_per_layer_input
        other += h  # final norm
        other += self.extra_params
        return {
            "attention": attention,
            "mlp": mlp,
            "experts": experts,
            "embedding": embedding,
            "other": other,
        }

    def rope_caches(self) -> list[tuple[int, int]]:
        """(positions, width) of every cos/sin cache vLLM registers as a buffer at model build:
        one per distinct rotary embedding (``get_rope`` caches instances by their parameters),
        ``positions x width`` elements in the model dtype (``RotaryEmbedding.__init__``:
        ``cache.to(dtype)``), replicated on every tensor-parallel rank. The number of positions
        follows the scaling type (``rotary_embedding/*.py``): linear and dynamic NTK cache
        ``max_position x factor``, YaRN ``original_max_position x factor``, LongRoPE the short and
        the long table, the rest ``max_position``. Gemma 3/4 sliding layers use their own default
        RoPE (``rope_local_base_freq``); Gemma 4 full layers a "proportional" RoPE whose unrotated
        dims get a zero frequency, so its cache spans the whole head."""
        mt = self.model_type
        own_local = mt.startswith(("gemma3", "gemma4"))
        caches: dict[tuple[str, int, int], tuple[int, int]] = {}
        for kind in sorted(set(self.layer_kinds())):
            _, head_dim = self._layer_attention(kind)
            if self.kv_lora_rank:
                head_dim = self.qk_rope_head_dim
            scaling = dict(self.rope_scaling or {})
            if own_local and kind == "sliding":
                scaling = {}
            elif "gemma4" in mt and not scaling.get("rope_type"):
                scaling["rope_type"] = "proportional"
            rope_type = str(scaling.get("rope_type") or scaling.get("type") or "default")
            factor = float(scaling.get("factor") or 1.0)
            original = int(scaling.get("original_max_position_embeddings") or 0)
            positions = self.max_position_embeddings
            if rope_type in ("linear", "dynamic") and "alpha" not in scaling:
                positions = int(positions * factor)
            elif rope_type in ("yarn", "deepseek_yarn"):
                positions = int((original or positions) * factor)
            elif rope_type in ("longrope", "su"):
                positions = (original or positions) + positions
            fraction = float(scaling.get("partial_rotary_factor") or self.partial_rotary_factor)
            width = head_dim if rope_type == "proportional" else int(head_dim * fraction)
            caches[(kind if own_local else "", positions, width)] = (positions, width)
        return list(caches.values())

    @property
    def rope_cache_elements(self) -> int:
        return sum(n * w for n, w in self.rope_caches())

    @property
    def allocated_params(self) -> int:
        """Parameters as vLLM allocates them (a k_eq_v layer gets a V slot)."""
        return sum(self.param_breakdown().values())

    @property
    def num_params(self) -> int:
        """Parameters as the checkpoint stores them (comparable to a published total)."""
        n = self.allocated_params
        if self.attention_k_eq_v and self.global_head_dim:
            heads, dim = self._layer_attention("full")
            n -= self.layer_kinds().count("full") * self.hidden_size * heads * dim
        return n


# --- catalog ------------------------------------------------------------------------------------


def _expand_layer_pattern(pattern: list[str], n: int) -> list[str]:
    return [pattern[i % len(pattern)] for i in range(n)]


@lru_cache(maxsize=1)
def _catalog() -> dict[str, ModelSpec]:
    raw = json.loads(resources.files("mcp_tools.capacity").joinpath("data/models.json").read_text())
    entries = {e["id"]: e for e in raw["models"]}
    out: dict[str, ModelSpec] = {}
    for entry in raw["models"]:
        base = entries.get(entry["base"]) if entry.get("base") else None
        arch_entry = base or entry
        cfg = dict(arch_entry["config"])
        cfg.update(entry.get("config_overrides", {}))
        if "layer_pattern" in arch_entry:
            cfg["layer_types"] = _expand_layer_pattern(arch_entry["layer_pattern"], cfg["num_hidden_layers"])
        ckpt = entry.get("checkpoint", {})
        source = entry["source"]
        if base is not None:
            source = f"{source}; architecture from {base['id']}: {base['source']}"
        spec = spec_from_config(
            {**cfg, "architectures": [arch_entry.get("architecture", "")]},
            model_id=entry["id"],
            source=source,
            quantization=Quantization(**ckpt["quantization"]) if ckpt.get("quantization") else None,
        )
        extra_params = arch_entry.get("extra_params", 0)
        if "published_num_params" in arch_entry:
            text_only = spec.model_copy(update={"extra_params": 0})
            # published count excludes the duplicated V slot vLLM allocates for k_eq_v layers
            extra_params = max(0, arch_entry["published_num_params"] - text_only.num_params)
        spec = spec.model_copy(
            update={
                "extra_params": extra_params,
                "extra_params_source": arch_entry.get("extra_params_source", ""),
                "derived": list(entry.get("derived", [])) + list(base.get("derived", []) if base else []),
                "variants": dict(arch_entry.get("variants", {})),
                "base": entry.get("base"),
                "dtype": ckpt.get("dtype", spec.dtype),
            }
        )
        out[entry["id"]] = spec
    return out


def list_catalog() -> list[str]:
    """The ids of the built-in catalog (real Hugging Face repo ids)."""
    return list(_catalog())


def catalog_entry(model_id: str) -> ModelSpec | None:
    cat = _catalog()
    if model_id in cat:
        return cat[model_id]
    low = model_id.lower()
    for key, spec in cat.items():
        if key.lower() == low:
            return spec
    # The last path component alone (e.g. "gemma-4-12B-it").
    matches = [spec for key, spec in cat.items() if key.split("/")[-1].lower() == low]
    return matches[0] if len(matches) == 1 else None


# --- config.json --------------------------------------------------------------------------------


def _get(cfg: dict[str, Any], *names: str, default: Any = None) -> Any:
    for n in names:
        if n in cfg and cfg[n] is not None:
            return cfg[n]
    return default


def _weight_only(method: str, bits: int, group_size: int, *, zero_point: bool) -> Quantization:
    """Integer weights of ``bits`` with 16-bit activations (``wNa16``), one fp16 scale a group."""
    return Quantization(
        method=method,
        format=f"w{bits}a16",
        weight_bits=bits,
        group_size=group_size,
        scale_bytes=2,
        zero_point=zero_point,
    )


def quantization_from_config(qc: dict[str, Any]) -> Quantization:
    """Normalise a Hugging Face ``quantization_config``."""
    method = str(qc.get("quant_method", "")).lower()
    if method == "compressed-tensors":
        fmt = str(qc.get("format", "")).lower()
        groups = qc.get("config_groups") or {}
        w: dict[str, Any] = {}
        acts: dict[str, Any] | None = None
        for g in groups.values():
            w = g.get("weights") or {}
            acts = g.get("input_activations")
            break
        bits = int(w.get("num_bits", 8))
        wtype = str(w.get("type", "int")).lower()
        gs = int(w.get("group_size") or 0)
        if "nvfp4" in fmt or (bits == 4 and wtype == "float"):
            return Quantization(
                method=method, format="nvfp4", weight_bits=4, group_size=gs or 16, scale_bytes=1
            )
        if bits == 8 and wtype == "float":
            return Quantization(method=method, format="fp8", weight_bits=8, group_size=0, scale_bytes=4)
        if bits == 8:
            return Quantization(
                method=method, format="w8a8" if acts else "int8", weight_bits=8, group_size=gs
            )
        return _weight_only(method, bits, gs, zero_point=not w.get("symmetric", True))
    if method in ("fp8", "fbgemm_fp8"):
        return Quantization(method=method, format="fp8", weight_bits=8, scale_bytes=4)
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin", "auto-round", "autoround"):
        bits = int(_get(qc, "bits", "w_bit", default=4))
        gs = int(_get(qc, "group_size", "q_group_size", default=128))
        if gs < 0:
            gs = 0
        zero_point = bool(qc.get("zero_point", method.startswith("awq"))) or not qc.get("sym", True)
        return _weight_only(method, bits, gs, zero_point=zero_point)
    if method == "modelopt" or method == "modelopt_fp4":
        algo = str(_get(qc, "quant_algo", default="")).upper()
        if not algo and isinstance(qc.get("quantization"), dict):
            algo = str(qc["quantization"].get("quant_algo", "")).upper()
        if "FP4" in algo or method == "modelopt_fp4":
            return Quantization(method=method, format="nvfp4", weight_bits=4, group_size=16, scale_bytes=1)
        return Quantization(method=method, format="fp8", weight_bits=8, scale_bytes=4)
    if method == "mxfp4":
        return Quantization(method=method, format="mxfp4", weight_bits=4, group_size=32, scale_bytes=1)
    if method == "bitsandbytes":
        if qc.get("load_in_8bit"):
            return Quantization(method=method, format="int8", weight_bits=8, scale_bytes=4)
        return Quantization(method=method, format="bnb4", weight_bits=4, group_size=64, scale_bytes=1)
    if method in ("gguf",):
        raise UserError("GGUF checkpoints are not modelled: give the planner the original config.json")
    raise UserError(f"quantization_config: quant_method {method!r} is not one the planner knows")


# What transformers fills in for keys a published config.json omits: the defaults of each model
# type's config class (``transformers/models/<type>/configuration_<type>.py``). Only the keys the
# planner reads; a sub-config without a model_type takes its parent's text model type.
#: Gemma2Config (its 2B shape).
_GEMMA2_DEFAULTS: dict[str, Any] = {
    "vocab_size": 256_000,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": True,
    "sliding_window": 4096,
}
TRANSFORMERS_DEFAULTS: dict[str, dict[str, Any]] = {
    # Gemma3TextConfig: Gemma2Config's shape, with its own vocabulary, context and local/global pattern
    "gemma3_text": {
        **_GEMMA2_DEFAULTS,
        "vocab_size": 262_208,
        "max_position_embeddings": 131_072,
        "sliding_window_pattern": 6,
    },
    "gemma2": dict(_GEMMA2_DEFAULTS),
    # GemmaConfig
    "gemma": {
        "vocab_size": 256_000,
        "hidden_size": 3072,
        "intermediate_size": 24576,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "head_dim": 256,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
    },
    # LlamaConfig
    "llama": {"vocab_size": 32_000, "max_position_embeddings": 2048, "tie_word_embeddings": False},
    # MistralConfig
    "mistral": {
        "vocab_size": 32_000,
        "max_position_embeddings": 4096 * 32,
        "sliding_window": 4096,
        "tie_word_embeddings": False,
    },
    # Qwen2Config / Qwen3Config
    "qwen2": {"vocab_size": 151_936, "max_position_embeddings": 32_768, "tie_word_embeddings": False},
    "qwen3": {
        "vocab_size": 151_936,
        "max_position_embeddings": 32_768,
        "head_dim": 128,
        "tie_word_embeddings": False,
    },
}
#: A multimodal wrapper's text model type (Gemma3Config.sub_configs["text_config"] = Gemma3TextConfig).
TEXT_MODEL_TYPE = {"gemma3": "gemma3_text", "gemma4": "gemma4_text", "gemma3n": "gemma3n_text"}


def transformers_config(config: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The text config as transformers would load it: the nested ``text_config`` (multimodal
    checkpoints) or the top level, with omitted keys at the model type's class defaults.
    Returns the merged config and the keys that were filled in."""
    top = config
    sub = config.get("text_config") or config.get("llm_config")
    cfg = dict(sub) if isinstance(sub, dict) else dict(config)
    top_type = str(top.get("model_type") or "")
    model_type = str(cfg.get("model_type") or TEXT_MODEL_TYPE.get(top_type, top_type))
    defaults = TRANSFORMERS_DEFAULTS.get(model_type, {})
    filled = [k for k in defaults if cfg.get(k) is None and k not in cfg]
    merged = {**defaults, **cfg}
    # transformers keeps a key written as null (e.g. Mixtral "sliding_window": null).
    for k in defaults:
        if k in cfg and cfg[k] is None:
            merged[k] = None
    if model_type:
        merged["model_type"] = model_type
    return merged, filled


def _siglip_params(sub: dict[str, Any]) -> int:
    """A SigLIP vision tower as vLLM builds it (``vllm/model_executor/models/siglip.py``):
    patch embedding (a biased conv) and position embeddings, per layer a biased qkv and output
    projection, two LayerNorms and a biased fc1/fc2 MLP, the post LayerNorm, and the attention
    pooling head unless ``vision_use_head`` is false."""
    h = int(sub.get("hidden_size") or 768)
    inter = int(sub.get("intermediate_size") or 3072)
    layers = int(sub.get("num_hidden_layers") or 12)
    patch = int(sub.get("patch_size") or 16)
    image = int(sub.get("image_size") or 224)
    channels = int(sub.get("num_channels") or 3)
    mlp = 2 * h * inter + inter + h
    total = channels * patch * patch * h + h + (image // patch) ** 2 * h
    total += layers * (4 * h * h + 4 * h + 4 * h + mlp)
    total += 2 * h  # post_layernorm
    if sub.get("vision_use_head", True) is not False:
        total += h + 4 * h * h + 4 * h + 2 * h + mlp  # probe, attention, LayerNorm, MLP
    return total


def _tower_params(top: dict[str, Any], text_hidden: int) -> tuple[dict[str, int], str]:
    """Parameters of the vision / audio towers (and the projector into the text model) that
    vLLM builds beside the decoder, by the modality that loads them. SigLIP and the Gemma 3
    projector are counted exactly (google/gemma-3-12b-it: 12,187,325,040 published = decoder +
    416,866,032 tower + 4,424,832 projector); other towers are estimated (layers x attention + MLP).
    Kept in the model dtype: quantized checkpoints leave the towers out of quantization (their
    ``ignore`` lists), as the planner assumes for every checkpoint."""
    towers: dict[str, int] = {}
    notes = []
    for key, modality in (("vision_config", "image"), ("audio_config", "audio")):
        sub = top.get(key)
        if not isinstance(sub, dict):
            continue
        if key == "vision_config" and str(sub.get("model_type", "")).startswith("siglip"):
            n = _siglip_params(sub)
            if str(top.get("model_type", "")) == "gemma3":
                # Gemma3MultiModalProjector: mm_input_projection_weight + mm_soft_emb_norm
                h = int(sub.get("hidden_size") or 768)
                n += h * text_hidden + h
            towers[modality] = n
            notes.append(f"{key} (SigLIP, counted as vLLM builds it)")
            continue
        h = int(sub.get("hidden_size") or 0)
        layers = int(sub.get("num_hidden_layers") or sub.get("depth") or 0)
        if not h or not layers:
            continue
        inter = int(sub.get("intermediate_size") or 4 * h)
        if key == "vision_config":
            per_layer = 4 * h * h + 3 * h * inter  # attention + gated MLP
        else:
            per_layer = 4 * h * h + 2 * 2 * h * 4 * h + 3 * h * h  # conformer: attention, 2 FFNs, conv
        towers[modality] = layers * per_layer
        notes.append(f"{key} (estimated: layers x attention + MLP)")
    if not towers:
        return {}, ""
    return towers, "from " + " and ".join(notes)


def spec_from_config(
    config: dict[str, Any],
    *,
    model_id: str,
    source: str,
    quantization: Quantization | None = None,
) -> ModelSpec:
    """Build a ModelSpec from a config.json dict (top level or nested ``text_config``)."""
    if not isinstance(config, dict):
        raise UserError(f"{source}: config is not a JSON object")
    top = config
    cfg, filled = transformers_config(config)
    archs = top.get("architectures") or cfg.get("architectures") or [""]
    try:
        hidden = int(cfg["hidden_size"])
        layers = int(_get(cfg, "num_hidden_layers", "n_layer", "num_layers"))
        heads = int(_get(cfg, "num_attention_heads", "n_head"))
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(
            f"{source}: config has no usable hidden_size / num_hidden_layers / num_attention_heads"
        ) from e
    if min(hidden, layers, heads) <= 0:
        raise UserError(f"{source}: hidden_size, num_hidden_layers and num_attention_heads must be positive")
    kv_heads = int(_get(cfg, "num_key_value_heads", default=heads))
    head_dim = int(_get(cfg, "head_dim", default=hidden // heads))
    if kv_heads <= 0 or head_dim <= 0:
        raise UserError(f"{source}: num_key_value_heads and head_dim must be positive")
    vocab = int(_get(cfg, "vocab_size", default=top.get("vocab_size", 0)) or 0)
    if vocab <= 0:
        raise UserError(f"{source}: config has no vocab_size")
    max_pos = int(_get(cfg, "max_position_embeddings", "n_positions", "max_sequence_length", default=0) or 0)
    rope = _get(cfg, "rope_scaling", default=None)
    if (
        isinstance(rope, dict)
        and rope.get("original_max_position_embeddings")
        and rope.get("rope_type") == "yarn"
    ):
        # vLLM scales the context by the YaRN factor over the original length.
        max_pos = max(max_pos, int(rope["original_max_position_embeddings"] * float(rope.get("factor", 1))))
    if max_pos <= 0:
        raise UserError(f"{source}: config has no max_position_embeddings")
    model_type = str(cfg.get("model_type") or top.get("model_type") or "")
    tie = bool(
        _get(
            cfg, "tie_word_embeddings", default=top.get("tie_word_embeddings", model_type.startswith("gemma"))
        )
    )
    layer_types = list(cfg.get("layer_types") or [])
    sliding_window = _get(cfg, "sliding_window", default=None)
    if cfg.get("use_sliding_window") is False:
        sliding_window = None
    if not layer_types:
        pattern = _get(cfg, "sliding_window_pattern", "_sliding_window_pattern", default=None)
        if sliding_window and isinstance(pattern, int) and pattern > 1:
            layer_types = [
                "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)
            ]
        elif sliding_window and model_type.startswith("gemma2"):
            layer_types = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    if layer_types and "sliding_attention" not in layer_types:
        sliding_window = None
    if layer_types and len(layer_types) != layers:
        raise UserError(f"{source}: layer_types has {len(layer_types)} entries for {layers} layers")
    if "gemma4" in model_type and not layer_types:
        layer_types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(layers)]
    num_experts = int(_get(cfg, "num_experts", "num_local_experts", "n_routed_experts", default=0) or 0)
    moe_layers: list[int] | None = None
    if num_experts and "decoder_sparse_step" in cfg:
        step = int(cfg.get("decoder_sparse_step") or 1)
        dense_only = set(cfg.get("mlp_only_layers") or [])
        moe_layers = [i for i in range(layers) if i not in dense_only and (i + 1) % step == 0]
    if num_experts and "first_k_dense_replace" in cfg:
        moe_layers = list(range(int(cfg["first_k_dense_replace"]), layers))
    moe_inter = int(_get(cfg, "moe_intermediate_size", "expert_intermediate_size", default=0) or 0)
    inter = int(_get(cfg, "intermediate_size", "n_inner", "ffn_dim", default=4 * hidden))
    if num_experts and not moe_inter:
        moe_inter = inter  # Mixtral: each expert has the full intermediate size
    dtype = str(
        _get(cfg, "torch_dtype", "dtype", default=top.get("torch_dtype", top.get("dtype", "bfloat16")))
    )
    dtype = dtype.replace("torch.", "")
    if dtype not in DTYPE_BYTES:
        dtype = "bfloat16"
    qc = top.get("quantization_config") or cfg.get("quantization_config")
    if quantization is None and qc:
        if not isinstance(qc, dict):
            raise UserError(f"{source}: quantization_config is not an object")
        quantization = quantization_from_config(qc)
    towers, extra_source = _tower_params(top, hidden)
    rope_scaling = _get(cfg, "rope_scaling", "rope_parameters", default=None)
    if isinstance(rope_scaling, dict) and isinstance(rope_scaling.get("full_attention"), dict):
        rope_scaling = rope_scaling["full_attention"]  # per layer type (transformers v5 Gemma)
    if not isinstance(rope_scaling, dict):
        rope_scaling = None
    name = model_id.split("/")[-1] if "/" in model_id else model_id
    try:
        return ModelSpec(
            id=model_id,
            name=name,
            source=source,
            architecture=str(archs[0]) if archs else "",
            model_type=model_type,
            hidden_size=hidden,
            intermediate_size=inter,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            head_dim=head_dim,
            vocab_size=vocab,
            max_position_embeddings=max_pos,
            tie_word_embeddings=tie,
            attention_bias=bool(
                _get(cfg, "attention_bias", "qkv_bias", default=model_type.startswith("qwen2"))
            ),
            layer_types=layer_types,
            sliding_window=int(sliding_window) if sliding_window else None,
            global_head_dim=_get(cfg, "global_head_dim", default=None)
            or (512 if "gemma4" in model_type else None),
            num_global_key_value_heads=_get(cfg, "num_global_key_value_heads", default=None),
            attention_k_eq_v=bool(cfg.get("attention_k_eq_v", False)),
            num_kv_shared_layers=int(cfg.get("num_kv_shared_layers") or 0),
            use_double_wide_mlp=bool(cfg.get("use_double_wide_mlp", False)),
            hidden_size_per_layer_input=int(cfg.get("hidden_size_per_layer_input") or 0),
            vocab_size_per_layer_input=int(cfg.get("vocab_size_per_layer_input") or 0),
            num_experts=num_experts,
            num_experts_per_tok=int(
                _get(cfg, "num_experts_per_tok", "top_k_experts", "moe_topk", default=0) or 0
            ),
            moe_intermediate_size=moe_inter,
            shared_expert_intermediate_size=int(cfg.get("shared_expert_intermediate_size") or 0),
            moe_with_dense_mlp=bool(cfg.get("enable_moe_block", False)),
            moe_layers=moe_layers,
            kv_lora_rank=int(cfg.get("kv_lora_rank") or 0),
            qk_rope_head_dim=int(cfg.get("qk_rope_head_dim") or 0),
            dtype=dtype,
            quantization=quantization,
            extra_params=sum(towers.values()),
            extra_params_source=extra_source,
            tower_params=towers,
            rope_scaling=rope_scaling,
            partial_rotary_factor=float(cfg.get("partial_rotary_factor") or 1.0),
            derived=[f"{', '.join(filled)} at transformers' {model_type} defaults (omitted from config.json)"]
            if filled
            else [],
        )
    except (TypeError, ValueError) as e:
        raise UserError(f"{source}: config has a field of the wrong type ({e})") from e


def load_config_file(path: Path) -> ModelSpec:
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise UserError(f"model config {path}: no such file")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"model config {path}: cannot read it ({e})") from e
    except json.JSONDecodeError as e:
        raise UserError(f"model config {path}: not valid JSON ({e.msg} at line {e.lineno})") from e
    model_id = path.parent.name or str(path)
    spec = spec_from_config(data, model_id=model_id, source=str(path))
    return spec


def resolve_model(ref: str) -> ModelSpec:
    """A catalog id (case-insensitive), a path or URI whose last component names a catalog entry
    (``/mnt/models/gemma-4-12B-it``, ``gs://bucket/google/gemma-4-12B-it``), or a config.json path."""
    ref = (ref or "").strip()
    if not ref:
        raise UserError("model: empty name")
    p = Path(ref).expanduser()
    # A real checkpoint directory on this machine is more authoritative than the catalog.
    if ref.endswith(".json") or p.is_dir() and (p / "config.json").is_file():
        return load_config_file(p)
    spec = catalog_entry(ref)
    if spec is not None:
        return spec
    stripped = ref.rstrip("/")
    if "://" in stripped:
        stripped = stripped.split("://", 1)[1]
    parts = [x for x in stripped.split("/") if x]
    for n in (2, 1):
        if len(parts) >= n:
            spec = catalog_entry("/".join(parts[-n:]))
            if spec is not None:
                return spec
    raise UserError(
        f"model {ref!r}: not a catalog id nor a config.json path (see `gemma-sre plan --list-models`)"
    )
