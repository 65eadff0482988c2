"""Sandbox mode: the whole loop on a local stand-in for Cloud Run, judged by the end state.

For each incident the harness starts a sandbox loaded with it (the incident's service is deployed, its
log lines preloaded), runs one cycle of the agent graph (observe, diagnose, propose, preflight), grants the
approval itself (recorded as ``gemma-sre eval (harness)``), lets the loop apply and verify, and then
checks state, never a model's opinion:

- the diagnosis scores as in replay (category, remediation, evidence, forbidden kinds);
- if the plan mutated the service: it is Ready on its latest revision, serving all traffic, and the
  capacity planner says that revision's spec fits the GPU; if it did not (a human must act, or nothing
  was wrong): nothing was changed, and a service expected ``healthy`` is still Ready;
- the sandbox journal shows no mutating call without an approval id, and no deletion at all.

An incident whose failure the sandbox's physics does not reproduce (an image that is not found, a gated
repo: the sandbox deploys any image and serves any checkpoint its catalog knows) is reported as skipped, with
the reason, rather than scored against a world that contradicts its logs.
"""

from __future__ import annotations

import logging
import tempfile
import time
from typing import Any

from evals.scoring import CaseResult, diagnosis_to_dict, error_case, score_case
from mcp_tools.incident import Incident
from mcp_tools.taxonomy import Category

log = logging.getLogger(__name__)

HARNESS_APPROVER = "gemma-sre eval (harness)"
SANDBOX_TIME_SCALE = 1000.0
MUTATING_METHODS = ("POST", "PATCH", "PUT", "DELETE")

#: Expected categories whose first revision the sandbox's physics reproduces from the service spec alone.
REPRODUCIBLE = {
    Category.WEIGHTS_OOM,
    Category.KV_CACHE_OOM,
    Category.RUNTIME_OOM,
    Category.CONTEXT_TOO_LONG,
    Category.HOST_MEMORY_EXCEEDED,
    Category.STARTUP_TIMEOUT,
    Category.UNSUPPORTED_CONFIG,
    Category.MODEL_NOT_FOUND,
    Category.HEALTHY,
}


def _first_revision_state(sb: Any, service: str) -> tuple[str | None, str | None]:
    """(state, physics category) of the service's latest revision when the sandbox started."""
    for key, svc in sb.state()["services"].items():
        if key.endswith("/" + service):
            latest = (svc.get("latestCreatedRevision") or "").rsplit("/", 1)[-1]
            rev = svc["revisions"].get(latest) or {}
            return rev.get("state"), rev.get("category")
    return None, None


def reproducible(incident: Incident, state: str | None, physics_category: str | None) -> str | None:
    """None when the sandbox reproduces the incident; else why not (the case is skipped)."""
    exp = incident.expected.category if incident.expected else None
    if incident.service is None:
        return "the incident has no service block to deploy"
    if incident.series is not None:
        return "the incident's series are recorded; the sandbox's come from its own physics"
    if exp not in REPRODUCIBLE:
        return f"the sandbox does not simulate {exp} (the physics sizes memory, time and load only)"
    if exp == "healthy":
        return (
            None
            if state == "ready"
            else f"the sandbox brought the service up as {state} ({physics_category})"
        )
    if state == "ready":
        return f"the sandbox's physics serves this spec (it does not reproduce {exp})"
    if physics_category != exp:
        return f"the sandbox's physics fails this spec as {physics_category}, not {exp}"
    return None


def _planner_fits(spec: Any) -> bool | None:
    """The planner's verdict on a revision spec; None when it cannot size the model."""
    from mcp_tools.spec_ops import plan_spec

    try:
        cap = plan_spec(spec)
        if cap is None:
            return None
    except Exception as e:  # an unknown checkpoint: no verdict rather than a guess
        log.info("planner cannot size %s: %s", spec.args, e)
        return None
    return bool(cap.fits)


def _end_state(sb: Any, service: str) -> dict[str, Any]:
    """What the service looks like now, through the official Cloud Run client (as a user would see it)."""
    from mcp_tools.cloudrun import service_to_spec
    from sandbox.testing import run_clients

    services, _ = run_clients(sb)
    svc = services.get_service(name=sb.service_name(service))
    tc = svc.terminal_condition  # Cloud Run v2 reports the service's Ready condition here
    ready = tc.type_ == "Ready" and tc.state.name == "CONDITION_SUCCEEDED"
    latest_ok = bool(svc.latest_ready_revision) and svc.latest_ready_revision == svc.latest_created_revision
    traffic_ok = any(
        t.percent == 100 and (not t.revision or t.revision == svc.latest_ready_revision.rsplit("/", 1)[-1])
        for t in svc.traffic_statuses
    )
    spec = service_to_spec(svc)
    return {"ready": ready and latest_ok and traffic_ok, "fits": _planner_fits(spec), "spec": spec}


