"""What the capacity planner answers (``CapacityPlan``, with its ``Suggestion``s): the result types
alone, so that a server listing its tools' schemas does not import the planner's tables."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Suggestion(BaseModel):
    kind: str  # "set_model" | "set_vllm_args" | "set_resources"
    change: dict[str, object]
    summary: str
    fits: bool
    kv_cache_tokens: int = 0
    weights_gib: float = 0.0
    also: dict[str, object] = Field(default_factory=dict)  # a companion change needed with it


class CapacityPlan(BaseModel):
    # SPEC section 4 keys.
    model: str
    gpu: str
    gpu_memory_gib: float
    weights_gib: float
    activation_gib: float
    overhead_gib: float
    kv_cache_gib: float
    kv_bytes_per_token: int  # KV bytes per extra token of context (full-attention layers; per GPU)
    kv_cache_tokens: int  # as vLLM logs "GPU KV cache size: N tokens" (release-specific)
    max_concurrency: float
    fits: bool
    verdict: str
    warnings: list[str] = Field(default_factory=list)
    # Beyond the SPEC.
    binding_constraint: str | None = None  # "weights" | "kv_cache" | "unsupported" | None
    unsupported: list[str] = Field(default_factory=list)
    suggestions: list[Suggestion] = Field(default_factory=list)
    gpu_count: int = 1
    gpu_compute_capability: str | None = None
    gpu_bandwidth_gbps: float | None = None
    num_params: int = 0
    weight_format: str = ""
    dtype: str = ""
    kv_cache_dtype: str = "auto"
    max_model_len: int = 0
    model_context_limit: int = 0
    max_num_seqs: int = 0
    max_num_batched_tokens: int = 0
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    enforce_eager: bool = False
    non_torch_gib: float = 0.0
    cuda_graph_gib: float = 0.0
    gpu_blocks: int = 0
    kv_needed_gib_one_request: float = 0.0
    max_model_len_that_fits: int = 0
    # Uncertainty (SPEC section 4 extended): what vLLM may report given what is known about its
    # accounting; `fits` holds at the low end, `fits_expected` at the central estimate.
    kv_cache_tokens_range: list[int] = Field(default_factory=lambda: [0, 0])
    kv_cache_gib_range: list[float] = Field(default_factory=lambda: [0.0, 0.0])
    fits_expected: bool = False
    gpu_memory_used_gib: float = 0.0  # held by other processes before vLLM starts
    vllm_version: str | None = None

    SPEC_KEYS: tuple[str, ...] = (
        "model",
        "gpu",
        "gpu_memory_gib",
        "weights_gib",
        "activation_gib",
        "overhead_gib",
        "kv_cache_gib",
        "kv_bytes_per_token",
        "kv_cache_tokens",
        "max_concurrency",
        "fits",
        "verdict",
        "warnings",
    )
    #: Keys added to the SPEC section 4 document (extended, never changed).
    SPEC_EXTENSION_KEYS: tuple[str, ...] = ("kv_cache_tokens_range",)

    def to_spec_json(self) -> dict[str, object]:
        """The SPEC section 4 ``plan`` keys, then the extension keys."""
        d = self.model_dump()
        return {k: d[k] for k in (*self.SPEC_KEYS, *self.SPEC_EXTENSION_KEYS)}
