"""Numbers computed, never guessed: the capacity planner (will it fit, how much KV cache) and the
load-test sweep against the endpoint."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import CallToolResult
from pydantic import Field

from mcp_tools.capacity.plan import CapacityPlan
from mcp_tools.errors import UserError
from mcp_tools.server.core import READ_ONLY, ResultModel, check_range, result, tool
from mcp_tools.server.state import ServerState


class BenchRunResult(ResultModel):
    url: str
    model: str
    run_dir: str | None = None
    points: list[dict[str, Any]]
    stopped: list[str] = Field(default_factory=list)
    errors: dict[str, int] = Field(default_factory=dict)


def register(mcp: FastMCP, state: ServerState) -> None:
    s = state

    @tool(mcp, READ_ONLY)
    async def run_benchmark(
        ctx: Context,
        service_name: str | None = None,
        concurrencies: list[int] | None = None,
        context_lengths: list[int] | None = None,
        output_tokens: int = 128,
        requests_per_point: int = 20,
        seconds_per_point: float = 60.0,
        ttft_slo_ms: float | None = None,
    ) -> Annotated[CallToolResult, BenchRunResult]:
        """Load-test the vLLM endpoint: a sweep over concurrency and prompt length, with TTFT, inter-token
        latency, throughput (tokens from usage) and goodput per point. Bounded: at most 12 points and
        2000 requests; the full run (samples, CSV, charts) is written under the state directory."""
        params = dict(locals())  # the arguments by name: output_tokens, requests_per_point, ...
        from mcp_tools.bench import engine as bench_engine
        from mcp_tools.bench.config import SLO, BenchConfig

        conc = concurrencies or [1, 4]
        lengths = context_lengths or [256]
        points = len(conc) * len(lengths)
        if points > 12:
            raise UserError(f"{points} load points asked for; at most 12 (concurrencies x context_lengths)")
        if not 1 <= requests_per_point <= 500 or points * requests_per_point > 2000:
            raise UserError("requests_per_point must be from 1 to 500, and at most 2000 requests in all")
        check_range("seconds_per_point", seconds_per_point, 1, 300)
        check_range("output_tokens", output_tokens, 1, 4096)
        ep, info = await s.endpoint_for(service_name)
        config = BenchConfig.from_params(
            "run_benchmark",
            params,
            url=info.url,
            concurrencies=conc,
            context_lengths=lengths,
            warmup_requests=min(2, requests_per_point),
            slo=SLO(ttft_s=ttft_slo_ms / 1000) if ttft_slo_ms else SLO(),
            output_dir=s.settings.state_dir / "bench-runs",
            label=info.service or "endpoint",
            request_timeout_s=max(30.0, s.settings.http_timeout_s),
        )
        provider = None
        if ep.wants_id_token():
            from mcp_tools.endpoint import ID_TOKENS

            def provider() -> str:
                return ID_TOKENS.get(ep.audience)

        total = points * requests_per_point
        done = [0]
        pending: set[asyncio.Task[None]] = set()

        def progress(ev: Any) -> None:  # MCP progress notifications (sent only if the client asked)
            if ev.kind == "request":
                done[0] += 1
            elif ev.kind not in ("point_start", "done"):
                return
            msg = f"point {ev.point}/{ev.points}: {ev.context_tokens} tokens at {ev.level:g}"
            task = asyncio.get_running_loop().create_task(ctx.report_progress(done[0], total, msg))
            pending.add(task)
            task.add_done_callback(pending.discard)

        res = await bench_engine.run_benchmark(config, progress=progress, token_provider=provider)
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        out = BenchRunResult(
            url=info.url,
            model=res.metadata.model,
            run_dir=res.run_dir,
            points=[p.model_dump(mode="json") for p in res.points],
            stopped=res.stopped,
            errors=res.errors,
        )
        more = f"\nfull run (samples, CSV, charts): {res.run_dir}" if res.run_dir else ""
        return result(out, res.summary_markdown(max_rows=20) + more)

    @tool(mcp, READ_ONLY)
    async def plan_capacity(
        model: str,
        gpu: str | None = "nvidia-l4",
        gpu_memory_gib: float | None = None,
        gpu_count: int = 1,
        vllm_args: list[str] | None = None,
        max_model_len: int | None = None,
        gpu_memory_utilization: float | None = None,
        kv_cache_dtype: str | None = None,
        quantization: str | None = None,
        gpu_memory_used_gib: float | None = None,
        vllm_version: str | None = None,
    ) -> Annotated[CallToolResult, CapacityPlan]:
        """Will this model fit this GPU with these vLLM flags, and how much KV cache is left? Computed
        from the architecture and vLLM's memory accounting (not guessed), with ranked fixes.
        gpu_memory_used_gib: memory other processes already hold on each GPU; vllm_version: account
        as that release does (default: the current one). `fits` holds at the low end of
        kv_cache_tokens_range."""
        params = dict(locals())  # the arguments by name: what plan_request reads
        from mcp_tools.capacity import plan_request

        plan = await asyncio.to_thread(plan_request, params)
        low, high = plan.kv_cache_tokens_range
        lines = [
            plan.verdict,
            f"weights {plan.weights_gib:.2f} GiB, KV cache {plan.kv_cache_gib:.2f} GiB = "
            f"{plan.kv_cache_tokens} tokens (range {low} to {high}), "
            f"max concurrency {plan.max_concurrency:.2f}",
            *plan.warnings,
            *[f"fix ({sg.kind}): {sg.summary}" for sg in plan.suggestions[:5]],
        ]
        return result(plan, "\n".join(lines))
