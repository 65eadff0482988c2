"""The one resolver of the diagnosing model's endpoint: primary, fallback, Cloud Run ID token, served name.

The diagnosis endpoint is ``GEMMA_SRE_MODEL_URL`` (default: the monitored ``VLLM_BASE_URL``), with
``GEMMA_SRE_FALLBACK_MODEL_URL`` tried when it does not answer: the model is often the patient. A Cloud
Run URL (https, not loopback) gets a Google ID token for that URL from ``mcp_tools.endpoint``'s token
provider; an explicit ``GEMMA_SRE_MODEL_API_KEY`` is the bearer then, and the ID token travels in
``X-Serverless-Authorization``. The first endpoint whose ``/v1/models`` answers wins, with the model
name it serves (vLLM's ``--served-model-name``).

Everything that talks to the model (the loop's diagnose step, ``gemma-sre diagnose``, the REPL's
questions, the MCP tools) receives a ``ModelEndpoint`` from ``resolve_model_endpoint``; none looks
the endpoint up itself.

Gemma 4 tool calls are parsed by vLLM itself. The server must run with::

    vllm serve google/gemma-4-12B-it --enable-auto-tool-choice --tool-call-parser gemma4
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pydantic import BaseModel, Field, SecretStr, field_validator

from mcp_tools.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_MAX_RETRIES = 2
PROBE_TIMEOUT_S = 10.0


def v1_url(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


def root_url(url: str) -> str:
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


class ModelEndpoint(BaseModel):
    """A resolved OpenAI-compatible chat endpoint (vLLM's /v1, or any other)."""

    base_url: str  # ".../v1" (added when missing)
    api_key: SecretStr | None = None
    model: str | None = None  # the served name (resolved endpoints always carry it)
    headers: dict[str, str] = Field(default_factory=dict)  # e.g. X-Serverless-Authorization for Cloud Run
    timeout_s: float = 60.0
    max_retries: int = 1
    temperature: float = 0.0
    max_tokens: int | None = 700  # None: no limit
    #: The whole diagnosis's deadline (every attempt and tool round; the answer streams, so a slow
    #: model is cut there cleanly). None: only ``timeout_s`` per request.
    deadline_s: float | None = None
    #: Send the rules as a separate system message. Off by default: Gemma 2's template raises on a
    #: system role, llama.cpp's ``gemma`` chat format drops it, Gemma 3's folds it into the first user
    #: turn; one user turn reads the same under all of them. On, a tool round goes as ``tool_calls`` and
    #: ``tool`` messages too; off, it is folded into user / model turns (``prompts.turns``).
    system_role: bool = False
    #: The context the server serves (vLLM's ``max_model_len`` from /v1/models), None when not said.
    max_model_len: int | None = None

    @field_validator("base_url")
    @classmethod
    def _v1(cls, v: str) -> str:
        return v1_url(v)


def model_urls(settings: Settings, *, primary: str | None = None, monitored: bool = True) -> list[str]:
    """The endpoints to try, in order: ``primary``, else ``GEMMA_SRE_MODEL_URL``, else (``monitored``)
    the monitored ``VLLM_BASE_URL``; then the fallback."""
    from mcp_tools.settings import check_http_url

    if primary:
        primary = check_http_url(primary, "--model-url")
    first = primary or (settings.diagnosis_model_url if monitored else settings.model_url)
    return list(dict.fromkeys(u for u in (first, settings.fallback_model_url) if u))


def _auth(url: str, api_key: str | None) -> tuple[str | None, dict[str, str]]:
    """(bearer, other headers) for an endpoint: the API key or a Google ID token (see the module doc)."""
    from mcp_tools.endpoint import VllmEndpoint

    headers = VllmEndpoint(root_url(url), api_key=api_key).headers()
    bearer = headers.pop("Authorization", "").removeprefix("Bearer ") or None
    return bearer, headers


def served_model_name(
    url: str, *, bearer: str | None, headers: dict[str, str], timeout_s: float
) -> str | None:
    """The first id ``/v1/models`` lists, or None when the endpoint does not answer."""
    found = served_model(url, bearer=bearer, headers=headers, timeout_s=timeout_s)
    return found[0] if found else None


def served_model(
    url: str, *, bearer: str | None, headers: dict[str, str], timeout_s: float
) -> tuple[str, int | None] | None:
    """(the first id ``/v1/models`` lists, its ``max_model_len`` when the server says it, as vLLM does),
    or None when the endpoint does not answer."""
    import httpx

    from mcp_tools.endpoint import tls_context

    h = dict(headers)
    if bearer:
        h["Authorization"] = f"Bearer {bearer}"
    try:
        r = httpx.get(v1_url(url) + "/models", headers=h, timeout=timeout_s, verify=tls_context())
        r.raise_for_status()
        data = r.json().get("data") or []
        if not data:
            return None
        ctx = data[0].get("max_model_len")
        ok = isinstance(ctx, int) and not isinstance(ctx, bool) and ctx > 0
        return str(data[0]["id"]), ctx if ok else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as e:
        log.info("model endpoint %s not reachable: %s", root_url(url), e.__class__.__name__)
        return None


def resolve_model_endpoint(
    urls: Sequence[str],
    *,
    api_key: SecretStr | str | None = None,
    model_name: str | None = None,
    timeout_s: float = 60.0,
    max_retries: int = DEFAULT_MAX_RETRIES,
) -> ModelEndpoint | None:
    """The first of ``urls`` whose ``/v1/models`` answers, with its served name and its auth; None when
    none answers. ``model_name`` is what the user configured: the served name wins (and a note is logged)."""
    key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
    for url in urls:
        try:
            bearer, headers = _auth(url, key)
        except Exception as e:  # bad URL, no credentials: try the next one
            log.warning("model endpoint %s unusable: %s", root_url(url), e.__class__.__name__)
            continue
        found = served_model(url, bearer=bearer, headers=headers, timeout_s=min(timeout_s, PROBE_TIMEOUT_S))
        if found is None:
            continue
        name, max_model_len = found
        if model_name and model_name != name:
            log.info("the endpoint serves %r, not the configured %r: using %r", name, model_name, name)
        return ModelEndpoint(
            base_url=url,
            api_key=SecretStr(bearer) if bearer else None,
            model=name,
            headers=headers,
            timeout_s=timeout_s,
            max_retries=max_retries,
            max_model_len=max_model_len,
        )
    return None


def configured_endpoints(
    settings: Settings, *, primary: str | None = None, monitored: bool = True
) -> list[ModelEndpoint]:
    """The configured endpoints, not yet resolved (``graph.diagnosis`` resolves each in turn, noting
    which did not answer): for a diagnosis that tries the primary, then the fallback."""
    return [
        endpoint_from_settings(settings, u)
        for u in model_urls(settings, primary=primary, monitored=monitored)
    ]


def endpoint_from_settings(settings: Settings, url: str) -> ModelEndpoint:
    """An endpoint for ``url`` (not yet resolved) with the settings' key, timeout, deadline and roles."""
    return ModelEndpoint(
        base_url=url,
        api_key=settings.model_api_key,
        timeout_s=settings.model_timeout_s,
        deadline_s=settings.model_deadline_s,
        system_role=settings.model_system_role,
    )


def resolve_from_settings(settings: Settings, *, primary: str | None = None) -> ModelEndpoint | None:
    """``resolve_model_endpoint`` over the settings' URLs (``primary`` replaces the diagnosis URL)."""
    return resolve_model_endpoint(
        model_urls(settings, primary=primary),
        api_key=settings.model_api_key,
        model_name=settings.model_name,
        timeout_s=settings.model_timeout_s,
    )
