"""One streaming request, timed at the client: TTFT, inter-token gaps, e2e, usage, and the error type.

The timed requests go through an ``aiohttp.ClientSession`` (the client ``vllm bench serve`` uses);
discovery and ``/tokenize`` stay on httpx. ``aiohttp`` is imported inside the
functions so that importing this module (CLI and MCP start-up) stays fast. The hot path is kept
lean (pre-serialised bodies, pre-built URL and headers, raw SSE line splitting, one JSON decode
per event); ``benchmarks/bench_client_ceiling.py`` measures its ceiling.
"""

from __future__ import annotations

import errno
import json
import resource
import ssl
from time import perf_counter
from typing import TYPE_CHECKING, Any

from mcp_tools.bench.stats import Sample

if TYPE_CHECKING:
    import aiohttp
    from yarl import URL

_DETAIL_MAX = 300
_raw_decode = json.JSONDecoder().raw_decode

#: Idle keep-alive connections are closed after this long: below the 5 s keep-alive of uvicorn (and
#: so vLLM), so a request is never sent on a connection the server is about to close.
KEEPALIVE_S = 4.0


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


def env_proxy(url: str) -> str | None:
    """The proxy the environment (``HTTP(S)_PROXY``, ``NO_PROXY``) names for ``url``, as httpx would use."""
    from urllib.parse import urlsplit
    from urllib.request import getproxies, proxy_bypass

    u = urlsplit(url)
    proxy = getproxies().get(u.scheme)
    if not proxy or proxy_bypass(u.hostname or ""):
        return None
    return str(proxy)


def make_session(
    url: str, max_connections: int, timeout_s: float, ssl_context: ssl.SSLContext | None = None
) -> aiohttp.ClientSession:
    """An aiohttp session for requests to ``url`` with one keep-alive connection per concurrent
    request (and open files to match). ``timeout_s`` bounds each request from send to the end of the
    stream. Call inside a running event loop."""
    import aiohttp

    raise_open_files_limit(max_connections * 2 + 256)
    connector = aiohttp.TCPConnector(
        limit=max_connections,
        limit_per_host=max_connections,
        keepalive_timeout=KEEPALIVE_S,
        ssl=ssl_context if ssl_context is not None else True,
    )
    timeout = aiohttp.ClientTimeout(total=timeout_s, connect=min(30.0, timeout_s))
    # The environment's proxy is looked up once here: trust_env=True would do it (and a .netrc
    # look-up) in a worker thread for every request, which halves the client's ceiling.
    return aiohttp.ClientSession(connector=connector, timeout=timeout, proxy=env_proxy(url))


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


def _is_reset(e: BaseException | None) -> bool:
    while e is not None:
        if isinstance(e, ConnectionResetError | BrokenPipeError) or getattr(e, "errno", None) in (
            errno.ECONNRESET,
            errno.EPIPE,
        ):
            return True
        e = e.__cause__ or e.__context__
    return False


def classify_exception(e: BaseException) -> str:
    """A short, stable error type for a transport failure, from aiohttp's exception classes."""
    import aiohttp

    if isinstance(e, aiohttp.ConnectionTimeoutError):
        return "connect_timeout"
    if isinstance(e, aiohttp.ServerTimeoutError | TimeoutError):
        return "timeout"
    if isinstance(e, aiohttp.ClientSSLError | ssl.SSLError):
        return "tls_error"
    if isinstance(e, aiohttp.ClientConnectorError | ConnectionRefusedError):
        return "connect_error"
    if isinstance(e, aiohttp.ServerDisconnectedError):
        return "connection_dropped"  # closed before the response was complete
    if isinstance(e, aiohttp.ClientPayloadError):
        # The body stopped short: a reset by the peer, or a clean close mid-stream. aiohttp chains the
        # parser's error, and names the socket's error only in the message.
        reset = _is_reset(e) or "ConnectionResetError" in str(e)
        return "connection_reset" if reset else "connection_dropped"
    if _is_reset(e):
        return "connection_reset"
    if isinstance(e, aiohttp.ClientResponseError):
        return "protocol_error"  # e.g. not an HTTP/1.x answer
    if isinstance(e, json.JSONDecodeError):
        return "bad_sse"
    if isinstance(e, aiohttp.ClientOSError | OSError):
        return "connection_error"
    if isinstance(e, aiohttp.ClientError):
        return "client_error"
    return type(e).__name__


class _SSE:
    """Incremental server-sent-events parser that timestamps content-bearing events.

    Each ``data:`` line is one event (vLLM's framing); comments, other fields and blank separators
    are skipped, and ``\\r\\n`` line ends are accepted.
    """

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
        lines = (self.buf + raw if self.buf else raw).split(b"\n")
        self.buf = lines.pop()  # the unfinished last line (empty when the piece ends a line)
        decode = _raw_decode
        chat = self.chat
        for line in lines:
            if line[:5] != b"data:":
                continue  # blank separators, comments / keep-alives, other SSE fields
            data = line[5:].strip()
            if data == b"[DONE]":
                self.done = True
                continue
            text = data.decode()
            obj, end = decode(text)  # json.loads without its per-call detour (about half the cost)
            if end != len(text):
                raise json.JSONDecodeError("extra data after the event's JSON", text, end)
            choices = obj.get("choices")
            if choices:
                c = choices[0]
                if chat:
                    delta = c.get("delta")
                    piece = delta and (delta.get("content") or delta.get("reasoning_content"))
                else:
                    piece = c.get("text")
                if piece:
                    if self.first is None:
                        self.first = now
                    else:
                        self.itl.append(now - self.last)
                    self.last = now
                    self.chunks += 1
            elif "error" in obj:
                err = obj["error"]
                self.error = "server_error"
                self.detail = str(err.get("message") if isinstance(err, dict) else err)[:_DETAIL_MAX]
                continue
            if "usage" in obj and obj["usage"]:
                self.usage = obj["usage"]


async def send_streaming(
    session: aiohttp.ClientSession,
    url: URL,
    body: bytes,
    headers: dict[str, str],
    *,
    chat: bool,
    point: int,
    context_tokens: int,
    level: float,
    t_point: float,
) -> Sample:
    """POST one streaming request and time it (the session's timeout bounds it). Never raises for
    request failures: they become samples."""
    sse = _SSE(chat)
    status: int | None = None
    error: str | None = None
    detail: str | None = None
    t0 = perf_counter()
    try:
        async with session.post(url, data=body, headers=headers) as resp:
            status = resp.status
            if status != 200:
                error = f"http_{status}"
                detail = _server_message(await resp.read())
            else:
                # Each piece the socket delivered is timestamped on arrival and split into SSE lines
                # here: ~35% more requests/s than ``async for line in resp.content`` at concurrency
                # 256, and no line-length limit (aiohttp's readline raises LineTooLong past 512 KiB).
                read = resp.content.readany
                feed = sse.feed
                while raw := await read():
                    feed(raw, perf_counter())
    except Exception as e:  # every request failure becomes a sample (cancellation propagates)
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
