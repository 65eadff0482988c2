"""context_too_long: --max-model-len at the model's limit, or a longer served context when it fits."""

from __future__ import annotations

import re

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import escalate, evidence_text
from graph.remedies.planner import Capacity, flags_option
from mcp_tools.remediation import RemediationPlan
from mcp_tools.spec_ops import round_max_model_len

_DERIVED = re.compile(r"derived max_model_len \((?:[^)]*?=)?\s*(\d+)")
_MAXCTX = re.compile(r"maximum context length is (\d+)")
_USER = re.compile(r"User-specified max_model_len \((\d+)\)")


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    text = evidence_text(diag)
    m = _DERIVED.search(text)
    limit = int(m.group(1)) if m else (cap.model.max_position_embeddings if cap.model else None)
    if _USER.search(text) or m:  # start-up: the flag is above the model's limit
        if limit:
            return [
                flags_option(
                    cap,
                    {"--max-model-len": int(limit)},
                    f"--max-model-len is above the model's {limit}-token limit",
                )
            ]
        return [escalate("Set --max-model-len at or below the model's max_position_embeddings.", text[:200])]
    # Requests longer than the served context.
    mc = _MAXCTX.search(text)
    served = int(mc.group(1)) if mc else (cap.flags.max_model_len if cap.flags else None)
    out = []
    if cap.ok and cap.plan is not None and served and cap.plan.model_context_limit > served:
        target = min(cap.plan.model_context_limit, max(served * 2, served + 4096))
        target = min(target, cap.plan.max_model_len_that_fits or target)
        if target > served:
            opt = flags_option(
                cap,
                {"--max-model-len": round_max_model_len(target)},
                "serve a longer context (the KV cache fits)",
            )
            if opt.steps[0].predicted and opt.steps[0].predicted.get("fits"):
                out.append(opt)
    out.append(
        escalate(
            f"Clients send requests longer than the served context ({served or '?'} tokens): shorten "
            "prompts or max_tokens on the client side, or approve a longer --max-model-len if the "
            "planner says it fits.",
            "requests exceed the context length",
        )
    )
    return out
