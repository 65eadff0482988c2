"""model_not_found: the weights / config path or repo id is wrong or missing.

Wordings: transformers "OSError: /mnt/models/x does not appear to have a file named config.json";
huggingface_hub "Repository Not Found for url: https://huggingface.co/api/models/..." /
RepositoryNotFoundError; "... is not a local folder and is not a valid model identifier listed on
'https://huggingface.co/models'"; "Invalid repository ID or local directory specified"; vLLM's
"Cannot find any model weights with `/mnt/models/x`"; "No such file or directory: '/mnt/models/...'".
"""

from __future__ import annotations

from graph.analyzers.base import Finding, simple
from graph.observation import Observation
from mcp_tools.vocabulary import KIND_CORRUPT, MODEL_NOT_FOUND


def analyze(obs: Observation) -> list[Finding]:
    return simple(
        obs,
        category="model_not_found",
        pattern=MODEL_NOT_FOUND,
        summary="The model's weights or config could not be found (line {line}): {text}",
        confidence=0.88,
        harmless_if_loaded=True,
    )


def facts_of(obs: Observation, text: str) -> dict[str, object]:
    """What the remedy needs from the failing record ``text``: whether the checkpoint is there but not
    whole (``corrupt``: fetched again, not renamed)."""
    return {"corrupt": True} if KIND_CORRUPT.search(text) else {}
