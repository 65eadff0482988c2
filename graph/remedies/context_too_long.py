"""context_too_long: --max-model-len at the model's limit, or a longer served context when it fits."""

from __future__ import annotations

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import escalate, fact
from graph.remedies.planner import Capacity, flags_option
from mcp_tools.remediation import RemediationPlan
from mcp_tools.spec_ops import round_max_model_len

#: A served context below this many tokens is a flag set short: a longer one is proposed blind.
BLIND_RAISE_FLOOR = 4096
#: A served context this long is not made longer blind: its KV cache is already more than most GPUs
#: hold for one model, so the planner or a person decides.
BLIND_RAISE_CEILING = 262_144


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    derived = fact(diag, "derived_max_model_len")
    limit = derived or (cap.model.max_position_embeddings if cap.model else None)
    # start-up: the flag is above the model's limit (its figures, or vLLM's check of it, failing a start)
    if fact(diag, "user_max_model_len") or derived or fact(diag, "failed_start"):
        asked = cap.flags.max_model_len if cap.flags else None
        if limit and (asked is None or limit < asked):
            return [
                flags_option(
                    cap,
                    {"--max-model-len": int(limit)},
                    f"--max-model-len is above the model's {limit}-token limit",
                )
            ]
        if asked:  # no limit known below what was asked: the engine derived a lower one than we know
            return [
                flags_option(
                    cap,
                    {"--max-model-len": None},
                    f"vLLM refused --max-model-len {asked} at start-up: without the flag it serves the "
                    "model's own limit",
                )
            ]
        return [
            escalate(
                "Set --max-model-len at or below the model's max_position_embeddings.",
                "--max-model-len is above the model's limit",
            )
        ]
    # Requests longer than the served context.
    served = fact(diag, "served_context") or (cap.flags.max_model_len if cap.flags else None)
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
    kv = fact(diag, "kv_cache_tokens")
    if not out and served and kv:
        # No plan from the planner (a model or GPU it does not know), but the server's own start said
        # how many tokens its KV cache holds: a context that one such request fits in, at most the
        # model's limit when it is known.
        need = max(fact(diag, "requested_tokens") or 0, served + 1)
        target = max(served * 2, -(-need // 1024) * 1024)
        target = min(target, round_max_model_len(kv), limit or target)
        if target >= need:
            out.append(
                flags_option(
                    cap,
                    {"--max-model-len": target},
                    f"serve a longer context: the KV cache holds {kv} tokens, a {target}-token request fits "
                    "(vLLM refuses to start above the model's own limit: the canary would show it)",
                )
            )
    need = fact(diag, "requested_tokens")
    if not out and served and need and need > served and not kv and not (cap.ok and cap.plan is not None):
        # Nothing can judge a longer context (no planner plan, no KV figure): a request a little over
        # the served context (at most twice it, or a context under BLIND_RAISE_FLOOR tokens, which any
        # GPU that loaded the model holds) is the flag set short; the canary shows whether the model
        # and the GPU take the longer one. Far over it, or on a context already BLIND_RAISE_CEILING
        # long, the requests are what to change.
        target = -(-max(need, min(BLIND_RAISE_FLOOR, 2 * need)) // 1024) * 1024  # up to a multiple of 1024
        near = need <= 2 * served or target <= BLIND_RAISE_FLOOR
        if served < BLIND_RAISE_CEILING and near:
            if limit and limit >= need:
                target = min(target, limit)
            out.append(
                flags_option(
                    cap,
                    {"--max-model-len": target},
                    f"requests need {need} tokens, {need - served} over the served {served}: serve {target} "
                    "(vLLM refuses a start above the model's own limit or past its KV cache: the canary "
                    "would show it, and the served context stays)",
                )
            )
    out.append(
        escalate(
            f"Clients send requests longer than the served context ({served or '?'} tokens): shorten "
            "prompts or max_tokens on the client side, or approve a longer --max-model-len if the "
            "planner says it fits.",
            "requests exceed the context length",
        )
    )
    return out
