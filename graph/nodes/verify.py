"""verify: the new revision becomes Ready within a deadline, /health passes, a smoke completion works.

Any of the three failing sends the loop to rollback, with the reasons kept for the report.
"""

from __future__ import annotations

import time
from typing import Any

from langchain_core.runnables import RunnableConfig

from graph.config import Configuration
from graph.state import ApplyResult, SREState, Verification, event
from graph.world import World
from mcp_tools.errors import short_error


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
        return _done(v, started)

    deadline = started + cfg.verify_deadline_s
    info: Any = None
    while True:
        try:
            info = world.get_service(name)
        except Exception as e:
            v.reasons.append(f"could not read the service: {short_error(e)}")
            info = None
        if info is not None and info.latest_ready_revision == applied.revision:
            v.ready = True
            break
        failed = _revision_failed(info, applied.revision) if info is not None else None
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
        return _done(v, started)

    base_url = info.uri or cfg.vllm_base_url
    if not base_url:
        v.reasons.append("the service has no URL to check")
        return _done(v, started)
    ep = world.endpoint(base_url)

    def healthy() -> bool:
        # A fresh revision may answer 503 for a moment: a failing /health is retried like an error.
        if not ep.health():
            raise RuntimeError("/health did not answer 200")
        return True

    try:
        v.health = world.retrying(healthy, "vLLM /health")
    except Exception as e:
        v.health = False
        v.reasons.append(f"/health failed after {cfg.retries} attempts: {short_error(e)}")
        return _done(v, started)
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
    v.ok = bool(v.ready and v.health and v.smoke and v.progress is not False)
    return _done(v, started)


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


def _done(v: Verification, started: float) -> dict[str, Any]:
    v.seconds = round(time.monotonic() - started, 3)
    if v.ok:
        msg = f"verified: revision {v.revision} Ready, /health ok, smoke completion ok"
        msg += f"{', tokens generated' if v.progress else ''} ({v.seconds:.1f} s)"
    else:
        msg = "verification failed: " + "; ".join(v.reasons)
    return {"verification": v.model_dump(mode="json"), "timeline": event("verify", msg)}
