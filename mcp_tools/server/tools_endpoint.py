"""What the vLLM endpoint itself says: health, the served model, completions with real statistics,
and /metrics."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Self

from mcp.server.fastmcp import FastMCP
from mcp.types import CallToolResult
from pydantic import Field

from mcp_tools.errors import ExternalError, UserError
from mcp_tools.metrics import VllmMetrics
from mcp_tools.server.core import READ_ONLY, ResultModel, SharedResult, check_range, result, tool
from mcp_tools.server.state import ServerState

if TYPE_CHECKING:
    from mcp_tools.endpoint import ChatResult


class HealthResult(ResultModel):
    url: str
    healthy: bool
    models: list[str] = Field(default_factory=list)
    smoke_test_ok: bool | None = None
    smoke_ttft_s: float | None = None
    smoke_completion_tokens: int | None = None
    problems: list[str] = Field(default_factory=list)


class SystemStatus(ResultModel):
    service: str | None = None
    url: str | None = None
    ready: bool | None = None
    latest_ready_revision: str | None = None
    latest_created_revision: str | None = None
    serving_revision: str | None = None
    failing_conditions: list[str] = Field(default_factory=list)
    healthy: bool | None = None
    models: list[str] = Field(default_factory=list)
    metrics_summary: str | None = None
    problems: list[str] = Field(default_factory=list)


class ModelDetails(ResultModel):
    url: str
    served_models: list[str]
    model_arg: str | None = None
    max_model_len: int | None = None
    gpu_type: str | None = None
    vllm_args: list[str] = Field(default_factory=list)
    kv_cache_usage: float | None = None


class QueryResult(SharedResult):
    """A chat completion's answer; ``from_chat`` fills it (or a subclass) from a ``ChatResult``."""

    text: str
    model: str
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @classmethod
    def from_chat(cls, r: ChatResult) -> Self:
        """The answer with the figures of ``r.stats`` that this result names (the rest are left)."""
        return cls.model_validate({**r.stats.model_dump(), **r.model_dump(exclude={"stats"})})


class StatsResult(QueryResult):
    ttft_s: float | None = None
    total_s: float
    usage_reported: bool
    itl_mean_s: float | None = None
    decode_tokens_per_s: float | None = None
    chunks: int
    chunk_gap_p50_s: float | None = None
    chunk_gap_p90_s: float | None = None


