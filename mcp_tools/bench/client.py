"""One streaming request, timed at the client: TTFT, inter-token gaps, e2e, usage, and the error type.

The hot path is kept lean (pre-serialised bodies, raw SSE splitting, one ``json.loads`` per event)
so the client is not what limits a benchmark; ``benchmarks/bench_client_ceiling.py`` measures it.
"""

from __future__ import annotations

import asyncio
import errno
import json
import resource
from time import perf_counter
from typing import Any

import httpx

from mcp_tools.bench.stats import Sample

_DETAIL_MAX = 300


def raise_open_files_limit(needed: int) -> int:
    """Raise the soft RLIMIT_NOFILE toward ``needed`` (up to the hard limit); return the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    return int(soft)


def make_client(base_url: str, max_connections: int, timeout_s: float) -> httpx.AsyncClient:
    """An HTTP/1.1 pool with one connection per concurrent request (and open files to match)."""
    raise_open_files_limit(max_connections * 2 + 256)
    return httpx.AsyncClient(
        base_url=base_url,
        http2=False,
        limits=httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections, keepalive_expiry=60
        ),
        timeout=httpx.Timeout(timeout_s, connect=min(30.0, timeout_s)),
        follow_redirects=False,
    )


def _server_message(body: bytes) -> str:
    """vLLM's error text from an error body (either error-JSON shape), else the raw text."""
    text = body[:4000].decode("utf-8", errors="replace")
    try:
        obj = json.loads(text)
    except ValueError:
        return text.strip()[:_DETAIL_MAX]
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:_DETAIL_MAX]
        if isinstance(err, str):
            return err[:_DETAIL_MAX]
    return text.strip()[:_DETAIL_MAX]


def classify_exception(e: BaseException) -> str:
    """A short, stable error type for a transport failure."""
    if isinstance(e, httpx.PoolTimeout):
        return "pool_timeout"
    if isinstance(e, httpx.ConnectTimeout):
        return "connect_timeout"
    if isinstance(e, httpx.TimeoutException | TimeoutError):
        return "timeout"
    if isinstance(e, httpx.ConnectError):
        return "connect_error"
    if isinstance(e, httpx.RemoteProtocolError):
        return "connection_dropped"
    if isinstance(e, httpx.ReadError | httpx.WriteError):
        cause: BaseException | None = e.__cause__ or e.__context__
        while cause is not None:
            if isinstance(cause, ConnectionResetError) or getattr(cause, "errno", None) == errno.ECONNRESET:
                return "connection_reset"
            cause = cause.__cause__ or cause.__context__
        return "read_error" if isinstance(e, httpx.ReadError) else "write_error"
    return type(e).__name__


async def send_streaming(
    client: httpx.AsyncClient,
    path: str,
    body: bytes,
    headers: dict[str, str],
    *,
    chat: bool,
    point: int,
    context_tokens: int,
    level: float,
    t_point: float,
    timeout_s: float,
) -> Sample:
    """POST one streaming request and time it. Never raises for request failures: they become samples."""
    t0 = perf_counter()
    status: int | None = None
    first: float | None = None
    last = 0.0
    itl: list[float] = []
    chunks = 0
    usage: dict[str, Any] | None = None
    done = False
    error: str | None = None
    detail: str | None = None
    try:
        async with asyncio.timeout(timeout_s):
            request = client.build_request("POST", path, content=body, headers=headers)
            response = await client.send(request, stream=True)
            try:
                status = response.status_code
                if status != 200:
                    error = f"http_{status}"
                    detail = _server_message(await response.aread())
                else:
                    buf = b""
                    loads = json.loads
                    async for raw in response.aiter_bytes():
                        now = perf_counter()
                        buf = buf + raw if buf else raw
                        while True:
                            cut = buf.find(b"\n\n")
                            if cut < 0:
                                break
                            event = buf[:cut]
                            buf = buf[cut + 2 :]
                            if not event.startswith(b"data:"):
                                continue  # comments / keep-alives
                            data = event[5:].strip()
                            if data == b"[DONE]":
                                done = True
                                continue
                            obj = loads(data)
                            if "error" in obj and not obj.get("choices"):
                                err = obj["error"]
                                error = "server_error"
                                detail = str(err.get("message") if isinstance(err, dict) else err)[
                                    :_DETAIL_MAX
                                ]
                                continue
                            choices = obj.get("choices")
                            if choices:
                                c = choices[0]
                                if chat:
                                    delta = c.get("delta") or {}
                                    text = delta.get("content") or delta.get("reasoning_content")
                                else:
                                    text = c.get("text")
                                if text:
                                    if first is None:
                                        first = now
                                    else:
                                        itl.append(now - last)
                                    last = now
                                    chunks += 1
                            u = obj.get("usage")
                            if u:
                                usage = u
            finally:
                await response.aclose()
    except BaseException as e:  # noqa: BLE001 - every failure becomes a sample, except cancellation
        if isinstance(e, asyncio.CancelledError):
            raise
        error = classify_exception(e)
        detail = (str(e) or type(e).__name__)[:_DETAIL_MAX]
    end = perf_counter()
    if error is None and not done:
        error = "incomplete_stream"
        detail = "the stream ended without data: [DONE]"
    if error is None and first is None:
        error = "empty_response"
        detail = "no content tokens were streamed"
    prompt_tokens = int(usage["prompt_tokens"]) if usage and usage.get("prompt_tokens") is not None else None
    output_tokens = (
        int(usage["completion_tokens"]) if usage and usage.get("completion_tokens") is not None else None
    )
    ttft = first - t0 if first is not None else None
    e2e = end - t0
    tpot = None
    if error is None and ttft is not None and output_tokens is not None and output_tokens > 1:
        tpot = (e2e - ttft) / (output_tokens - 1)
    return Sample(
        point=point,
        context_tokens=context_tokens,
        level=level,
        start_s=t0 - t_point,
        ok=error is None,
        status=status,
        error=error,
        error_detail=detail,
        ttft_s=ttft,
        e2e_s=e2e if error is None else None,
        tpot_s=tpot,
        itl_s=itl,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        chunks=chunks,
    )
