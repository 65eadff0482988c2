"""verify: the new revision becomes Ready within a deadline, /health passes, a smoke completion works;
for a canary (``apply`` deployed the fix with a tag and no traffic), much more, on the tag's own URL:

1. Ready, ``/health``, a smoke completion;
2. vLLM's own "GPU KV cache size: N tokens" line of the revision (Cloud Logging) within the planner's
   ``kv_cache_tokens_range`` for its spec;
3. a short benchmark against the serving revision's baseline (apply measured it before the change):
   slower by more than ``canary_max_ratio``, or over an SLO the serving revision met, fails it;
4. traffic in ``canary_steps`` (e.g. 10, 50, 100 percent), each step watched for ``canary_hold_s``
   with the SLOs (TTFT p95, inter-token p95, error rate) measured on the service URL and the tag's.

A service verify cannot read at all, for a change made before this run, is no verdict: the result is
undetermined and goes to the report (a person), never to an automatic rollback. Any failure sends the
loop to rollback (traffic back to the serving revision, 100%), with the reasons
and the figures kept for the report. Resumable: the node re-runs from its top after a crash, reads
where the traffic is, and never sends a step that is already in place (nor goes back a step).
"""

from __future__ import annotations

import time
from typing import Any

from langchain_core.runnables import RunnableConfig

from graph.canary import carry_on
from graph.config import Configuration
from graph.state import ApplyResult, Approval, Canary, CanaryStep, SREState, Verification, event
from graph.world import World
from mcp_tools.errors import short_error
from mcp_tools.spec_ops import canary_split


def _revision_failed(info: Any, revision: str) -> str | None:
    """The failure message of ``revision`` if Cloud Run says it will not become Ready."""
    for r in getattr(info, "revisions", []) or []:
        if r.name != revision:
            continue
        for c in r.conditions:
            if c.type == "Ready" and c.state == "CONDITION_FAILED":
                return c.message or c.reason or "the revision failed to become Ready"
    return None


def verify(state: SREState, config: RunnableConfig) -> dict[str, Any]:
    cfg = Configuration.from_runnable_config(config)
    applied = ApplyResult.model_validate(state.get("applied") or {"key": ""})
    world = World(cfg)
    name = cfg.service
    started = time.monotonic()
    v = Verification(ok=False, revision=applied.revision)

    if not applied.revision:
        v.reasons.append(f"nothing was applied: {applied.error or 'no revision'}")
        return _done(v, started, cfg)
    # Made before this run, and apply could not read the service to carry it on: carried on here from
    # verify's own reads. A failed read is no verdict on the fix: never read by the deadline, the result
    # is undetermined (for a person), not a rollback of a change that may be rolled out and good.
    carry = applied.already_applied and bool(applied.error)
    updates: dict[str, Any] = {}
    read = False
    deadline = started + cfg.verify_deadline_s
    info: Any = None
    while True:
        try:
            info = world.get_service(name)
            read = True
        except Exception as e:
            why = f"could not read the service: {short_error(e)}"
            if why not in v.reasons:  # once, not once a poll
                v.reasons.append(why)
            info = None
        if info is not None and carry:
            applied = applied.model_copy(update={"error": None})
            carry_on(applied, info, applied.key, cfg)
            updates["applied"] = applied.model_dump(mode="json")
            carry = False
        if not read and applied.already_applied and time.monotonic() >= deadline:
            v.undetermined = True
            v.reasons.append(
                f"the service could not be read within {cfg.verify_deadline_s:.0f} s: whether revision "
                f"{applied.revision} works is undetermined; nothing was rolled back (a person must check)"
            )
            if applied.error:
                v.reasons.insert(0, applied.error)
            return _done(v, started, cfg)
        if info is not None and info.latest_ready_revision == applied.revision:
            v.ready = True
            break
        failed = _revision_failed(info, str(applied.revision)) if info is not None else None
        if failed:
            v.ready = False
            v.reasons.append(f"revision {applied.revision} did not become Ready: {failed}")
            break
        if time.monotonic() >= deadline:
            v.ready = False
            v.reasons.append(f"revision {applied.revision} not Ready after {cfg.verify_deadline_s:.0f} s")
            break
        time.sleep(cfg.verify_poll_s)

    if not v.ready:
        if applied.error and not any(applied.error in r for r in v.reasons):
            v.reasons.append(f"apply reported: {applied.error}")
        return {**updates, **_done(v, started, cfg)}

    if applied.canary and applied.tag:
        _canary(v, applied, info, world, cfg, state, config)
        return {**updates, **_done(v, started, cfg)}
    base_url = info.uri or cfg.vllm_base_url
    if not base_url:
        v.reasons.append("the service has no URL to check")
        return {**updates, **_done(v, started, cfg)}
    _health_and_smoke(v, world, cfg, base_url, state)
    v.ok = bool(v.ready and v.health and v.smoke and v.progress is not False)
    return {**updates, **_done(v, started, cfg)}


