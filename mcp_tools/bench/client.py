"""One streaming request, timed at the client: TTFT, inter-token gaps, e2e, usage, and the error type.

The hot path is kept lean (pre-serialised bodies, raw SSE splitting, one ``json.loads`` per event)
so the client is not what limits a benchmark; ``benchmarks/bench_client_ceiling.py`` measures it.
"""

from __future__ import annotations

import asyncio
import errno
import json
import resource
import socket
import ssl
from time import perf_counter
from typing import Any

import httpx

from mcp_tools.bench.http1 import Http1Pool, HTTPStatusLineError
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
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]  # headers and body go out as two writes
    limits = httpx.Limits(
        max_connections=max_connections, max_keepalive_connections=max_connections, keepalive_expiry=60
    )
    return httpx.AsyncClient(
        base_url=base_url,
        http2=False,
        transport=httpx.AsyncHTTPTransport(limits=limits, socket_options=nodelay),
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
    """A short, stable error type for a transport failure (httpx or the lean HTTP/1.1 client)."""
    if isinstance(e, httpx.PoolTimeout):
        return "pool_timeout"
    if isinstance(e, httpx.ConnectTimeout):
        return "connect_timeout"
    if isinstance(e, httpx.TimeoutException | TimeoutError):
        return "timeout"
    if isinstance(e, httpx.ConnectError | ConnectionRefusedError | socket.gaierror):
        return "connect_error"
    if isinstance(e, httpx.RemoteProtocolError | asyncio.IncompleteReadError | ConnectionAbortedError):
        return "connection_dropped"
    if isinstance(e, ConnectionResetError | BrokenPipeError):
        return "connection_reset"
    if isinstance(e, httpx.ReadError | httpx.WriteError):
        cause: BaseException | None = e.__cause__ or e.__context__
        while cause is not None:
            if isinstance(cause, ConnectionResetError) or getattr(cause, "errno", None) == errno.ECONNRESET:
                return "connection_reset"
            cause = cause.__cause__ or cause.__context__
        return "read_error" if isinstance(e, httpx.ReadError) else "write_error"
    if isinstance(e, ssl.SSLError):
        return "tls_error"
    if isinstance(e, json.JSONDecodeError):
        return "bad_sse"
    if isinstance(e, HTTPStatusLineError | ValueError | asyncio.LimitOverrunError):
        return "protocol_error"
    if isinstance(e, OSError):
        return "connection_error"
    return type(e).__name__


class _SSE:
    """Incremental server-sent-events parser that timestamps content-bearing events."""

    __slots__ = ("chat", "buf", "first", "last", "itl", "chunks", "usage", "done", "error", "detail")

    def __init__(self, chat: bool) -> None:
        self.chat = chat
        self.buf = b""
        self.first: float | None = None
        self.last = 0.0
        self.itl: list[float] = []
        self.chunks = 0
        self.usage: dict[str, Any] | None = None
        self.done = False
        self.error: str | None = None
        self.detail: str | None = None

    def feed(self, raw: bytes, now: float) -> None:
        buf = self.buf + raw if self.buf else raw
        loads = json.loads
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
                self.done = True
                continue
            obj = loads(data)
            if "error" in obj and not obj.get("choices"):
                err = obj["error"]
                self.error = "server_error"
                self.detail = str(err.get("message") if isinstance(err, dict) else err)[:_DETAIL_MAX]
                continue
            choices = obj.get("choices")
            if choices:
                c = choices[0]
                if self.chat:
                    delta = c.get("delta") or {}
                    text = delta.get("content") or delta.get("reasoning_content")
                else:
                    text = c.get("text")
                if text:
                    if self.first is None:
                        self.first = now
                    else:
                        self.itl.append(now - self.last)
                    self.last = now
                    self.chunks += 1
            u = obj.get("usage")
            if u:
                self.usage = u
        self.buf = buf


Transport = httpx.AsyncClient | Http1Pool


async def send_streaming(
    client: Transport,
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
    sse = _SSE(chat)
    status: int | None = None
    error: str | None = None
    detail: str | None = None
    t0 = perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            if isinstance(client, Http1Pool):
                resp = await client.post(path, body, headers)
                try:
                    status = resp.status
                    if status != 200:
                        error = f"http_{status}"
                        detail = _server_message(await resp.read())
                    else:
                        async for raw in resp.iter_body():
                            sse.feed(raw, perf_counter())
                finally:
                    resp.release()
            else:
                request = client.build_request("POST", path, content=body, headers=headers)
                response = await client.send(request, stream=True)
                try:
                    status = response.status_code
                    if status != 200:
                        error = f"http_{status}"
                        detail = _server_message(await response.aread())
                    else:
                        async for raw in response.aiter_bytes():
                            sse.feed(raw, perf_counter())
                finally:
                    await response.aclose()
    except BaseException as e:  # noqa: BLE001 - every failure becomes a sample, except cancellation
        if isinstance(e, asyncio.CancelledError):
            raise
        error = classify_exception(e)
        detail = (str(e) or type(e).__name__)[:_DETAIL_MAX]
    end = perf_counter()
    if error is None and sse.error is not None:
        error, detail = sse.error, sse.detail
    if error is None and not sse.done:
        error = "incomplete_stream"
        detail = "the stream ended without data: [DONE]"
    first = sse.first
    if error is None and first is None:
        error = "empty_response"
        detail = "no content tokens were streamed"
    usage = sse.usage
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
        itl_s=sse.itl,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        chunks=sse.chunks,
    )
