"""The benchmark engine: discover the server, warm up, sweep the load points, summarise, write the run.

``run_benchmark(config, progress=None, token_provider=None)`` is the one entry point shared by
``gemma-sre bench`` and the MCP tool ``run_benchmark``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import platform
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, Any, Literal

import httpx
from pydantic import BaseModel, Field

from mcp_tools.bench.client import make_session, send_streaming
from mcp_tools.bench.config import BenchConfig
from mcp_tools.bench.prompts import Prompt, PromptFactory
from mcp_tools.bench.stats import PointSummary, Sample, summarize
from mcp_tools.errors import ExternalError, UserError

if TYPE_CHECKING:
    import aiohttp
    from yarl import URL

logger = logging.getLogger(__name__)

#: Returns a bearer token (sync or async), e.g. a Cloud Run ID token. Called once per point.
TokenProvider = Callable[[], str | Awaitable[str]]


class ProgressEvent(BaseModel):
    kind: Literal["prepare", "point_start", "request", "point_end", "done"]
    mode: str = "concurrency"
    point: int = 0
    points: int = 0
    context_tokens: int = 0
    level: float = 0
    done: int = 0
    total: int = 0
    message: str = ""


ProgressCallback = Callable[[ProgressEvent], None]


class RunMetadata(BaseModel):
    url: str
    model: str
    revision: str | None
    server_version: str | None
    max_model_len: int | None
    started_at: str
    finished_at: str | None = None
    client: dict[str, str]
    config: dict[str, Any]


class BenchResult(BaseModel):
    """What a run produced. ``samples`` are kept out of the model dump for bounded tool output."""

    run_dir: str | None
    metadata: RunMetadata
    points: list[PointSummary]
    stopped: list[str] = Field(default_factory=list)  # why a sweep stopped early, per context length
    skipped: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    errors: dict[str, int] = Field(default_factory=dict)
    samples: list[Sample] = Field(default_factory=list, exclude=True)

    def remarks(self) -> list[tuple[str, str]]:
        """(kind, text) of what a reader is told after the table: "stopped early", "skipped", "note"."""
        return [
            *(("stopped early", s) for s in self.stopped),
            *(("skipped", s) for s in self.skipped),
            *(("note", s) for s in self.notes),
        ]

    def summary_markdown(self, max_rows: int = 40) -> str:
        from mcp_tools.bench.output import summary_markdown

        return summary_markdown(self, max_rows=max_rows)


def _client_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for pkg in ("gemma-sre", "aiohttp", "httpx"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "unknown"
    return out


class _Auth:
    def __init__(self, provider: TokenProvider | None) -> None:
        self.provider = provider

    async def headers(self) -> dict[str, str]:
        h = {"content-type": "application/json"}
        if self.provider is not None:
            if inspect.iscoroutinefunction(self.provider):
                token = await self.provider()
            else:  # may fetch a token over the network: never on the event loop
                token = await asyncio.to_thread(self.provider)
            if inspect.isawaitable(token):
                token = await token
            h["authorization"] = f"Bearer {token}"
        return h


async def _discover(
    client: httpx.AsyncClient, config: BenchConfig, auth: _Auth
) -> tuple[str, int | None, str | None]:
    """(model, max_model_len, revision) from /v1/models."""
    try:
        r = await client.get("/v1/models", headers=await auth.headers(), timeout=30)
    except httpx.HTTPError as e:
        raise ExternalError(f"cannot reach {config.url}/v1/models: {type(e).__name__}: {e}") from e
    if r.status_code in (401, 403):
        raise ExternalError(f"{config.url}/v1/models answered {r.status_code}: check the credentials")
    if r.status_code != 200:
        if config.model:
            return config.model, None, config.revision
        raise ExternalError(
            f"{config.url}/v1/models answered {r.status_code}; pass the model name explicitly"
        )
    try:
        body = r.json()
    except ValueError:
        raise ExternalError(f"{config.url}/v1/models did not answer JSON (a proxy or login page?)") from None
    data = (body.get("data") if isinstance(body, dict) else None) or []
    cards: dict[str, dict[str, Any]] = {str(c["id"]): c for c in data if isinstance(c, dict) and c.get("id")}
    if config.model:
        if cards and config.model not in cards:
            raise UserError(
                f"--model: {config.model!r} is not served at {config.url} (it serves {sorted(cards)})"
            )
        card = cards.get(config.model, {})
        model: str = config.model
    else:
        if not cards:
            raise ExternalError(f"{config.url}/v1/models lists no model")
        model, card = next(iter(cards.items()))
    mml = card.get("max_model_len")
    revision = config.revision or card.get("revision")
    return str(model), int(mml) if isinstance(mml, int) else None, revision


async def _server_version(client: httpx.AsyncClient, auth: _Auth) -> str | None:
    try:
        r = await client.get("/version", headers=await auth.headers(), timeout=10)
        if r.status_code == 200:
            return str(r.json().get("version"))
    except (httpx.HTTPError, ValueError):
        pass
    return None


def _body(config: BenchConfig, model: str, prompt: Prompt, max_tokens: int) -> bytes:
    payload: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "stream": True}
    if config.endpoint == "chat":
        payload["messages"] = [{"role": "user", "content": prompt.text}]
    else:
        payload["prompt"] = prompt.text
    payload["stream_options"] = {"include_usage": True}
    payload["temperature"] = 0.0
    if config.ignore_eos:
        payload["ignore_eos"] = True
    return json.dumps(payload, separators=(",", ":")).encode()


class _Run:
    def __init__(self, config: BenchConfig, progress: ProgressCallback | None, auth: _Auth) -> None:
        self.config = config
        self.progress = progress
        self.auth = auth
        self.rng = random.Random(config.seed)
        self.path = "/v1/chat/completions" if config.endpoint == "chat" else "/v1/completions"

    def _emit(self, **kw: Any) -> None:
        if self.progress is not None:
            try:
                self.progress(ProgressEvent(mode=self.config.mode, **kw))
            except Exception:  # a broken progress display must not break the run
                logger.debug("progress callback failed", exc_info=True)

    async def _point(
        self,
        session: aiohttp.ClientSession,
        url: URL,
        bodies: list[bytes],
        headers: dict[str, str],
        *,
        point: int,
        points: int,
        context: int,
        level: float,
    ) -> tuple[list[Sample], float]:
        cfg = self.config
        chat = cfg.endpoint == "chat"
        n = len(bodies)
        samples: list[Sample] = []
        t_point = perf_counter()
        deadline = t_point + cfg.seconds_per_point
        self._emit(
            kind="point_start", point=point, points=points, context_tokens=context, level=level, total=n
        )

        def record(s: Sample) -> None:
            samples.append(s)
            self._emit(
                kind="request",
                point=point,
                points=points,
                context_tokens=context,
                level=level,
                done=len(samples),
                total=n,
            )

        async def one(i: int) -> None:
            s = await send_streaming(
                session,
                url,
                bodies[i],
                headers,
                chat=chat,
                point=point,
                context_tokens=context,
                level=level,
                t_point=t_point,
            )
            record(s)

        if cfg.mode == "concurrency":
            issued = 0

            async def worker() -> None:
                nonlocal issued
                while issued < n and perf_counter() < deadline:
                    i = issued
                    issued += 1
                    await one(i)

            await asyncio.gather(*[worker() for _ in range(min(int(level), n))])
        else:
            rate = level
            shape = cfg.burstiness
            sem = asyncio.Semaphore(cfg.max_concurrency) if cfg.max_concurrency else None
            tasks: list[asyncio.Task[None]] = []
            t = t_point

            async def limited(i: int) -> None:
                if sem is None:
                    await one(i)
                    return
                async with sem:
                    await one(i)

            for i in range(n):
                if i > 0:
                    t += self.rng.gammavariate(shape, 1.0 / (rate * shape))
                if t >= deadline:
                    break
                delay = t - perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(limited(i)))
            await asyncio.gather(*tasks)
        duration = perf_counter() - t_point
        return samples, duration

    def _saturated(self, prev: PointSummary | None, cur: PointSummary, samples: list[Sample]) -> str | None:
        cfg = self.config
        if cur.requests and (1 - cur.success_rate) > cfg.error_budget:
            return (
                f"error budget: {1 - cur.success_rate:.0%} of requests failed at {cur.mode} {cur.level:g} "
                f"(budget {cfg.error_budget:.0%})"
            )
        if not cfg.stop_on_saturation:
            return None
        if cfg.mode == "concurrency":
            if prev is not None and prev.output_token_throughput > 0:
                gain = cur.output_token_throughput / prev.output_token_throughput - 1
                if gain < cfg.saturation_gain:
                    return (
                        f"saturated: output throughput {cur.output_token_throughput:.0f} tok/s at "
                        f"concurrency {cur.level:g} is within {cfg.saturation_gain:.0%} of "
                        f"{prev.output_token_throughput:.0f} at {prev.level:g}"
                    )
            return None
        ok = sorted((s for s in samples if s.ok and s.e2e_s is not None), key=lambda s: s.start_s)
        if len(ok) >= 8:
            q = max(2, len(ok) // 4)
            head = sum(s.e2e_s or 0 for s in ok[:q]) / q
            tail = sum(s.e2e_s or 0 for s in ok[-q:]) / q
            if head > 0 and tail > 2 * head:
                return (
                    f"saturated: at {cur.level:g} req/s the last requests took {tail:.2f} s against "
                    f"{head:.2f} s for the first (a queue is building)"
                )
        return None

    async def run(self) -> BenchResult:
        cfg = self.config
        started = datetime.now(UTC)
        from yarl import URL

        from mcp_tools.endpoint import tls_context

        timeout = httpx.Timeout(min(60.0, cfg.request_timeout_s), connect=min(30.0, cfg.request_timeout_s))
        async with (
            httpx.AsyncClient(
                base_url=cfg.url, timeout=timeout, follow_redirects=False, verify=tls_context()
            ) as client,
            make_session(cfg.url, cfg.peak_in_flight(), cfg.request_timeout_s) as session,
        ):
            model, mml, revision = await _discover(client, cfg, self.auth)
            version = await _server_version(client, self.auth)
            meta = RunMetadata(
                url=cfg.url,
                model=model,
                revision=revision,
                server_version=version,
                max_model_len=mml,
                started_at=started.isoformat(timespec="seconds"),
                client=_client_versions(),
                config=cfg.model_dump(mode="json"),
            )
            factory = PromptFactory(
                client,
                model=model,
                chat=cfg.endpoint == "chat",
                shared_prefix=cfg.shared_prefix,
                exact=cfg.exact_prompt_lengths,
                rng=self.rng,
                headers=self.auth.headers,
            )
            contexts = []
            skipped = []
            for ctx in cfg.context_lengths:
                if mml is not None and ctx + cfg.output_tokens > mml:
                    skipped.append(
                        f"context {ctx}: {ctx} prompt + {cfg.output_tokens} output tokens exceed "
                        f"max_model_len {mml}"
                    )
                else:
                    contexts.append(ctx)
            if not contexts:
                raise UserError(
                    "--context: every context length plus --output-tokens exceeds the server's "
                    f"max_model_len {mml}"
                )
            url = URL(cfg.url + self.path)
            return await self._sweep(client, session, url, factory, meta, contexts, skipped)

    async def _sweep(
        self,
        client: httpx.AsyncClient,
        session: aiohttp.ClientSession,
        url: URL,
        factory: PromptFactory,
        meta: RunMetadata,
        contexts: list[int],
        skipped: list[str],
    ) -> BenchResult:
        cfg = self.config
        model = meta.model
        levels = cfg.levels()
        points_total = len(contexts) * len(levels)
        await self._warmup(session, url, factory, model, contexts[0])
        all_samples: list[Sample] = []
        summaries: list[PointSummary] = []
        stopped: list[str] = []
        notes: list[str] = []
        noted: set[int] = set()
        noted_raise: set[str] = set()
        point = 0
        for ctx in contexts:
            self._emit(
                kind="prepare",
                context_tokens=ctx,
                points=points_total,
                message=f"prompts of {ctx} tokens",
            )
            prev: PointSummary | None = None
            for li, level in enumerate(levels):
                n_requests = cfg.requests_per_point
                if cfg.mode == "concurrency" and level > n_requests:
                    n_requests = int(level)  # fewer requests than workers would not load the level
                    if f"raised {ctx}" not in noted_raise:
                        noted_raise.add(f"raised {ctx}")
                        notes.append(
                            f"context {ctx}: requests per point raised to the concurrency at levels above "
                            f"{cfg.requests_per_point} (each worker sends at least one request)"
                        )
                prompts = await factory.make_many(ctx, n_requests)
                inexact = [p.tokens for p in prompts if not p.exact]
                if inexact and ctx not in noted:
                    noted.add(ctx)
                    how = "estimated (no /tokenize)" if factory.measured is False else "inexact"
                    notes.append(
                        f"context {ctx}: {len(inexact)} of {len(prompts)} prompt lengths {how}, "
                        f"{min(inexact)}..{max(inexact)} tokens; usage.prompt_tokens has the truth"
                    )
                bodies = [_body(cfg, model, p, cfg.output_tokens) for p in prompts]
                del prompts
                # (re)open the point's connections untimed: idle ones expired while prompts were made
                in_flight = int(level) if cfg.mode == "concurrency" else cfg.peak_in_flight()
                headers = await self.auth.headers()
                await self._open_connections(session, min(in_flight, len(bodies), 512), headers)
                samples, duration = await self._point(
                    session, url, bodies, headers, point=point, points=points_total, context=ctx, level=level
                )
                summary = summarize(
                    samples,
                    point=point,
                    context_tokens=ctx,
                    mode=cfg.mode,
                    level=level,
                    slo=cfg.slo,
                    duration_s=duration,
                )
                summaries.append(summary)
                all_samples.extend(samples)
                self._emit(
                    kind="point_end", point=point, points=points_total, context_tokens=ctx, level=level,
                    done=len(samples), total=len(samples),
                )  # fmt: skip
                point += 1
                reason = self._saturated(prev, summary, samples)
                if reason is not None and li < len(levels) - 1:
                    stopped.append(f"context {ctx}: {reason}; skipped the higher levels")
                    break
                prev = summary
        errors: dict[str, int] = {}
        for s in all_samples:
            if not s.ok:
                key = s.error or "unknown"
                errors[key] = errors.get(key, 0) + 1
        meta.finished_at = datetime.now(UTC).isoformat(timespec="seconds")
        result = BenchResult(
            run_dir=None,
            metadata=meta,
            points=summaries,
            stopped=stopped,
            skipped=skipped,
            notes=notes,
            errors=errors,
        )
        result.samples = all_samples
        if cfg.write_output:
            from mcp_tools.bench.output import write_run

            result.run_dir = str(write_run(result, Path(cfg.output_dir)))
        self._emit(kind="done", points=points_total, message=result.run_dir or "")
        return result

    async def _open_connections(
        self, session: aiohttp.ClientSession, n: int, headers: dict[str, str]
    ) -> None:
        """Open ``n`` keep-alive connections with concurrent ``GET /health`` (any answer will do)."""
        import aiohttp

        health = self.config.url + "/health"

        async def ping() -> None:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(health, headers=headers) as r:
                    await r.read()

        await asyncio.gather(*[ping() for _ in range(n)])

    async def _warmup(
        self, session: aiohttp.ClientSession, url: URL, factory: PromptFactory, model: str, ctx: int
    ) -> None:
        """Send a few unrecorded requests (each point opens its connections before it is timed)."""
        cfg = self.config
        headers = await self.auth.headers()
        if cfg.warmup_requests <= 0:
            return
        prompts = await factory.make_many(min(ctx, 64), cfg.warmup_requests)
        t = perf_counter()
        await asyncio.gather(
            *[
                send_streaming(
                    session,
                    url,
                    _body(cfg, model, p, min(8, cfg.output_tokens)),
                    headers,
                    chat=cfg.endpoint == "chat",
                    point=-1,
                    context_tokens=ctx,
                    level=0,
                    t_point=t,
                )
                for p in prompts
            ]
        )


async def run_benchmark(
    config: BenchConfig,
    progress: ProgressCallback | None = None,
    token_provider: TokenProvider | None = None,
) -> BenchResult:
    """Run the benchmark ``config`` describes; write the run folder (unless ``write_output`` is False).

    ``token_provider`` returns a bearer token (e.g. a Cloud Run ID token) and is called once per
    load point. Request failures are counted by type in the result, never raised.
    """
    return await _Run(config, progress, _Auth(token_provider)).run()
