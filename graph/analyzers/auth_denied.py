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

import re

from graph.analyzers.base import Finding, simple
from graph.observation import Observation

PATTERN = re.compile(
    r"Cannot access gated repo|gated repo|Access to model \S+ is restricted|\b401 Client Error"
    r"|\b403 Client Error"
    r"|401 Unauthorized|403 Forbidden|Invalid (?:user )?token|Invalid credentials|authentication required"
    r"|Permission denied|PermissionError|PERMISSION_DENIED|does not have storage\.\w+\.\w+ access"
    r"|AccessDenied|not in the authorized list|Unauthenticated"
    # Google: gRPC "code = PermissionDenied desc = Permission 'secretmanager.versions.access' denied",
    # ADC missing ("google: could not find default credentials"), "Request had insufficient
    # authentication scopes", "does not have permission to access", invalid_grant / expired tokens
    r"|code = PermissionDenied|Permission '[\w.]+' denied|could not find default credentials"
    r"|DefaultCredentialsError|insufficient authentication scopes|does not have permission to access"
    r"|invalid_grant|token (?:has )?expired|401 Unauthorized|HTTP 401|HTTP 403"
    r"|NoCredentialsError|Unable to locate credentials|caller does not have permission",
    re.IGNORECASE,
)
PREFILTER = re.compile(
    r"gated|restricted|Client Error|Unauthori[sz]ed|Forbidden|Invalid|authenticat|Permission|PERMISSION"
    r"|does not have storage|AccessDenied|authorized list|credentials|scopes|invalid_grant|expired"
    r"|does not have permission|HTTP |Unable to locate|caller does not",
    re.IGNORECASE,
)
EXCLUDE = re.compile(
    r"Repository Not Found|artifactregistry\.repositories|pull access denied|manifest|pulling|Failed to pull"
    r"|ImagePull|Read-only file system",
    re.IGNORECASE,
)


def analyze(obs: Observation) -> list[Finding]:
    return simple(
        obs,
        category="auth_denied",
        pattern=PATTERN,
        exclude=EXCLUDE,
        prefilter=PREFILTER,
        harmless_if_loaded=True,
        summary="Access was denied (line {line}): {text}",
        confidence=0.88,
    )
