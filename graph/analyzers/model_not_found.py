"""model_not_found: the weights / config path or repo id is wrong or missing.

Wordings: transformers "OSError: /mnt/models/x does not appear to have a file named config.json";
huggingface_hub "Repository Not Found for url: https://huggingface.co/api/models/..." /
RepositoryNotFoundError; "... is not a local folder and is not a valid model identifier listed on
'https://huggingface.co/models'"; "Invalid repository ID or local directory specified"; vLLM's
"Cannot find any model weights with `/mnt/models/x`"; "No such file or directory: '/mnt/models/...'".
"""

from __future__ import annotations

import re

from graph.analyzers.base import Finding, simple
from graph.observation import Observation

PATTERN = re.compile(
    r"does not appear to have a file named|Repository Not Found|RepositoryNotFoundError"
    r"|is not a local folder and is not a valid model identifier|Invalid repository ID or local directory"
    r"|Cannot find any model weights|No model weights found|Can't load the configuration of"
    r"|No such file or directory: '[^']*(?:models?|\.safetensors|config\.json|gs:|/mnt/|tokenizer)[^']*'"
    r"|Revision Not Found|EntryNotFoundError|LocalEntryNotFoundError|model .* not found|No such bucket"
    # huggingface_hub: "HFValidationError: Repo id must be in the form 'repo_name' or
    # 'namespace/repo_name': '/models/'" (a local path that is not there), "404 Client Error: Not
    # Found for url: https://huggingface.co/..."; KServe storage-initializer "No model found in"
    r"|HFValidationError|Repo id must be in the form|Client Error: Not Found for url: https://huggingface\.co"
    r"|No model found in|Failed to fetch model|model path .* does not exist|not a valid model",
    re.IGNORECASE,
)


def analyze(obs: Observation) -> list[Finding]:
    return simple(
        obs,
        category="model_not_found",
        pattern=PATTERN,
        summary="The model's weights or config could not be found (line {line}): {text}",
        confidence=0.88,
        harmless_if_loaded=True,
    )
