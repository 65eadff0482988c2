"""What one simulated vLLM server looks like and how fast it is."""

from __future__ import annotations

from pydantic import BaseModel, Field

OWNED_BY = "gemma-sre-sandbox"
SYNTHETIC_NOTE = "Simulated vLLM endpoint (gemma-sre sandbox): replies are synthetic text, not model output."
VOCAB_SIZE = 262_144  # Gemma's vocabulary size; token ids are hashes modulo this


class SimConfig(BaseModel):
    """What the simulated server looks like and how fast it is."""

    served_model_name: str
    max_model_len: int = Field(gt=0)
    max_num_seqs: int = Field(default=256, gt=0)
    kv_cache_tokens: int = Field(gt=0)  # total KV capacity in tokens (the capacity planner's figure)
    ttft_base_s: float = Field(default=0.05, ge=0)  # fixed part of time-to-first-token
    prefill_s_per_token: float = Field(default=0.0, ge=0)  # prefill cost per prompt token
    itl_s: float = Field(default=0.02, ge=0)  # decode time per token for one sequence
    ttft_factor: float = Field(default=1.0, ge=1.0)  # the prefill takes this many times longer (a slow fix)
    zero_latency: bool = False  # no sleeps at all (for measuring clients)
    time_scale: float = Field(default=1.0, gt=0)  # >1 makes the clock faster (sleeps shorter)
    container_concurrency: int | None = Field(default=None, gt=0)  # above this in flight: HTTP 429
    revision: str | None = None
