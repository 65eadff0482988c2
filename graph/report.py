"""The incident report: Markdown for people, JSON for tools. Secrets are redacted in both.

Beside the timeline, evidence, diagnosis, plan, decision and outcome, the report carries what an
on-call engineer hands on (``incident_section``): project, region, service and URL; the impact window
(first failing line, detection, resolution, duration); links to the Cloud Logging query and the
service's revisions in the console; every ranked option and why it was or was not chosen; the
predicted effect in words; and the follow-ups (a deploy config to update, a quality to check).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from graph.canary_report import canary_section
from graph.state import Outcome, SREState, now_iso
from mcp_tools.settings import Policy


def outcome_of(state: SREState, policy: Policy) -> Outcome:
    diag = state.get("diagnosis") or {}
    category = diag.get("category", "unknown")
    pf = state.get("preflight") or {}
    approval = state.get("approval") or {}
    v = state.get("verification") or {}
    rb = state.get("rollback") or {}
    applied = state.get("applied") or {}
    if category == "healthy":
        return Outcome(status="healthy", summary="The service is healthy; nothing to do.")
    if policy is Policy.READ_ONLY:
        return Outcome(status="diagnosed", summary=f"Diagnosed {category} (read-only: nothing applied).")
    if policy is Policy.SUGGEST:
        ok = "accepted" if pf.get("ok") else "refused"
        return Outcome(
            status="suggested", summary=f"Diagnosed {category}; plan {ok} by preflight, not applied."
        )
    if not approval:
        if pf and not pf.get("ok"):
            notes = "; ".join(pf.get("notes") or []) or "preflight refused the plan"
            return Outcome(status="no_action", summary=f"Diagnosed {category}; no plan offered: {notes}.")
        return Outcome(
            status="no_action",
            summary=f"Diagnosed {category}; the plan changes nothing automatically (a person must act).",
        )
    if approval.get("decision") != "approve":
        return Outcome(status="rejected", summary=f"Rejected by {approval.get('approver')}; nothing applied.")
    if v.get("ok"):
        return Outcome(
            status="fixed",
            summary=f"Applied revision {applied.get('revision')} after approval by "
            f"{approval.get('approver')}; verified.",
        )
    reasons = "; ".join(v.get("reasons") or []) or "verification failed"
    if v.get("undetermined"):
        return Outcome(
            status="undetermined",
            summary=f"Revision {applied.get('revision')} was applied, but could not be verified ({reasons}); "
            "nothing was rolled back: a person must check the service.",
        )
    if rb.get("ok"):
        return Outcome(
            status="rolled_back",
            summary=f"The fix did not verify ({reasons}); traffic is back on {rb.get('to_revision')}.",
        )
    return Outcome(
        status="failed",
        summary=f"The fix did not verify ({reasons}); {rb.get('error') or 'no rollback was made'}.",
    )


def _redact(text: str) -> str:
    from mcp_tools.redact import redact

    return redact(text)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_json(state: SREState, outcome: Outcome) -> dict[str, Any]:
    """The report as one JSON document (redacted)."""
    obs_summary = dict(state.get("observation_summary") or {})
    doc = {
        "thread_id": (state.get("meta") or {}).get("thread_id"),
        "service": obs_summary.get("service")
        or ((state.get("meta") or {}).get("config") or {}).get("service"),
        "cycle": state.get("cycle"),
        "outcome": outcome.model_dump(mode="json"),
        "observation": obs_summary,
        "diagnosis": state.get("diagnosis"),
        "plan": state.get("plan"),
        "preflight": state.get("preflight"),
        "approval": state.get("approval"),
        "applied": state.get("applied"),
        "verification": state.get("verification"),
        "rollback": state.get("rollback"),
        "timeline": state.get("timeline") or [],
        "incident": incident_section(state, outcome),
    }
    return json.loads(_redact(json.dumps(doc, default=str)))


def render_markdown(state: SREState, outcome: Outcome) -> str:
    doc = render_json(state, outcome)
    diag = doc.get("diagnosis") or {}
    obs = doc.get("observation") or {}
    plan = doc.get("plan") or {}
    pf = doc.get("preflight") or {}
    out: list[str] = []
    add = out.append
    add(f"# Incident report: {doc.get('service') or 'service'}")
    add("")
    add(f"**Outcome: {outcome.status}.** {outcome.summary}")
    add("")
    add(f"Thread `{doc.get('thread_id')}`, cycle {doc.get('cycle')}.")
    add("")
    out += incident_markdown(doc.get("incident") or {})
    add("## Timeline")
    add("")
    add("| time (UTC) | step | what happened |")
    add("|---|---|---|")
    for e in doc.get("timeline") or []:
        add(f"| {_cell(e.get('at', ''))} | {_cell(e.get('node', ''))} | {_cell(e.get('message', ''))} |")
    add("")
    add("## Evidence")
    add("")
    add(
        f"Observed {obs.get('log_lines', 0)} log lines ({obs.get('since')} to {obs.get('until')}); "
        f"/health: {obs.get('health')}; latest ready revision: {obs.get('latest_ready_revision') or 'none'}; "
        f"latest created: {obs.get('latest_created_revision') or 'none'}."
    )
    out += not_read_section(obs, diag)
    evidence = diag.get("evidence") or []
    if evidence:
        add("")
        add("Cited log lines:")
        add("")
        add("```")
        for ev in evidence:
            add(f"[line {ev.get('line')}] {ev.get('text')}")
        add("```")
    add("")
    add("## Diagnosis")
    add("")
    add(f"- category: `{diag.get('category', 'unknown')}` (confidence {diag.get('confidence', 0)})")
    model_used = diag.get("model_used")
    add(f"- model: {model_used or 'none (deterministic analyzers only)'}")
    if diag.get("summary"):
        add("")
        add(str(diag["summary"]))
    for note in diag.get("notes") or []:
        add(f"- note: {note}")
    add("")
    add("## Plan")
    add("")
    steps = plan.get("steps") or []
    if not steps:
        add("No steps.")
    for i, s in enumerate(steps, 1):
        add(f"{i}. `{s.get('kind')}` {json.dumps(s.get('change') or {}, sort_keys=True)}: {s.get('why', '')}")
        if s.get("predicted"):
            add(f"   - predicted: {json.dumps(s['predicted'], sort_keys=True)}")
    add("")
    add(f"Preflight: {'accepted' if pf.get('ok') else 'refused'}.")
    for n in pf.get("notes") or []:
        add(f"- {n}")
    if pf.get("diff"):
        add("")
        add("```diff")
        add(str(pf["diff"]).rstrip("\n"))
        add("```")
    add("")
    add("## Decision")
    add("")
    ap = doc.get("approval")
    if ap:
        add(
            f"{'Approved' if ap.get('decision') == 'approve' else 'Rejected'} by **{ap.get('approver')}** "
            + (f"(note: {ap['note']}) " if ap.get("note") else "")
            + f"at {ap.get('at')} (approval id `{ap.get('approval_id')}`, policy {ap.get('policy')})."
        )
        if ap.get("reason"):
            add(f"Reason: {ap['reason']}")
    else:
        add("No decision was asked for.")
    applied = doc.get("applied")
    if applied:
        add("")
        add("## Outcome")
        add("")
        add(
            f"- applied: revision {applied.get('revision') or 'none'}"
            + (f" ({applied.get('error')})" if applied.get("error") else "")
            + (" (already applied before a restart; sent once)" if applied.get("already_applied") else "")
        )
        v = doc.get("verification") or {}
        if v:
            add(
                f"- verification: {'passed' if v.get('ok') else 'failed'} (ready {v.get('ready')}, "
                f"/health {v.get('health')}, smoke {v.get('smoke')}, {v.get('seconds')} s)"
            )
            for r in v.get("reasons") or []:
                add(f"  - {r}")
        rb = doc.get("rollback") or {}
        if rb:
            state_txt = "done" if rb.get("ok") else "not done"
            add(
                f"- rollback to {rb.get('to_revision') or '(none)'}: {state_txt}"
                + (f" ({rb.get('error')})" if rb.get("error") else "")
            )
        out += canary_section(doc.get("verification"))
    add("")
    return "\n".join(out)


#: What each source of an observation is, for a person reading the report.
_SOURCE_TEXT = {
    "logs": "logs: the Cloud Logging entries of the service",
    "service": "service spec, revisions and their conditions (Cloud Run Admin API)",
    "health": "/health of the vLLM endpoint",
    "metrics": "/metrics of the vLLM endpoint (Prometheus text)",
    "monitoring": "time series from Cloud Monitoring (Cloud Run's and vLLM's metrics over the window)",
}
_REASON_TEXT = {
    "error": "the read failed",
    "timeout": "no answer in time",
    "deadline": "the cycle's deadline ran out",
    "no_url": "nothing to read from",
}


def not_read_section(obs: dict[str, Any], diag: dict[str, Any]) -> list[str]:
    """The report's "Not read" lines: each source the observation could not read, why, for how long,
    and what that did to the diagnosis. Empty when everything was read."""
    blind = list(obs.get("blind") or [])
    lines = list(obs.get("unread") or [])
    if not blind and not lines:
        return []
    out = ["", "### Not read", "", "Nothing below was read; nothing in this report was inferred from it:", ""]
    if blind:
        for b in blind:
            src = str(b.get("source"))
            what = _SOURCE_TEXT.get(src, src)
            if src == "logs" and obs.get("since"):
                what += f" from {obs.get('since')} to {obs.get('until')}"
            took = f", after {b['seconds']} s" if b.get("seconds") is not None else ""
            reason = _REASON_TEXT.get(str(b.get("reason")), str(b.get("reason")))
            out.append(f"- {what} ({reason}{took}): {b.get('why')}")
    else:
        out += [f"- {u}" for u in lines]
    logs_blind = any(b.get("source") == "logs" for b in blind) or any(
        str(u).startswith("logs:") for u in lines
    )
    if logs_blind and diag.get("category") == "unknown":
        out += ["", "Without the logs the diagnosis is `unknown`: nothing else observed proves a cause."]
    elif logs_blind:
        out += ["", f"Without the logs, `{diag.get('category')}` stands on evidence that is not a log line."]
    out += ["", "A degraded observation is never acted on without a person (the auto policy asks instead)."]
    return out


def report_basename(service: str, thread_id: str, cycle: int) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{service}-{thread_id}-c{cycle}").strip("-")
    return safe[:120] or "report"


# --- what an on-call engineer hands on: where, when, links, alternatives, effect, follow-ups -------

CONSOLE = "https://console.cloud.google.com"


def _parse_time(text: Any) -> datetime | None:
    if not text:
        return None
    try:
        t = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _iso(t: datetime | None) -> str | None:
    return t.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z") if t else None


def duration_text(seconds: float) -> str:
    """``3 h 5 min``, ``12 min 4 s``, ``41 s``."""
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{h} h {m} min"
    if m:
        return f"{m} min {sec} s"
    return f"{sec} s"


def _event_at(state: SREState, node: str) -> datetime | None:
    for e in state.get("timeline") or []:
        if e.get("node") == node:
            return _parse_time(e.get("at"))
    return None


def impact_window(state: SREState, outcome: Outcome) -> dict[str, Any]:
    """First failing line (the earliest cited log line), detection (the diagnosis), resolution (the
    verified fix, or the rollback that restored service) and the duration between first and last."""
    logs = (state.get("observation") or {}).get("logs") or []
    cited = sorted(
        int(e.get("line") or 0)
        for e in (state.get("diagnosis") or {}).get("evidence") or []
        if 0 < int(e.get("line") or 0) <= len(logs)
    )
    first: dict[str, Any] | None = None
    if cited:
        ln = logs[cited[0] - 1]
        first = {"line": cited[0], "timestamp": ln.get("timestamp"), "severity": ln.get("severity")}
    detected = _event_at(state, "diagnose")
    resolved = None
    if outcome.status == "fixed":
        resolved = _event_at(state, "verify")
    elif outcome.status == "rolled_back":
        resolved = _event_at(state, "rollback")
    start = _parse_time(first.get("timestamp")) if first else None
    end = resolved or _parse_time(now_iso())
    out: dict[str, Any] = {
        "first_failing_line": first,
        "detected_at": _iso(detected),
        "resolved_at": _iso(resolved),
        "open": resolved is None,
        "duration_s": None,
    }
    if start is not None and end is not None and end >= start:
        out["duration_s"] = round((end - start).total_seconds(), 1)
    return out


def console_links(
    project: str | None, region: str | None, service: str, obs: dict[str, Any]
) -> dict[str, str]:
    """The Cloud Logging query of the observed window and the service's revisions, in the console."""
    from urllib.parse import quote

    if not project or not service:
        return {}
    links: dict[str, str] = {}
    since, until = _parse_time(obs.get("since")), _parse_time(obs.get("until"))
    if since is not None:
        from mcp_tools.cloudlogging import build_filter

        try:
            query = build_filter(
                service, since=since, until=until if until and until > since else None, location=region
            )
        except Exception:  # noqa: BLE001 - a name the filter builder refuses gets no link
            query = ""
        if query:
            # The time range goes in the URL (the console's own), not twice in the query.
            query = "\n".join(q for q in query.splitlines() if not q.startswith("timestamp"))
            rng = f";timeRange={quote(_iso(since) or '', safe='')}%2F{quote(_iso(until) or '', safe='')}"
            links["logs"] = (
                f"{CONSOLE}/logs/query;query={quote(query, safe='')}{rng if until else ''}"
                f"?project={quote(project, safe='')}"
            )
    if region:
        links["revisions"] = (
            f"{CONSOLE}/run/detail/{quote(region, safe='')}/{quote(service, safe='')}/revisions"
            f"?project={quote(project, safe='')}"
        )
    return links


