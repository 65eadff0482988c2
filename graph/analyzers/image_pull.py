"""image_pull: the container image is missing or cannot be pulled.

Wordings: Cloud Run "Revision '...' is not ready and cannot serve traffic. Image
'us-docker.pkg.dev/p/r/vllm:tag' not found."; "Failed to pull image", Kubernetes "ErrImagePull",
"ImagePullBackOff", registry "manifest unknown", Artifact Registry "denied: Permission
\"artifactregistry.repositories.downloadArtifacts\" denied".
"""

from __future__ import annotations

from graph.analyzers.base import Finding, simple
from graph.observation import Observation
from mcp_tools.vocabulary import IMAGE_PULL


def analyze(obs: Observation) -> list[Finding]:
    return simple(
        obs,
        category="image_pull",
        pattern=IMAGE_PULL,
        summary="The container image could not be pulled (line {line}): {text}",
        confidence=0.92,
    )