def _health_and_smoke(v: Verification, world: World, cfg: Configuration, url: str, state: SREState) -> bool:
    """/health (retried: a fresh revision may answer 503 for a moment), then a smoke completion, and for a
    hung engine's fix, tokens generated (not /health) as its proof."""
    ep = world.endpoint(url)

    def healthy() -> bool:
        if not ep.health():
            raise RuntimeError("/health did not answer 200")
        return True

    try:
        v.health = world.retrying(healthy, "vLLM /health")
    except Exception as e:
        v.health = False
        v.reasons.append(f"/health failed after {cfg.retries} attempts: {short_error(e)}")
        return False
    try:
        reply = world.retrying(
            lambda: ep.chat([{"role": "user", "content": cfg.smoke_prompt}], max_tokens=8), "smoke completion"
        )
        v.smoke = bool(_reply_text(reply).strip())
        if not v.smoke:
            v.reasons.append("the smoke completion returned no text")
    except Exception as e:
        v.smoke = False
        v.reasons.append(f"smoke completion failed: {short_error(e)}")
    if v.smoke and _judged_by_progress(state):
        from graph.progress import check_progress

        v.progress, why = check_progress(world, ep, cfg)
        if not v.progress:
            v.reasons.append(f"no token progress: {why}")
    return bool(v.smoke and v.progress is not False)


def _canary(
    v: Verification,
    applied: ApplyResult,
    info: Any,
    world: World,
    cfg: Configuration,
    state: SREState,
    config: RunnableConfig,
) -> None:
    """Check the fix on its tag's URL, then give it traffic step by step (``v.ok`` when it has it all)."""
    from graph.canary import breaches, kv_check, measure

    revision, tag = str(applied.revision), str(applied.tag)
    c = Canary(
        revision=revision,
        tag=tag,
        url=info.tag_uri(tag),
        baseline_revision=applied.previous_ready_revision,
        baseline=applied.baseline,
    )
    v.canary = c
    if not c.url or not c.baseline_revision or not info.uri:
        v.reasons.append(f"the canary has no URL to check (tag {tag}, service {info.uri or 'none'})")
        return
    if not _health_and_smoke(v, world, cfg, c.url, state):
        return
    rev = next((r for r in info.revisions if r.name == revision), None)
    if rev is not None:
        c.kv_cache_tokens, c.kv_predicted, c.kv_ok, c.kv_note = kv_check(world, cfg.service, rev)
        if c.kv_ok is False:
            v.reasons.append(f"the KV cache is not what the planner predicted: {c.kv_note}")
            return
    current = info.percent_of(revision)
    if current == 0:
        c.before = measure(c.url, cfg, "canary")
        found = breaches(None, c.before, c.baseline, cfg)
        if found:
            c.breached_at = 0
            v.reasons.append("with no traffic yet: " + "; ".join(found))
            return
    ctx = _Mutations(state, cfg, config)
    for percent in cfg.canary_steps:
        if percent < current:
            continue  # a resumed run: this step was passed before the restart
        step = CanaryStep(percent=percent, resumed=percent == current)
        c.steps.append(step)
        split = canary_split(c.baseline_revision, revision, percent)
        if step.resumed:
            # Made by a process killed before it recorded the step: recorded now (once: the audit log
            # keeps one record per event).
            ctx.audit(revision, split, percent, None)
        else:
            try:
                res = world.set_traffic(
                    cfg.service,
                    split,
                    tags={revision: tag},
                    approval_id=ctx.approval_id,
                    deadline_s=cfg.verify_deadline_s,
                )
                ok, error = bool(res.ready), None if res.ready else res.message
            except Exception as e:
                ok, error = False, short_error(e)
            ctx.audit(revision, split, percent, error)
            if not ok:
                c.breached_at = percent
                v.reasons.append(f"traffic could not be moved to {percent}%: {error}")
                return
            current = percent
        watch_until = time.monotonic() + cfg.canary_hold_s
        while True:
            step.service = measure(info.uri, cfg, "service")
            step.canary = measure(c.url, cfg, "canary")
            step.breaches = breaches(step.service, step.canary, c.baseline, cfg)
            left = watch_until - time.monotonic()
            if step.breaches or left <= 0:
                break
            time.sleep(min(left, max(0.5, cfg.canary_hold_s / 3)))
        if step.breaches:
            c.breached_at = percent
            v.reasons.append(f"at {percent}% of traffic: " + "; ".join(step.breaches))
            return
    c.promoted = True
    v.ok = True