def alternatives_considered(state: SREState) -> list[dict[str, Any]]:
    """Every ranked option: chosen or not, and why not (preflight's reasons, or its rank)."""
    from graph.preflight import plan_text, why_not
    from mcp_tools.remediation import RemediationPlan

    approval = state.get("approval") or {}
    chosen = approval.get("option") or (state.get("preflight") or {}).get("option")
    offered = approval.get("offered_option") or chosen
    by = approval.get("approver")
    out: list[dict[str, Any]] = []
    for i, raw in enumerate(state.get("ranked") or [], start=1):
        p = RemediationPlan.model_validate(raw)
        reasons = why_not(p) if not p.preflight.ok else []
        if i == chosen:
            if approval.get("option"):
                why = f"chosen by {by} (approve --option {i}) over the offered option {offered}"
            elif approval.get("decision") == "approve":
                why = f"offered (the first that passes preflight) and approved by {by}"
            else:
                why = "offered (the first that passes preflight)"
        elif reasons:
            why = "failed preflight: " + "; ".join(reasons)
        elif i == offered:
            why = f"offered first (it passes preflight), but {by} chose option {chosen}"
        elif chosen is not None and i < chosen:
            why = f"passes preflight and ranked higher; {by} chose option {chosen}"
        else:
            why = f"passes preflight, ranked below option {chosen}" if chosen else "passes preflight"
        out.append(
            {
                "rank": i,
                "steps": plan_text(p),
                "passed_preflight": p.preflight.ok,
                "chosen": i == chosen,
                "why": why,
                "preflight_reasons": reasons,
            }
        )
    return out


