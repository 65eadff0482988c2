"""context_too_long: --max-model-len above what the model supports, or requests longer than the context.

Wordings: "User-specified max_model_len (131072) is greater than the derived max_model_len
(None=8192 in model's config.json)" (vllm-project/vllm#3676; newer: "... (max_position_embeddings=
131072 or model_max_length=None in model's config.json)"); HTTP 400 "This model's maximum context
length is 8192 tokens. However, you requested 9000 tokens" and V1's "'max_tokens' or
'max_completion_tokens' is too large ... This model's maximum context length is N tokens";
"The decoder prompt (length X) is longer than the maximum model length of N".
"""

from __future__ import annotations

from graph.analyzers.base import (
    Finding,
    cut_at_family_check,
    evidence_text,
    finding,
    simple,
    view,
)
from graph.observation import Observation
from mcp_tools.capacity.startup import parse_vllm_startup
from mcp_tools.vocabulary import (
    CONTEXT,
    CONTEXT_REJECTED,
    FACT_DERIVED_MAX_LEN,
    FACT_REQUESTED_TOKENS,
    FACT_SERVED_CONTEXT,
    FACT_USER_MAX_LEN,
)


def analyze(obs: Observation) -> list[Finding]:
    found = simple(
        obs,
        category="context_too_long",
        pattern=CONTEXT,
        summary="The context length is the problem (line {line}): {text}",
        confidence=0.9,
    )
    if not found:
        # A request turned away for its length is a failure even when printed as a warning (V0).
        rejected = list(view(obs).grep(CONTEXT_REJECTED))
        if rejected:
            found = [
                finding(
                    "context_too_long",
                    0.8,
                    f"Requests are longer than the served context (line {rejected[0].n}).",
                    rejected[:3],
                    pattern=CONTEXT_REJECTED,
                    analyzer="context_too_long",
                )
            ]
    if not found:
        found = cut_at_family_check(obs, "context_too_long", "the context length")
    for f in found:
        text = evidence_text(f)
        for key, p in (
            ("derived_max_model_len", FACT_DERIVED_MAX_LEN),
            ("served_context", FACT_SERVED_CONTEXT),
            ("user_max_model_len", FACT_USER_MAX_LEN),
            ("requested_tokens", FACT_REQUESTED_TOKENS),
        ):
            m = p.search(text)
            if m:
                f.facts[key] = int(next(g for g in m.groups() if g))
        n = f.evidence[0].line if f.evidence else 0
        if "served_context" in f.facts and "requested_tokens" not in f.facts and n > 0:
            # The answer's next sentence ("However, you requested ...") pasted on lines of its own.
            m = FACT_REQUESTED_TOKENS.search(" ".join(ln.text for ln in view(obs).lines[n : n + 2]))
            if m:
                f.facts["requested_tokens"] = int(next(g for g in m.groups() if g))
        if "served_context" in f.facts:
            # What the server's own start said its KV cache holds: a longer context fits when one
            # request of that length does.
            kv = parse_vllm_startup(
                ln.text for ln in view(obs).lines if "KV cache" in ln.text
            ).kv_cache_tokens
            if kv:
                f.facts["kv_cache_tokens"] = kv
    return found
