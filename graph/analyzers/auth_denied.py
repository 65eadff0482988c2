"""auth_denied: a gated repo, 401/403, or permission denied on weights, a bucket or a secret.

Wordings: huggingface_hub "401 Client Error ... Cannot access gated repo for url
https://huggingface.co/google/gemma-.../resolve/main/config.json. Access to model google/gemma-... is
restricted. You must have access to it and be authenticated to access it. Please log in."
(city96/ComfyUI_ExtraModels#99, McGill-NLP/llm2vec#130); "403 Client Error ... you are not in the
authorized list"; GCS "does not have storage.objects.get access"; "PermissionError: [Errno 13]
Permission denied: '/mnt/models/...'"; Secret Manager "Permission denied on secret". Image-registry
denials belong to image_pull; a 401 that says the repository does not exist to model_not_found.
"""

from __future__ import annotations

from graph.analyzers.base import Finding, evidence_text, simple
from graph.observation import Observation
from mcp_tools.vocabulary import (
    AUTH,
    AUTH_EXCLUDE,
    AUTH_PREFILTER,
    FACT_DENIED_BUCKET,
    FACT_DENIED_HUB,
    FACT_DENIED_SECRET,
    HF_TOKEN_ENV,
    MODEL_NOT_FOUND,
)


def _sends_no_token(obs: Observation) -> bool:
    """The service's environment is known (it lists variables) and holds no Hugging Face token. An
    empty environment is as often one nobody recorded (an incident's spec) as one without a token."""
    env = obs.service.env if obs.service is not None else {}
    return bool(env) and not any(HF_TOKEN_ENV.match(k) for k in env)


def analyze(obs: Observation) -> list[Finding]:
    found = simple(
        obs,
        category="auth_denied",
        pattern=AUTH,
        exclude=AUTH_EXCLUDE,
        prefilter=AUTH_PREFILTER,
        harmless_if_loaded=True,
        # huggingface_hub answers a repo id that does not exist with 401 too: the chain's last
        # exception ("is not a valid model identifier", RepositoryNotFoundError) says it is not there.
        # It answers a private repo asked for without a token the same way: where the service's
        # environment is known and sends no token, the 401 stays a denial.
        chain_ends_in=None if _sends_no_token(obs) else MODEL_NOT_FOUND,
        summary="Access was denied (line {line}): {text}",
        confidence=0.88,
    )
    for f in found:
        text = evidence_text(f)
        f.facts["denied"] = next(
            (what for what, p in (("hub", FACT_DENIED_HUB), ("bucket", FACT_DENIED_BUCKET),
                                  ("secret", FACT_DENIED_SECRET)) if p.search(text)),
            "other",
        )  # fmt: skip
    return found