def predicted_effect(state: SREState) -> str:
    """What the plan is predicted to do, in words (the planner's figures where it has them)."""
    from mcp_tools.remediation import RemediationPlan

    plan = RemediationPlan.model_validate(state.get("plan") or {})
    if not plan.steps:
        return "No change was planned."
    for s in plan.steps:
        if s.kind.value == "rollback":
            return (
                f"All traffic goes back to revision {s.change.get('revision')}, the last one that was Ready."
            )
    for s in plan.steps:
        p = s.predicted or {}
        if p.get("weights_gib") is not None:
            fits = "the model fits the GPU" if p.get("fits") else "the model still does NOT fit the GPU"
            kv = p.get("kv_cache_tokens")
            kv_text = f" and leave room for a KV cache of {int(kv):,} tokens" if kv is not None else ""
            return (
                "The capacity planner predicts that the weights take "
                f"{float(p['weights_gib']):.1f} GiB of GPU memory{kv_text}: {fits}."
            )
    if not plan.mutates:
        return "Nothing changes in the service: a person must act (see the plan)."
    return "; ".join(s.why for s in plan.steps if s.why) or "The service is changed as the plan says."


def follow_ups(state: SREState, outcome: Outcome) -> list[str]:
    """What is left to do after this incident, for whoever takes it over."""
    from mcp_tools.remediation import RemediationPlan

    plan = RemediationPlan.model_validate(state.get("plan") or {})
    applied = bool((state.get("applied") or {}).get("revision"))
    out: list[str] = []
    kinds = {s.kind.value for s in plan.steps}
    changes: dict[str, Any] = {}
    for s in plan.steps:
        changes.update(s.change)
    if outcome.status == "fixed" and applied and kinds - {"rollback", "escalate"}:
        out.append(
            "Update your deploy config (the service YAML, Terraform or `gcloud run deploy` flags) with this "
            "change, or the next deploy reverts this."
        )
    if outcome.status == "fixed" and "rollback" in kinds:
        failed = (state.get("observation_summary") or {}).get("latest_created_revision")
        out.append(
            f"The service's template is still the failed revision's ({failed or 'the latest created'}): fix "
            "the deploy config before the next deploy, or it fails the same way."
        )
    if str(changes.get("--quantization") or "").lower() == "fp8" and "set_vllm_args" in kinds:
        out.append(
            "Online fp8 quantization changes output quality: compare answers on your own evaluation set, or "
            "serve a pre-quantized checkpoint (FP8 or QAT w4a16) once one can be reached from the service."
        )
    if "set_model" in kinds:
        out.append(
            f"The service now serves another checkpoint ({changes.get('model')}): check its output quality "
            "and that every instance can reach it."
        )
    if "gpu_type" in changes:
        out.append(f"The service now runs on {changes['gpu_type']}: check its cost and the region's quota.")
    if outcome.status in ("rolled_back", "failed"):
        out.append("The fix did not verify: the incident is still open; see the verification reasons above.")
    if outcome.status == "undetermined":
        out.append(
            "The fix could not be verified (the service could not be read) and was not rolled back: check "
            "the service's traffic and health, then roll back by hand if the fix is bad."
        )
    if outcome.status in ("rejected", "no_action"):
        out.append("Nothing was applied: the incident is still open until a person acts.")
    for s in plan.steps:
        if s.kind.value == "escalate" and s.change.get("human_action"):
            out.append(str(s.change["human_action"]))
    return out


