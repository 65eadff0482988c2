"""image_pull: the container image is missing or cannot be pulled.

Wordings: Cloud Run "Revision '...' is not ready and cannot serve traffic. Image
'us-docker.pkg.dev/p/r/vllm:tag' not found."; "Failed to pull image", Kubernetes "ErrImagePull",
"ImagePullBackOff", registry "manifest unknown", Artifact Registry "denied: Permission
\"artifactregistry.repositories.downloadArtifacts\" denied"; a wrapper's "Failed to get vLLM backend
image".

A pull can also fail without saying so: kubelet logs "Pulling image X", never "Successfully pulled
image X", and the node reports its disk full ("The node was low on resource: ephemeral-storage", "no
space left on device") — the image's layers did not fit the node's disk. That is a platform event
(kubelet's), so its severity is a ``Warning`` and it is matched whatever the severity says. Likewise
docker run's "Unable to find image 'x' locally" with nothing after it of the pull completing, nor
of the server starting.
"""

from __future__ import annotations

from graph.analyzers.base import Finding, finding, simple, started_between, view
from graph.observation import Observation
from mcp_tools.vocabulary import (
    DOCKER_NOT_LOCAL,
    DOCKER_PULLED,
    IMAGE_PULL,
    IMAGE_PULLED,
    IMAGE_PULLING,
    NODE_DISK_FULL,
    UP_PHASES,
)


def _pull_out_of_disk(obs: Observation) -> list[Finding]:
    """A pull still pending when the node's disk filled."""
    v = view(obs)
    done = {
        m.group("image") or m.group("present")
        for ln in v.grep(IMAGE_PULLED)
        if (m := IMAGE_PULLED.search(ln.text))
    }
    for pull in v.grep(IMAGE_PULLING):
        m = IMAGE_PULLING.search(pull.text)
        if m is None or m.group("image") in done:
            continue
        disk = v.first(NODE_DISK_FULL, after=pull.n)
        if disk is None:
            continue
        summary = (
            f"The pull of image {m.group('image')} (line {pull.n}) never completed: the node ran out of "
            f"disk while unpacking it (line {disk.n}): {disk.text.strip()[:160]}"
        )
        return [
            finding("image_pull", 0.85, summary, [disk, pull], pattern=NODE_DISK_FULL, analyzer="image_pull")
        ]
    return []


def _docker_pull_unfinished(obs: Observation) -> list[Finding]:
    """docker run found no local copy of the image and went to pull it, and nothing after it says the
    pull completed (docker prints that before the container's program runs) or a start completed."""
    v = view(obs)
    for ln in v.grep(DOCKER_NOT_LOCAL):
        if v.first(DOCKER_PULLED, after=ln.n) or started_between(v, after=ln.n, phases=UP_PHASES):
            continue
        m = DOCKER_NOT_LOCAL.search(ln.text)
        image = m.group("image") if m else "?"
        summary = (
            f"docker found no local copy of image {image} (line {ln.n}) and nothing after it shows a pull "
            "completing: the image is not where the host looks for it."
        )
        return [finding("image_pull", 0.6, summary, [ln], pattern=DOCKER_NOT_LOCAL, analyzer="image_pull")]
    return []


def analyze(obs: Observation) -> list[Finding]:
    return (
        simple(
            obs,
            category="image_pull",
            pattern=IMAGE_PULL,
            summary="The container image could not be pulled (line {line}): {text}",
            confidence=0.92,
        )
        or _pull_out_of_disk(obs)
        or _docker_pull_unfinished(obs)
    )