def register(mcp: FastMCP, state: ServerState) -> None:  # noqa: C901 - one block of tools
    s = state

    @tool(mcp, READ_ONLY)
    async def verify_model_health(
        service_name: str | None = None, smoke_test: bool = True
    ) -> Annotated[CallToolResult, HealthResult]:
        """Is the model serving? /health, the served model from /v1/models, and a one-line completion."""
        ep, info = await s.endpoint_for(service_name)
        out = HealthResult(url=info.url, healthy=False)
        try:
            out.healthy = await ep.health()
        except ExternalError as e:
            out.problems.append(str(e))
            return result(out, f"{info.url}: unreachable ({e})")
        if not out.healthy:
            out.problems.append("/health did not answer 200")
        try:
            out.models = await ep.models()
        except ExternalError as e:
            out.problems.append(str(e))
        if smoke_test and out.models:
            try:
                r = await ep.chat([{"role": "user", "content": "Reply with OK."}], max_tokens=8, timeout=60)
                out.smoke_test_ok = True
                out.smoke_ttft_s = r.stats.ttft_s
                out.smoke_completion_tokens = r.stats.completion_tokens
            except ExternalError as e:
                out.smoke_test_ok = False
                out.problems.append(str(e))
        verdict = "healthy" if out.healthy and out.smoke_test_ok is not False else "NOT healthy"
        text = f"{info.url}: {verdict}; models: {', '.join(out.models) or '-'}"
        if out.smoke_ttft_s is not None:
            text += f"; smoke test TTFT {out.smoke_ttft_s * 1000:.0f} ms"
        if out.problems:
            text += "\n" + "\n".join(out.problems)
        return result(out, text)

    @tool(mcp, READ_ONLY)
    async def get_system_status(service_name: str | None = None) -> Annotated[CallToolResult, SystemStatus]:
        """One look at everything: Cloud Run readiness and conditions, /health, served model, metrics."""
        from mcp_tools.metrics import parse_vllm_metrics

        out = SystemStatus()
        url: str | None = None
        if not s.uses_base_url(service_name):  # the same endpoint every other tool talks to
            name = s.service_name(service_name)
            info = await s.get_service(name)
            out.service, out.url, out.ready = name, info.uri, info.ready
            out.latest_ready_revision = info.latest_ready_revision
            out.latest_created_revision = info.latest_created_revision
            out.serving_revision = info.serving_revision
            out.failing_conditions = [f"{c.type}: {c.message}" for c in info.all_conditions if c.failed]
            url = info.uri
        else:
            url = s.settings.vllm_base_url
            out.url = url
        if url:
            from mcp_tools.endpoint import VllmEndpoint

            ep = VllmEndpoint(url, timeout_s=min(10.0, s.settings.http_timeout_s))
            try:
                out.healthy = await ep.health()
                out.models = await ep.models()
                out.metrics_summary = parse_vllm_metrics(await ep.metrics_text()).summary()
            except (ExternalError, UserError) as e:
                out.problems.append(str(e))
        lines = [
            f"service: {out.service or '-'} ({_tri(out.ready, 'Ready', 'not ready')})",
            f"url: {out.url or '-'}",
            f"serving revision: {out.serving_revision or '-'} "
            f"(latest created {out.latest_created_revision or '-'})",
            *out.failing_conditions,
            f"/health: {'ok' if out.healthy else 'failing' if out.healthy is False else '?'}; "
            f"models: {', '.join(out.models) or '-'}",
        ]
        if out.metrics_summary:
            lines.append(out.metrics_summary)
        lines += out.problems
        return result(out, "\n".join(lines))

    @tool(mcp, READ_ONLY)
    async def get_model_details(service_name: str | None = None) -> Annotated[CallToolResult, ModelDetails]:
        """The served model (from /v1/models) and how it is served (the service's vLLM arguments)."""
        from mcp_tools.spec_ops import get_flag, get_model

        ep, info = await s.endpoint_for(service_name)
        models = await ep.models()
        out = ModelDetails(url=info.url, served_models=models)
        if info.source == "cloud_run" and info.service:
            svc = await s.get_service(info.service)
            out.vllm_args = svc.spec.args
            out.model_arg = get_model(svc.spec.args)
            mml = get_flag(svc.spec.args, "--max-model-len")
            out.max_model_len = int(mml) if isinstance(mml, str) and mml.isdigit() else None
            out.gpu_type = svc.spec.gpu_type
        try:
            from mcp_tools.metrics import parse_vllm_metrics

            out.kv_cache_usage = parse_vllm_metrics(await ep.metrics_text()).kv_cache_usage
        except (ExternalError, UserError):
            pass
        text = f"served: {', '.join(models) or '-'}"
        if out.model_arg:
            text += (
                f"\ncheckpoint: {out.model_arg}; max-model-len: {out.max_model_len or 'default'}; "
                f"GPU {out.gpu_type}"
            )
            text += "\nargs: " + " ".join(out.vllm_args)
        return result(out, text)

    def _check_prompt(prompt: str, max_tokens: int) -> None:
        if not prompt or not prompt.strip():
            raise UserError("prompt is empty")
        check_range("max_tokens", max_tokens, 1, 8192)

    async def _query(
        service_name: str | None, prompt: str, max_tokens: int, temperature: float
    ) -> QueryResult:
        _check_prompt(prompt, max_tokens)
        check_range("temperature", temperature, 0, 2)
        ep, _ = await s.endpoint_for(service_name)
        r = await ep.chat(
            [{"role": "user", "content": prompt}],
            stream=False,
            max_tokens=max_tokens,
            temperature=temperature,
        )
        return QueryResult.from_chat(r)

    @tool(
        mcp,
        READ_ONLY,
        aliases={"query_gemma4": "Send a prompt to the self-hosted Gemma 4 model and return its answer."},
    )
    async def query_vllm(
        prompt: str, max_tokens: int = 512, temperature: float = 0.2, service_name: str | None = None
    ) -> Annotated[CallToolResult, QueryResult]:
        """Send a prompt to the self-hosted vLLM model (chat completion) and return its answer."""
        r = await _query(service_name, prompt, max_tokens, temperature)
        return result(r, r.text)

    @tool(mcp, READ_ONLY)
    async def query_gemma4_with_stats(
        prompt: str, max_tokens: int = 512, service_name: str | None = None
    ) -> Annotated[CallToolResult, StatsResult]:
        """Query the model with streaming and report real statistics: time to first token, inter-token
        latency and token counts from the server's usage figures (never chunk counts)."""
        _check_prompt(prompt, max_tokens)
        ep, _ = await s.endpoint_for(service_name)
        r = await ep.chat([{"role": "user", "content": prompt}], stream=True, max_tokens=max_tokens)
        st = r.stats
        out = StatsResult.from_chat(r)

        def ms(v: float | None) -> str:
            return f"{v * 1000:.0f} ms" if v is not None else "n/a"

        stats = (
            f"TTFT {ms(st.ttft_s)}, total {st.total_s:.2f} s, prompt tokens {st.prompt_tokens}, "
            f"completion tokens {st.completion_tokens}, mean inter-token {ms(st.itl_mean_s)}, "
            f"decode {st.decode_tokens_per_s:.1f} tok/s"
            if st.decode_tokens_per_s
            else f"TTFT {ms(st.ttft_s)}, total {st.total_s:.2f} s, completion tokens {st.completion_tokens}"
        )
        if not st.usage_reported:
            stats += " (the server reported no usage: token counts unknown)"
        return result(out, f"{r.text}\n\n--- {stats}")

    @tool(mcp, READ_ONLY)
    async def get_vllm_metrics(service_name: str | None = None) -> Annotated[CallToolResult, VllmMetrics]:
        """vLLM's /metrics, parsed: KV-cache usage, running / waiting requests, preemptions, TTFT and
        inter-token percentiles from the histograms (old and new vLLM metric names)."""
        from mcp_tools.metrics import parse_vllm_metrics

        ep, info = await s.endpoint_for(service_name)
        m = parse_vllm_metrics(await ep.metrics_text())
        return result(m, f"{info.url}\n{m.summary()}")


def _tri(v: bool | None, yes: str, no: str) -> str:
    return "?" if v is None else yes if v else no
