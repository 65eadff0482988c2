"""auth_denied: the exact grant or token a person must give, by what was denied."""

from __future__ import annotations

import re

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import escalate, evidence_text
from graph.remedies.planner import Capacity
from mcp_tools.remediation import RemediationPlan
from mcp_tools.spec_ops import get_model


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    text = evidence_text(diag)
    model = get_model(obs.service.args) if obs.service else None
    if re.search(r"gated|restricted|huggingface|401 Client|403 Client|hf_|token", text, re.IGNORECASE):
        action = (
            f"Accept the model's license on huggingface.co with the account that owns the token"
            f"{f' for {model}' if model else ''}, then give the service a valid read token as HF_TOKEN "
            "(from Secret Manager), or copy the weights to a bucket the service can read."
        )
    elif re.search(r"storage|bucket|gs://|/mnt/", text, re.IGNORECASE):
        action = (
            "Grant the service's runtime service account roles/storage.objectViewer on the "
            "weights bucket (and check the volume mount)."
        )
    elif re.search(r"secret", text, re.IGNORECASE):
        action = "Grant the runtime service account roles/secretmanager.secretAccessor on the secret."
    else:
        action = "Grant the service's identity access to the resource named in the cited line."
    return [escalate(action, "access was denied", evidence=text[:200])]
