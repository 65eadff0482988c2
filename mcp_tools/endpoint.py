"""The vLLM endpoint over httpx, with Cloud Run authentication and honest streaming statistics.

Authentication (``auth="auto"``): loopback and plain-http URLs get none; an https URL gets a Google
ID token for the service URL as audience, from the ambient credentials (service account, metadata
server, or impersonated credentials), cached until shortly before it expires. When there are no
credentials the call goes out unauthenticated (public services work), and a 401/403 then says why.
An optional API key (vLLM ``--api-key``) is sent as ``Authorization: Bearer``; the Cloud Run token
then travels in ``X-Serverless-Authorization``.

Statistics from ``chat``: TTFT is the time to the first chunk that carries text; token counts come
only from the server's ``usage`` (requested with ``stream_options.include_usage``), never from
counting chunks; the mean inter-token latency is decode time over (completion tokens - 1); the gaps
between streamed chunks are reported separately as what they are.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import ssl
import threading
import time
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, Field, SecretStr

from mcp_tools.errors import ExternalError, UserError

log = logging.getLogger(__name__)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS settings every call shares (``verify=tls_context()``): httpx builds a context per client
    otherwise, for http:// URLs too (it loads the CA bundle each time, 20 to 45 ms of CPU per call),
    and a call makes a client of its own (``httpx.get`` included)."""
    return httpx.create_ssl_context()


AuthMode = Literal["auto", "none", "id_token"]
_TOKEN_MARGIN_S = 120.0


# --- ID tokens ---------------------------------------------------------------------------------------


class _TokenCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens: dict[str, tuple[str, float]] = {}

    def get(self, audience: str) -> str:
        with self._lock:
            hit = self._tokens.get(audience)
            if hit and hit[1] - _TOKEN_MARGIN_S > time.time():
                return hit[0]
        token = _fetch_id_token(audience)
        with self._lock:
            self._tokens[audience] = (token, _jwt_expiry(token))
        return token

    def clear(self) -> None:
        with self._lock:
            self._tokens.clear()


ID_TOKENS = _TokenCache()


def _jwt_expiry(token: str) -> float:
    """The ``exp`` claim of a JWT (not verified: only used to decide when to fetch a new one)."""
    try:
        payload = token.split(".")[1]
        payload += "=" * (-len(payload) % 4)
        return float(json.loads(base64.urlsafe_b64decode(payload))["exp"])
    except Exception:
        return time.time() + 300.0  # unknown: keep it five minutes


def _fetch_id_token(audience: str) -> str:
    import google.auth
    import google.auth.transport.requests
    from google.auth import exceptions as auth_exc
    from google.oauth2 import id_token

    request = google.auth.transport.requests.Request()
    try:
        return str(id_token.fetch_id_token(request, audience))
    except auth_exc.DefaultCredentialsError:
        pass
    # Impersonated credentials (gcloud ... --impersonate-service-account) mint ID tokens too.
    creds, _ = google.auth.default()
    from google.auth import impersonated_credentials

    if isinstance(creds, impersonated_credentials.Credentials):
        idc = impersonated_credentials.IDTokenCredentials(creds, target_audience=audience, include_email=True)
        idc.refresh(request)
        return str(idc.token)
    raise auth_exc.DefaultCredentialsError(
        "the ambient credentials cannot mint an ID token (use a service account or impersonation)"
    )


