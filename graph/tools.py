"""The model's tools: read-only MCP tools, through langchain-mcp-adapters, on sessions opened once.

- Our own server (``mcp_tools.server.build_server``) runs in-process on an in-memory MCP session,
  built under the ``read-only`` policy, so its mutating tools are not even registered; on top of
  that, names in the server's ``MUTATING_TOOLS`` are never bound, and neither are tools that would
  call a model themselves or put load on the endpoint (``NOT_FOR_DIAGNOSIS``). The tool layer
  decides what is read-only, never a model.
- Servers in the user's ``mcpServers`` file (``GEMMA_SRE_MCP_SERVERS_FILE``, the JSON that Antigravity
  and Gemini CLI write) are opened once each (stdio, streamable HTTP or SSE); from them only tools
  the server annotates ``readOnlyHint: true`` and not ``destructiveHint`` are bound, prefixed with the
  server's name. A server that cannot be started is skipped with a warning.

Every session is opened once for the whole diagnosis and reused by every tool call in it (a stdio
tool called without a session would spawn a process per call).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from graph.config import Configuration
from mcp_tools.errors import UserError

log = logging.getLogger(__name__)

#: Read-only tools of our server that a diagnosing model still does not get: they call a model
#: themselves (recursion through the patient), send load to the endpoint, or touch a secret.
NOT_FOR_DIAGNOSIS = frozenset(
    {
        "analyze_cloud_logging",
        "analyze_gpu_logs",
        "suggest_sre_remediation",
        "query_vllm",
        "query_gemma4",
        "query_gemma4_with_stats",
        "run_benchmark",
        "save_hf_token",
    }
)


def our_read_only(tools: list[Any]) -> list[Any]:
    """Our server's tools a diagnosing model may call."""
    from mcp_tools import server as ours

    mutating = set(getattr(ours, "MUTATING_TOOLS", ()))
    allow = getattr(ours, "READ_ONLY_TOOLS", None)
    kept = []
    for t in tools:
        if t.name in mutating or t.name in NOT_FOR_DIAGNOSIS:
            continue
        if allow is not None and t.name not in allow:
            continue
        if not _declared_read_only(t):
            continue
        kept.append(t)
    return kept


def connections_from_file(path: Path | str) -> dict[str, dict[str, Any]]:
    """langchain-mcp-adapters connections from an ``mcpServers`` JSON file."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{p}: no such mcpServers file") from None
    except (OSError, ValueError) as e:
        raise UserError(f"{p}: not a readable JSON mcpServers file ({e.__class__.__name__})") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise UserError(f"{p}: needs a top-level 'mcpServers' object")
    out: dict[str, dict[str, Any]] = {}
    for name, spec in servers.items():
        if not isinstance(spec, dict) or spec.get("disabled"):
            continue
        if spec.get("command"):
            conn: dict[str, Any] = {
                "transport": "stdio",
                "command": str(spec["command"]),
                "args": [str(a) for a in spec.get("args") or []],
            }
            if spec.get("env"):
                conn["env"] = {str(k): str(v) for k, v in spec["env"].items()}
            if spec.get("cwd"):
                conn["cwd"] = str(spec["cwd"])
        elif spec.get("httpUrl") or spec.get("serverUrl"):
            conn = {"transport": "streamable_http", "url": str(spec.get("httpUrl") or spec.get("serverUrl"))}
            if spec.get("headers"):
                conn["headers"] = {str(k): str(v) for k, v in spec["headers"].items()}
        elif spec.get("url"):
            url = str(spec["url"])
            conn = {"transport": "sse" if url.rstrip("/").endswith("/sse") else "streamable_http", "url": url}
            if spec.get("headers"):
                conn["headers"] = {str(k): str(v) for k, v in spec["headers"].items()}
        else:
            log.warning("%s: mcpServers entry %r has no command or url; skipped", p, name)
            continue
        out[str(name)] = conn
    return out


def _declared_read_only(tool: Any) -> bool:
    meta = getattr(tool, "metadata", None) or {}
    return bool(meta.get("readOnlyHint")) and not meta.get("destructiveHint")


@asynccontextmanager
async def read_only_tools(cfg: Configuration) -> AsyncIterator[list[Any]]:
    """The read-only LangChain tools for one diagnosis, their MCP sessions open for the block."""
    from langchain_mcp_adapters.tools import load_mcp_tools
    from mcp.shared.memory import create_connected_server_and_client_session

    from mcp_tools.server import build_server
    from mcp_tools.settings import Policy

    tools: list[Any] = []
    async with AsyncExitStack() as stack:
        settings = cfg.settings().model_copy(update={"policy": Policy.READ_ONLY})
        server = build_server(settings)
        session = await stack.enter_async_context(create_connected_server_and_client_session(server))
        tools.extend(our_read_only(await load_mcp_tools(session, server_name="gemma-sre")))

        if cfg.mcp_servers_file:
            from langchain_mcp_adapters.client import MultiServerMCPClient

            connections = connections_from_file(cfg.mcp_servers_file)
            client = MultiServerMCPClient(connections)  # type: ignore[arg-type]
            for name in connections:
                try:
                    s = await stack.enter_async_context(client.session(name))
                    theirs = await load_mcp_tools(s, server_name=name, tool_name_prefix=True)
                except Exception as e:  # a user's server that does not start must not stop a diagnosis
                    log.warning("MCP server %r unavailable (%s); its tools are not bound", name, e)
                    continue
                kept = [t for t in theirs if _declared_read_only(t)]
                log.info(
                    "MCP server %r: %d of %d tools are read-only and bound", name, len(kept), len(theirs)
                )
                tools.extend(kept)
        yield tools
