"""context_too_long: --max-model-len above what the model supports, or requests longer than the context.

Wordings: "User-specified max_model_len (131072) is greater than the derived max_model_len
(None=8192 in model's config.json)" (vllm-project/vllm#3676; newer: "... (max_position_embeddings=
131072 or model_max_length=None in model's config.json)"); HTTP 400 "This model's maximum context
length is 8192 tokens. However, you requested 9000 tokens" and V1's "'max_tokens' or
'max_completion_tokens' is too large ... This model's maximum context length is N tokens";
"The decoder prompt (length X) is longer than the maximum model length of N".
"""

from __future__ import annotations

import re

from graph.analyzers.base import Finding, simple
from graph.observation import Observation

PATTERN = re.compile(
    r"is greater than the derived max_model_len|maximum context length is \d+"
    r"|is longer than the maximum model length"
    r"|exceeds the model's maximum context|prompt \(\d+ tokens\) is too long"
    r"|Input prompt \(\d+ tokens\) is too long"
    r"|max_model_len .* exceeds .*max_position_embeddings"
    r"|Please reduce the length of the messages|is too long and exceeds (?:the )?limit",
    re.IGNORECASE,
)


def analyze(obs: Observation) -> list[Finding]:
    return simple(
        obs,
        category="context_too_long",
        pattern=PATTERN,
        summary="The context length is the problem (line {line}): {text}",
        confidence=0.9,
    )