class _Mutations:
    """The approval a canary's traffic steps are made under, and their audit records."""

    def __init__(self, state: SREState, cfg: Configuration, config: RunnableConfig) -> None:
        from graph.nodes.approve import thread_id_of

        self.approval = Approval.model_validate(state.get("approval") or {})
        self.approval_id = self.approval.approval_id
        self.cfg = cfg
        self.thread_id = thread_id_of(config)

    def audit(self, revision: str, split: dict[str, int], percent: int, error: str | None) -> None:
        from graph import audit

        audit.append(
            audit.AuditEvent(
                event="mutation" if error is None else "mutation_failed",
                thread_id=self.thread_id,
                service=self.cfg.service,
                actor="gemma-sre",
                approval_id=self.approval_id,
                what=f"canary traffic: {', '.join(f'{r} {p}%' for r, p in split.items())}",
                revision=revision,
                details={"canary_percent": percent, "error": error},
            ),
            state_dir=self.cfg.state_path,
        )


def _judged_by_progress(state: SREState) -> bool:
    """A fix of a hung engine is verified by tokens generated, not by /health."""
    return str((state.get("diagnosis") or {}).get("category")) == "engine_hung"


def _reply_text(reply: Any) -> str:
    if isinstance(reply, str):
        return reply
    for attr in ("text", "content"):
        value = getattr(reply, attr, None)
        if isinstance(value, str):
            return value
    if isinstance(reply, dict):
        try:
            return str(reply["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError):
            return str(reply.get("text") or reply.get("content") or "")
    return str(reply or "")


def _done(v: Verification, started: float, cfg: Configuration | None = None) -> dict[str, Any]:
    v.seconds = round(time.monotonic() - started, 3)
    c = v.canary
    if c is not None and cfg is not None and (cfg.canary_chart or cfg.canary_chart_path):
        from graph.canary_report import write_chart

        c.chart = write_chart(c, cfg)
    if v.ok and c is not None:
        steps = " -> ".join(f"{s.percent}%" for s in c.steps)
        msg = (
            f"verified: canary {v.revision} checked on its tag's URL, then given traffic {steps} with the "
            f"SLOs met at each step ({v.seconds:.1f} s)"
        )
    elif v.undetermined:
        msg = "verification undetermined: " + "; ".join(v.reasons)
    elif v.ok:
        msg = f"verified: revision {v.revision} Ready, /health ok, smoke completion ok"
        msg += f"{', tokens generated' if v.progress else ''} ({v.seconds:.1f} s)"
    else:
        msg = "verification failed: " + "; ".join(v.reasons)
    return {"verification": v.model_dump(mode="json"), "timeline": event("verify", msg)}