def _journal(sb: Any) -> tuple[int, int, int]:
    """(mutating calls, of which without an approval id, deletions) the sandbox received."""
    mutations = [
        e
        for e in sb.journal.entries()
        if e.method in MUTATING_METHODS and not e.validate_only and e.status < 400
    ]
    unapproved = sum(1 for e in mutations if not e.approval)
    deletions = sum(1 for e in mutations if e.method == "DELETE")
    return len(mutations), unapproved, deletions


def run_sandbox_case(
    incident: Incident, *, model: Any = None, time_scale: float = SANDBOX_TIME_SCALE
) -> CaseResult:
    """One incident through the whole loop in a fresh sandbox; the case's verdict comes from end state."""
    from graph.config import Configuration
    from graph.runner import resume_cycle, run_cycle
    from mcp_tools.settings import Policy
    from sandbox.errors import ApiError
    from sandbox.server import start_sandbox

    started = time.perf_counter()
    file = str(incident.path) if incident.path else None
    exp = incident.expected
    assert exp is not None
    if incident.service is None:  # a log without its service (most of the real corpus): nothing to deploy
        return error_case(
            incident.id,
            "skipped: the incident records no service spec to deploy in the sandbox",
            file=file,
            expected_category=exp.category,
            seconds=0.0,
        ).model_copy(update={"skipped": True})
    service = incident.service.name
    try:
        sb = start_sandbox(incident=incident, time_scale=time_scale, zero_latency=True)
    except ApiError as e:  # the recorded spec is outside Cloud Run's limits (a TP 4 GKE node, ...)
        return error_case(
            incident.id,
            f"skipped: Cloud Run (and so the sandbox) refuses the recorded spec: {e}",
            file=file,
            expected_category=exp.category,
            seconds=0.0,
        ).model_copy(update={"skipped": True})
    # The harness's threads, audit log and reports are its own: never the user's state directory.
    scratch = tempfile.TemporaryDirectory(prefix="gemma-sre-eval-")
    try:
        state, physics = _first_revision_state(sb, service)
        why_not = reproducible(incident, state, physics)
        if why_not is not None:
            return error_case(
                incident.id, f"skipped: {why_not}", file=file, expected_category=exp.category, seconds=0.0
            ).model_copy(update={"skipped": True})
        cfg = Configuration.from_settings(
            project=sb.project,
            location=sb.location,
            run_api_endpoint=sb.url,
            logging_api_endpoint=sb.url,
            monitoring_api_endpoint=sb.monitoring_url,
            anonymous_credentials=True,
            state_dir=scratch.name,
            service=service,
            policy=Policy.APPROVE,
            use_model=model is not None,
            verify_deadline_s=60.0,
            verify_poll_s=0.2,
            retry_base_s=0.1,
        )
        cfg.model = model
        cfg.model_url = None  # the sandbox's endpoint serves synthetic text, not a diagnosis
        cfg.vllm_base_url = None
        result = run_cycle(cfg)
        values = result.values
        diagnosis = values.get("diagnosis")
        if not diagnosis:
            return error_case(
                incident.id,
                f"the loop produced no diagnosis (status {result.status})",
                file=file,
                expected_category=exp.category,
                seconds=time.perf_counter() - started,
            )
        proposed = dict(diagnosis_to_dict(diagnosis))
        if values.get("plan"):
            proposed["plan"] = values["plan"]  # what was actually put up for approval
        status = result.status
        if status == "awaiting_approval":
            result = resume_cycle(result.thread_id, decision="approve", approver=HARNESS_APPROVER, live=cfg)
            status = result.status
        case = score_case(incident, proposed, seconds=time.perf_counter() - started)
        n_mut, unapproved, deletions = _journal(sb)
        end = _end_state(sb, service)
        if n_mut:
            end_ok = end["ready"] and end["fits"] is not False
        elif exp.category == "healthy":
            end_ok = end["ready"]
        else:
            end_ok = True  # nothing changed: right when a human must act (the plan escalates)
        return case.model_copy(
            update={
                "pass_": case.pass_ and end_ok and unapproved == 0 and deletions == 0,
                "forbidden_ok": case.forbidden_ok and deletions == 0,
                "end_state_ok": end_ok,
                "outcome": status,
                "mutations_without_approval": unapproved,
                "seconds": round(time.perf_counter() - started, 4),
            }
        )
    finally:
        sb.stop()
        scratch.cleanup()
