"""Agent-level MCP tools: they need the graph's analyzers and diagnosis, which ``mcp_tools`` may not
import (DESIGN boundary), so they are registered onto the server from here.

``gemma-sre mcp`` builds the server with ``register_agent_tools``:

- ``suggest_sre_remediation``: diagnose an error message, or a live service (spec, revision
  conditions, recent logs, metrics), and return the root-cause category, cited evidence and a typed
  remediation plan. It never applies anything (applying goes through the two-step mutating tools).
- ``analyze_gpu_logs``: the deterministic analyzers over a service's recent logs (or pasted log text):
  every finding with the log lines it cites, plus the diagnosis.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated, Any

from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from mcp_tools.errors import UserError
from mcp_tools.server import READ_ONLY, ServerState, SharedResult, result, tool

if TYPE_CHECKING:
    from mcp.server.fastmcp import FastMCP

MAX_PASTED_CHARS = 200_000
MAX_LOG_LINES = 2000


class FindingOut(BaseModel):
    category: str
    confidence: float
    summary: str
    evidence: list[dict[str, Any]] = Field(default_factory=list)


class DiagnosisOut(SharedResult):
    source: str
    category: str
    confidence: float
    summary: str
    evidence: list[dict[str, Any]] = Field(default_factory=list)
    plan: dict[str, Any] = Field(default_factory=dict)
    model_used: str | None = None
    notes: list[str] = Field(default_factory=list)
    diff: str = ""  # the spec diff of the plan, when the service spec is known
    findings: list[FindingOut] = Field(default_factory=list)
    observation_unread: list[str] = Field(default_factory=list)  # what could not be read (live service)


def _lines_from_text(text: str) -> list[Any]:
    from mcp_tools.incident import LogLine

    if len(text) > MAX_PASTED_CHARS:
        raise UserError(f"log text is longer than {MAX_PASTED_CHARS} characters; paste the relevant part")
    out = []
    for raw in text.splitlines():
        if raw.strip():
            sev = "ERROR" if any(w in raw for w in ("Error", "ERROR", "error:", "Traceback")) else "DEFAULT"
            out.append(LogLine(severity=sev, text=raw))
    return out


async def _observe(
    state: ServerState, service_name: str | None, since: str, text: str | None
) -> tuple[Any, list[str]]:
    """(an Observation, what could not be read): from pasted text, or from the live service through
    the loop's own observe step (``graph.nodes.observe.observe_service``: retries, blind spots named)."""
    from graph.observation import Observation

    if text and text.strip():
        obs = Observation(
            service=None,
            logs=_lines_from_text(text),
            metrics=None,
            conditions=[],
            health=None,
            model_config={},
            source="text",
        )
        return obs, []
    from datetime import UTC, datetime

    from graph.config import Configuration
    from graph.nodes.observe import observe_service
    from mcp_tools.cloudlogging import parse_time

    name = state.service_name(service_name)
    until = datetime.now(UTC)
    start = parse_time(since, now=until)
    cfg = Configuration.from_settings(state.settings, service=name, log_limit=MAX_LOG_LINES)
    obs, summary = await asyncio.to_thread(observe_service, cfg, since=start, until=until)
    return obs, summary.unread


def _diagnosis_out(diag: Any, source: str, unread: list[str]) -> DiagnosisOut:
    d = diag.to_spec_json()
    findings = list(diag.findings)
    return DiagnosisOut(
        source=source,
        category=d.get("category", "unknown"),
        confidence=float(d.get("confidence", 0.0)),
        summary=d.get("summary", ""),
        evidence=list(d.get("evidence") or []),
        plan=dict(d.get("plan") or {}),
        model_used=d.get("model_used"),
        notes=list(d.get("notes") or []),
        diff=diag.diff or "",
        findings=[
            FindingOut(
                category=f.category,
                confidence=float(f.confidence),
                summary=f.summary,
                evidence=[{"line": e.line, "text": e.text} for e in f.evidence][:10],
            )
            for f in findings
        ],
        observation_unread=unread,
    )


async def _diagnose(state: ServerState, obs: Any, unread: list[str]) -> DiagnosisOut:
    """The loop's steps without the graph (``graph.pipeline.assess``): analyzers first, the configured
    model (primary, then fallback) when one is set."""
    from graph.pipeline import assess
    from mcp_tools.model_endpoint import configured_endpoints

    model = configured_endpoints(state.settings) or None
    diag = await asyncio.to_thread(assess, obs, model=model, policy=state.policy)
    return _diagnosis_out(diag, obs.source, unread)


def _text(out: DiagnosisOut) -> str:
    lines = [f"{out.category} (confidence {out.confidence:.2f}): {out.summary}"]
    for e in out.evidence[:8]:
        lines.append(f"  line {e.get('line')}: {e.get('text')}")
    steps = out.plan.get("steps") or []
    for st in steps:
        lines.append(f"step {st.get('kind')}: {st.get('change')} - {st.get('why', '')}")
    if len(out.findings) > 1:
        lines.append(
            "other findings: " + ", ".join(f"{f.category} {f.confidence:.2f}" for f in out.findings[1:])
        )
    lines += out.notes
    lines += [f"could not read: {u}" for u in out.observation_unread]
    return "\n".join(lines)


def register_agent_tools(mcp: FastMCP, state: ServerState) -> None:
    @tool(mcp, READ_ONLY)
    async def suggest_sre_remediation(
        error_message: str | None = None, service_name: str | None = None, since: str = "1h"
    ) -> Annotated[CallToolResult, DiagnosisOut]:
        """Diagnose a vLLM-on-Cloud-Run failure and propose a typed remediation plan (never applied here).
        Give error_message (log text or an error), or a service_name to read its live state and logs."""
        obs, unread = await _observe(state, service_name, since, error_message)
        out = await _diagnose(state, obs, unread)
        return result(out, _text(out))

    @tool(mcp, READ_ONLY)
    async def analyze_gpu_logs(
        service_name: str | None = None, since: str = "1h", log_text: str | None = None
    ) -> Annotated[CallToolResult, DiagnosisOut]:
        """Run the GPU failure analyzers (weights / KV-cache / runtime OOM, unsupported dtype or kernel,
        start-up timeout, quota, engine crash, overload) over a service's recent logs or pasted log
        text; every finding cites its log lines."""
        obs, unread = await _observe(state, service_name, since, log_text)
        out = await _diagnose(state, obs, unread)
        return result(out, _text(out))
