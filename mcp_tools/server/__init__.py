"""The MCP tool server: the vLLM-on-Cloud-Run toolset on the official clients, safe to hand to an agent.

``build_server(settings)`` returns a ``FastMCP`` server; ``gemma-sre mcp`` serves it over stdio or
streamable HTTP. Design points:

- Every tool returns structured content (a pydantic model, with its output schema) plus readable
  text, bounded in size; a long result says how to get the rest.
- Every failure is an MCP error result with one clear line (unknown service, invalid numbers,
  unreachable endpoint), never a traceback; every outside call has a timeout.
- Mutations (``deploy_vllm``, ``destroy_vllm``, ``update_vllm_scaling``, ``rollback_service``) are
  two-step: the first call returns the plan, the spec diff and a short-lived, single-use
  confirmation token bound to that exact change (tool, service, arguments and the service's current
  etag); only a second call with that token applies it, sending the approval id as request metadata.
  ``GEMMA_SRE_POLICY=read-only`` removes these tools; ``suggest`` keeps them planning-only.
- Heavy client libraries are imported inside the tools, so ``tools/list`` answers fast.

Modules: ``build`` (build_server), ``core`` (results, bounded text, errors, annotations, the ``tool``
registrar), ``state`` (ServerState), ``confirm`` (confirmation tokens), ``http`` (bearer auth, serve_http;
imported only to serve HTTP), and one module per tool family, each with ``register(mcp, state)``:
``tools_service`` (Cloud Run: endpoint, status, revisions), ``tools_endpoint`` (vLLM: health, model,
queries, metrics), ``tools_capacity`` (planner, benchmark), ``tools_logs``, ``tools_extras`` (the GCP
extras, save_hf_token), ``tools_mutate`` (the two-step mutations).
"""

from mcp_tools.server.build import SERVER_NAME, Registrar, build_server
from mcp_tools.server.confirm import DEFAULT_CONFIRM_TTL_S, ConfirmationStore
from mcp_tools.server.core import (
    MAX_TEXT_CHARS,
    MUTATING,
    READ_ONLY,
    ResultModel,
    SharedResult,
    bounded,
    result,
    tool,
    tool_errors,
)
from mcp_tools.server.state import EndpointResult, ServerState
from mcp_tools.server.tools_capacity import BenchRunResult
from mcp_tools.server.tools_endpoint import (
    HealthResult,
    ModelDetails,
    QueryResult,
    StatsResult,
    SystemStatus,
)
from mcp_tools.server.tools_logs import LogAnalysis, LogsResult
from mcp_tools.server.tools_mutate import (
    DEFAULT_DEADLINE_S,
    DEFAULT_DEPLOY_IMAGE,
    MUTATING_TOOLS,
    MutationPlan,
)
from mcp_tools.server.tools_service import RevisionsResult, StatusResult

__all__ = [
    "DEFAULT_CONFIRM_TTL_S",
    "DEFAULT_DEADLINE_S",
    "DEFAULT_DEPLOY_IMAGE",
    "MAX_TEXT_CHARS",
    "MUTATING",
    "MUTATING_TOOLS",
    "READ_ONLY",
    "SERVER_NAME",
    "BenchRunResult",
    "ConfirmationStore",
    "EndpointResult",
    "HealthResult",
    "LogAnalysis",
    "LogsResult",
    "ModelDetails",
    "MutationPlan",
    "QueryResult",
    "Registrar",
    "ResultModel",
    "RevisionsResult",
    "ServerState",
    "SharedResult",
    "StatsResult",
    "StatusResult",
    "SystemStatus",
    "bounded",
    "build_server",
    "result",
    "tool",
    "tool_errors",
]
