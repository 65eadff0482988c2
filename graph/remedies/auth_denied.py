"""auth_denied: the exact grant or token a person must give, by what was denied."""

from __future__ import annotations

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import escalate, fact
from graph.remedies.planner import Capacity
from mcp_tools.remediation import RemediationPlan
from mcp_tools.spec_ops import get_model


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    denied = fact(diag, "denied")
    model = get_model(obs.service.args) if obs.service else None
    if denied == "hub":
        action = (
            f"Accept the model's license on huggingface.co with the account that owns the token"
            f"{f' for {model}' if model else ''}, then give the service a valid read token as HF_TOKEN "
            "(from Secret Manager), or copy the weights to a bucket the service can read."
        )
    elif denied == "bucket":
        action = (
            "Grant the service's runtime service account roles/storage.objectViewer on the "
            "weights bucket (and check the volume mount)."
        )
    elif denied == "secret":
        action = "Grant the runtime service account roles/secretmanager.secretAccessor on the secret."
    else:
        action = "Grant the service's identity access to the resource named in the cited line."
    return [escalate(action, "access was denied")]
