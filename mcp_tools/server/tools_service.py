"""What the Cloud Run API says about a service: its endpoint URL, status, conditions and revisions."""

from __future__ import annotations

import asyncio
from typing import Annotated

from mcp.server.fastmcp import FastMCP
from mcp.types import CallToolResult

from mcp_tools.server.core import READ_ONLY, ResultModel, check_range, result, tool
from mcp_tools.server.state import EndpointResult, ServerState
from mcp_tools.service_models import RevisionInfo, ServiceInfo, ServiceSpec


class StatusResult(ResultModel):
    service: ServiceInfo
    truncated_revisions: int = 0


class RevisionsResult(ResultModel):
    service: str
    revisions: list[RevisionInfo]
    more: str | None = None


def _spec_text(spec: ServiceSpec) -> str:
    from mcp_tools.redact import redact_spec
    from mcp_tools.spec_ops import render

    return render(redact_spec(spec))


def _service_text(info: ServiceInfo) -> str:
    lines = [
        f"service {info.name}: {'Ready' if info.ready else 'NOT ready'}",
        f"url: {info.uri or '(none)'}",
        f"latest ready revision: {info.latest_ready_revision or '-'}; "
        f"latest created: {info.latest_created_revision or '-'}",
        "traffic: " + (", ".join(f"{t.revision or 'LATEST'} {t.percent}%" for t in info.traffic) or "(none)"),
    ]
    for c in info.all_conditions:
        if c.state != "CONDITION_SUCCEEDED" and c.message:
            lines.append(f"condition {c.type}: {c.state}: {c.message}")
    for r in info.revisions[:10]:
        bad = [c.message for c in r.conditions if c.failed]
        lines.append(
            f"revision {r.name}: {'Ready' if r.ready else 'not ready'}"
            + (f", {r.traffic_percent}% traffic" if r.traffic_percent else "")
            + (f" ({bad[0]})" if bad else "")
        )
    lines.append("spec:\n" + _spec_text(info.spec))
    return "\n".join(lines)


def register(mcp: FastMCP, state: ServerState) -> None:
    s = state

    @tool(mcp, READ_ONLY, aliases={"get_endpoint": "Same as get_vllm_endpoint (kept for existing prompts)."})
    async def get_vllm_endpoint(
        service_name: str | None = None,
    ) -> Annotated[CallToolResult, EndpointResult]:
        """The vLLM endpoint URL: the Cloud Run service's URL from the Cloud Run API (or VLLM_BASE_URL
        when set and no service is named)."""
        _, info = await s.endpoint_for(service_name)
        return result(
            info, f"{info.url} ({info.source}{', service ' + info.service if info.service else ''})"
        )

    @tool(mcp, READ_ONLY)
    async def status_vllm(
        service_name: str | None = None, max_revisions: int = 10
    ) -> Annotated[CallToolResult, StatusResult]:
        """The Cloud Run service: readiness, URL, traffic, conditions, revisions (newest first) and spec."""
        check_range("max_revisions", max_revisions, 1, 100)
        name = s.service_name(service_name)
        info = await s.get_service(name, with_revisions=True)
        extra = max(0, len(info.revisions) - max_revisions)
        info.revisions = info.revisions[:max_revisions]
        text = _service_text(info)
        if extra:
            text += f"\n({extra} older revisions not shown: use list_revisions with a larger limit)"
        return result(StatusResult(service=info, truncated_revisions=extra), text)

    @tool(mcp, READ_ONLY)
    async def list_revisions(
        service_name: str | None = None, limit: int = 20
    ) -> Annotated[CallToolResult, RevisionsResult]:
        """The service's revisions, newest first, with readiness, failure messages and traffic share."""
        check_range("limit", limit, 1, 100)
        name = s.service_name(service_name)
        revs = await asyncio.to_thread(s.cloudrun.list_revisions, name, limit=limit + 1)
        more = None
        if len(revs) > limit:
            revs = revs[:limit]
            more = f"more revisions exist: call list_revisions with limit above {limit}"
        lines = [
            f"{r.name}: {'Ready' if r.ready else 'not ready'}, {r.traffic_percent}% traffic, created "
            f"{r.create_time or '?'}"
            + "".join(f"\n  {c.type}: {c.message}" for c in r.conditions if c.failed)
            for r in revs
        ]
        return result(
            RevisionsResult(service=name, revisions=revs, more=more),
            "\n".join(lines) + (f"\n{more}" if more else ""),
        )
