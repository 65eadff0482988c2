"""image_pull: a person pushes the image or fixes the tag, and grants the service agent read access."""

from __future__ import annotations

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import escalate
from graph.remedies.planner import Capacity
from mcp_tools.remediation import RemediationPlan


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    image = obs.service.image if obs.service else None
    return [
        escalate(
            f"The image{f' {image}' if image else ''} cannot be pulled: push it or fix the tag, "
            "and grant the Cloud Run service agent roles/artifactregistry.reader on the repository.",
            "the container image is missing or not readable",
        )
    ]