def incident_section(state: SREState, outcome: Outcome) -> dict[str, Any]:
    """The report's ``incident`` block: where, when, links, alternatives, predicted effect, follow-ups."""
    cfg = (state.get("meta") or {}).get("config") or {}
    obs = state.get("observation_summary") or {}
    service = str(obs.get("service") or cfg.get("service") or "")
    project, region = cfg.get("project"), cfg.get("location")
    return {
        "project": project,
        "region": region,
        "service": service,
        "url": obs.get("uri"),
        "impact": impact_window(state, outcome),
        "links": console_links(project, region, service, obs),
        "alternatives": alternatives_considered(state),
        "predicted_effect": predicted_effect(state),
        "follow_ups": follow_ups(state, outcome),
    }


def incident_markdown(inc: dict[str, Any]) -> list[str]:
    out = ["## Incident", ""]
    out.append(
        f"- project `{inc.get('project') or 'unknown'}`, region `{inc.get('region') or 'unknown'}`, "
        f"service `{inc.get('service') or 'unknown'}`"
    )
    if inc.get("url"):
        out.append(f"- URL: {inc['url']}")
    imp = inc.get("impact") or {}
    first = imp.get("first_failing_line") or {}
    out += ["", "### Impact window", ""]
    if first:
        out.append(
            f"- first failing line: line {first.get('line')} at {first.get('timestamp') or 'unknown time'}"
        )
    else:
        out.append("- first failing line: none cited")
    out.append(f"- detected: {imp.get('detected_at') or 'unknown'}")
    out.append(f"- resolved: {imp.get('resolved_at') or 'not resolved'}")
    if imp.get("duration_s") is not None:
        so_far = " so far (still open)" if imp.get("open") else ""
        out.append(f"- duration: {duration_text(float(imp['duration_s']))}{so_far}")
    links = inc.get("links") or {}
    if links:
        out += ["", "### Links", ""]
        if links.get("logs"):
            out.append(f"- [Cloud Logging query for the observed window]({links['logs']})")
        if links.get("revisions"):
            out.append(f"- [Cloud Run revisions of {inc.get('service')}]({links['revisions']})")
    alts = inc.get("alternatives") or []
    if alts:
        out += ["", "### Alternatives considered", "", "| # | option | chosen | why |", "|---|---|---|---|"]
        for a in alts:
            chosen = "yes" if a["chosen"] else "no"
            out.append(f"| {a['rank']} | {_cell(a['steps'])} | {chosen} | {_cell(a['why'])} |")
    out += ["", "### Predicted effect", "", str(inc.get("predicted_effect") or "")]
    ups = inc.get("follow_ups") or []
    out += ["", "### Follow-ups", ""]
    out += [f"- {u}" for u in ups] or ["- none"]
    out.append("")
    return out