def is_loopback(url_or_host: str) -> bool:
    """Whether a URL's host (or a bare host) is this machine's loopback: ``localhost``, 127.0.0.0/8,
    ``::1``. ``0.0.0.0`` is not: it means every interface."""
    import ipaddress

    text = url_or_host.strip()
    host = urlsplit(text).hostname if "://" in text else text.strip("[]")
    host = (host or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# --- results ---------------------------------------------------------------------------------------


class ChatStats(BaseModel):
    ttft_s: float | None = None  # request sent -> first chunk carrying text
    total_s: float = 0.0
    prompt_tokens: int | None = None  # from the server's usage, never estimated
    completion_tokens: int | None = None
    usage_reported: bool = False
    itl_mean_s: float | None = None  # (last text chunk - first) / (completion_tokens - 1)
    decode_tokens_per_s: float | None = None
    chunks: int = 0
    chunk_gap_p50_s: float | None = None  # gaps between streamed chunks (a chunk may hold >1 token)
    chunk_gap_p90_s: float | None = None
    chunk_gap_max_s: float | None = None
    streamed: bool = True


class ChatResult(BaseModel):
    text: str
    model: str
    finish_reason: str | None = None
    stats: ChatStats = Field(default_factory=ChatStats)


def _pct(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) of ``values``, None when there are none."""
    from mcp_tools.bench.stats import percentile

    return percentile(sorted(values), q * 100) if values else None


# --- the endpoint ----------------------------------------------------------------------------------


class VllmEndpoint:
    """A vLLM (OpenAI-compatible) server: health, served models, metrics, chat with stats."""

    def __init__(
        self,
        base_url: str,
        auth: AuthMode = "auto",
        *,
        timeout_s: float = 30.0,
        api_key: SecretStr | str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not isinstance(base_url, str) or urlsplit(base_url).scheme not in ("http", "https"):
            raise UserError(f"endpoint URL must start with http:// or https://, not {base_url!r}")
        if not urlsplit(base_url).hostname:
            raise UserError(f"endpoint URL has no host: {base_url!r}")
        self.base_url = base_url.rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[: -len("/v1")]
        self.auth: AuthMode = auth
        self.timeout_s = timeout_s
        self._api_key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
        self._transport = transport
        self._served_model: str | None = None

    def __repr__(self) -> str:  # never shows the key
        return f"VllmEndpoint({self.base_url!r}, auth={self.auth!r})"

    @property
    def audience(self) -> str:
        p = urlsplit(self.base_url)
        return f"{p.scheme}://{p.netloc}"

    def wants_id_token(self) -> bool:
        """Whether calls carry a Google ID token (https, not loopback, unless auth says otherwise)."""
        return self._wants_id_token()

    def _wants_id_token(self) -> bool:
        if self.auth == "none":
            return False
        if self.auth == "id_token":
            return True
        return urlsplit(self.base_url).scheme == "https" and not is_loopback(self.base_url)

    def headers(self) -> dict[str, str]:
        """Request headers with authentication (the token is fetched or taken from the cache)."""
        h: dict[str, str] = {}
        if self._api_key:
            h["Authorization"] = f"Bearer {self._api_key}"
        if self._wants_id_token():
            from google.auth import exceptions as auth_exc

            try:
                token = ID_TOKENS.get(self.audience)
            except auth_exc.GoogleAuthError as e:
                if self.auth == "id_token":
                    raise ExternalError(f"cannot get a Google ID token for {self.audience}: {e}") from None
                log.info("no Google ID token for %s (%s); calling unauthenticated", self.audience, e)
            else:
                h["X-Serverless-Authorization" if self._api_key else "Authorization"] = f"Bearer {token}"
        return h

    def _client(self, timeout: float | None = None) -> httpx.AsyncClient:
        t = timeout or self.timeout_s
        return httpx.AsyncClient(
            base_url=self.base_url,
            timeout=httpx.Timeout(t, connect=min(10.0, t)),
            transport=self._transport,
            verify=tls_context(),
            follow_redirects=False,
        )

    async def _headers(self) -> dict[str, str]:
        if self._wants_id_token():
            import asyncio

            return await asyncio.to_thread(self.headers)  # token fetch is blocking I/O
        return self.headers()

    def _raise_for(self, what: str, r: httpx.Response) -> None:
        if r.status_code < 400:
            return
        body = " ".join(r.text.split())[:300]
        if r.status_code in (401, 403):
            hint = (
                " (the service needs an authenticated caller: Google credentials that can mint an ID "
                "token and roles/run.invoker)"
                if self._wants_id_token() or not is_loopback(self.base_url)
                else ""
            )
            raise ExternalError(f"{what}: HTTP {r.status_code} from {self.base_url}{hint}")
        raise ExternalError(f"{what}: HTTP {r.status_code} from {self.base_url}: {body}")

    async def _get(self, path: str, what: str, timeout: float | None = None) -> httpx.Response:
        headers = await self._headers()
        try:
            async with self._client(timeout) as c:
                r = await c.get(path, headers=headers)
        except httpx.TimeoutException:
            raise ExternalError(
                f"{what}: {self.base_url} did not answer within {timeout or self.timeout_s:.0f} s"
            ) from None
        except httpx.HTTPError as e:
            raise ExternalError(f"{what}: cannot reach {self.base_url} ({e.__class__.__name__})") from None
        return r

    async def health(self, timeout: float | None = None) -> bool:
        """True when ``/health`` answers 200; False on any other status. Unreachable raises."""
        r = await self._get("/health", "health check", timeout)
        return r.status_code == 200

    async def models(self) -> list[str]:
        """The served model names from ``/v1/models``."""
        r = await self._get("/v1/models", "list models")
        self._raise_for("list models", r)
        try:
            data = r.json()["data"]
            return [str(m["id"]) for m in data]
        except (ValueError, KeyError, TypeError):
            raise ExternalError(
                f"list models: {self.base_url}/v1/models did not return a model list"
            ) from None

    async def served_model(self) -> str:
        if self._served_model is None:
            names = await self.models()
            if not names:
                raise ExternalError(f"{self.base_url} serves no model")
            self._served_model = names[0]
        return self._served_model

    async def metrics_text(self) -> str:
        r = await self._get("/metrics", "read metrics")
        self._raise_for("read metrics", r)
        return r.text

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        stream: bool = True,
        max_tokens: int = 256,
        model: str | None = None,
        temperature: float | None = None,
        timeout: float | None = None,
    ) -> ChatResult:
        """One chat completion; with ``stream`` the statistics include TTFT and inter-token latency."""
        if not messages:
            raise UserError("chat needs at least one message")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 1 <= max_tokens <= 32768:
            raise UserError(f"max_tokens must be a whole number from 1 to 32768, not {max_tokens!r}")
        model = model or await self.served_model()
        body: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": max_tokens}
        if temperature is not None:
            body["temperature"] = temperature
        headers = await self._headers()
        total_timeout = timeout or max(self.timeout_s, 120.0)
        try:
            if stream:
                return await self._chat_stream(body, headers, total_timeout)
            return await self._chat_once(body, headers, total_timeout)
        except (httpx.TimeoutException, TimeoutError):  # a stream's overall deadline is a TimeoutError
            raise ExternalError(
                f"chat: {self.base_url} did not answer within {total_timeout:.0f} s"
            ) from None
        except httpx.HTTPError as e:
            raise ExternalError(f"chat: cannot reach {self.base_url} ({e.__class__.__name__})") from None

    async def _chat_once(self, body: dict[str, Any], headers: dict[str, str], timeout: float) -> ChatResult:
        t0 = time.perf_counter()
        async with self._client(timeout) as c:
            r = await c.post("/v1/chat/completions", json=body, headers=headers)
        total = time.perf_counter() - t0
        self._raise_for("chat", r)
        try:
            data = r.json()
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError):
            raise ExternalError("chat: the endpoint returned an unreadable completion") from None
        stats = ChatStats(total_s=total, streamed=False)
        _apply_usage(stats, data.get("usage"))
        return ChatResult(
            text=text,
            model=str(data.get("model", body["model"])),
            finish_reason=choice.get("finish_reason"),
            stats=stats,
        )

    async def _chat_stream(self, body: dict[str, Any], headers: dict[str, str], timeout: float) -> ChatResult:
        import anyio

        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        stats = ChatStats()
        parts: list[str] = []
        text_times: list[float] = []
        finish: str | None = None
        model = body["model"]
        t0 = time.perf_counter()
        with anyio.fail_after(timeout):
            async with (
                self._client(timeout) as c,
                c.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r,
            ):
                if r.status_code >= 400:
                    await r.aread()
                    self._raise_for("chat", r)
                async for line in r.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        break
                    try:
                        chunk = json.loads(payload)
                    except ValueError:
                        continue
                    now = time.perf_counter()
                    stats.chunks += 1
                    model = chunk.get("model", model)
                    if chunk.get("usage"):
                        _apply_usage(stats, chunk["usage"])
                    for ch in chunk.get("choices") or []:
                        delta = ch.get("delta") or {}
                        piece = delta.get("content") or delta.get("reasoning_content") or ""
                        if piece:
                            parts.append(delta.get("content") or "")
                            text_times.append(now)
                        if ch.get("finish_reason"):
                            finish = ch["finish_reason"]
        stats.total_s = time.perf_counter() - t0
        if text_times:
            stats.ttft_s = text_times[0] - t0
            gaps = [b - a for a, b in zip(text_times, text_times[1:], strict=False)]
            stats.chunk_gap_p50_s = _pct(gaps, 0.5)
            stats.chunk_gap_p90_s = _pct(gaps, 0.9)
            stats.chunk_gap_max_s = max(gaps) if gaps else None
            decode = text_times[-1] - text_times[0]
            if stats.completion_tokens and stats.completion_tokens > 1 and decode > 0:
                stats.itl_mean_s = decode / (stats.completion_tokens - 1)
                stats.decode_tokens_per_s = (stats.completion_tokens - 1) / decode
        return ChatResult(text="".join(parts), model=str(model), finish_reason=finish, stats=stats)


def _apply_usage(stats: ChatStats, usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if isinstance(pt, int):
        stats.prompt_tokens = pt
    if isinstance(ct, int):
        stats.completion_tokens = ct
    stats.usage_reported = isinstance(pt, int) or isinstance(ct, int)
