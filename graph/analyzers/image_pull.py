"""image_pull: the container image is missing or cannot be pulled.

Wordings: Cloud Run "Revision '...' is not ready and cannot serve traffic. Image
'us-docker.pkg.dev/p/r/vllm:tag' not found."; "Failed to pull image", Kubernetes "ErrImagePull",
"ImagePullBackOff", registry "manifest unknown", Artifact Registry "denied: Permission
\"artifactregistry.repositories.downloadArtifacts\" denied".
"""

from __future__ import annotations

import re

from graph.analyzers.base import Finding, simple
from graph.observation import Observation

PATTERN = re.compile(
    r"Image '[^']+' not found|Image \S+ not found|failed to pull|Failed to pull image|ErrImagePull"
    r"|ImagePullBackOff|manifest unknown|manifest for \S+ not found"
    r"|artifactregistry\.repositories\.downloadArtifacts"
    r"|pull access denied|failed to resolve reference|Unable to retrieve the image"
    r"|Container import failed"
    r"|does not support image|must support amd\d\d/linux|exec format error"
    r"|no matching manifest for linux/amd\d\d"
    # Docker / containerd: "pullImage error: failed pulling", "failed to register layer",
    # "error pulling image configuration", "toomanyrequests: You have reached your pull rate limit"
    r"|pullImage error|failed pulling|failed to register layer|error pulling image|pull rate limit"
    r"|Back-off pulling image|ErrImageNeverPull|InvalidImageName",
    re.IGNORECASE,
)


def analyze(obs: Observation) -> list[Finding]:
    return simple(
        obs,
        category="image_pull",
        pattern=PATTERN,
        summary="The container image could not be pulled (line {line}): {text}",
        confidence=0.92,
    )
