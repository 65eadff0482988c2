"""The incident report: Markdown for people, JSON for tools. Secrets are redacted in both."""

from __future__ import annotations

import json
import re
from typing import Any

from graph.state import Outcome, SREState
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
    add("")
    return "\n".join(out)


#: What each source of an observation is, for a person reading the report.
_SOURCE_TEXT = {
    "logs": "logs: the Cloud Logging entries of the service",
    "service": "service spec, revisions and their conditions (Cloud Run Admin API)",
    "health": "/health of the vLLM endpoint",
    "metrics": "/metrics of the vLLM endpoint (Prometheus text)",
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
