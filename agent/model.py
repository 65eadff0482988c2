"""The diagnosing model: ChatOpenAI against a vLLM server's OpenAI-compatible ``/v1``.

The diagnosis endpoint is ``GEMMA_SRE_MODEL_URL`` (default: the monitored ``VLLM_BASE_URL``), with
``GEMMA_SRE_FALLBACK_MODEL_URL`` tried when it fails: the model is often the patient. A Cloud Run
URL (``*.run.app``) gets a Google ID token for that URL as the bearer, from ``mcp_tools.endpoint``'s
token provider (cached until it expires); an explicit ``GEMMA_SRE_MODEL_API_KEY`` wins over it.
Every call has a timeout and a bounded number of retries.

Gemma 4 tool calls are parsed by vLLM itself. The server must run with::

    vllm serve google/gemma-4-12B-it --enable-auto-tool-choice --tool-call-parser gemma4

(``gemma4`` is vLLM's parser for Gemma 4's ``<|tool_call>call:name{...}<tool_call|>`` format; without
those two flags vLLM answers a request with ``tool_choice: auto`` with HTTP 400.)
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
from pydantic import SecretStr

log = logging.getLogger(__name__)

DEFAULT_MAX_RETRIES = 2


def _v1(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


def _root(url: str) -> str:
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def auth_for(url: str, explicit: str | None = None) -> tuple[str, dict[str, str]]:
    """(bearer for the OpenAI client, extra headers) for an endpoint, from ``VllmEndpoint.headers()``.

    A Cloud Run URL gets a Google ID token (cached until it expires); with an explicit API key the
    key is the bearer and the ID token travels in ``X-Serverless-Authorization``. The model is built
    once per diagnosis, well inside a token's lifetime.
    """
    from mcp_tools.endpoint import VllmEndpoint

    headers = VllmEndpoint(_root(url), api_key=explicit).headers()
    bearer = headers.pop("Authorization", "Bearer EMPTY").removeprefix("Bearer ")
    return bearer or "EMPTY", headers


def served_model_name(url: str, *, bearer: str, headers: dict[str, str], timeout_s: float) -> str | None:
    """The first id ``/v1/models`` lists (vLLM's ``--served-model-name``), or None if unreachable."""
    try:
        r = httpx.get(
            _v1(url) + "/models", headers={"Authorization": f"Bearer {bearer}", **headers}, timeout=timeout_s
        )
        r.raise_for_status()
        data = r.json().get("data") or []
        return str(data[0]["id"]) if data else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as e:
        log.info("model endpoint %s not reachable: %s", _root(url), e.__class__.__name__)
        return None


def chat_model(
    url: str,
    *,
    model: str | None = None,
    api_key: str | None = None,
    timeout_s: float = 60.0,
    max_retries: int = DEFAULT_MAX_RETRIES,
    temperature: float = 0.0,
) -> Any:
    """A ChatOpenAI for one vLLM endpoint, or None when the endpoint does not answer ``/v1/models``.

    The reachability probe doubles as the served-model lookup, so a down endpoint costs one short
    request, not a full retry cycle per diagnosis.
    """
    from langchain_openai import ChatOpenAI

    bearer, headers = auth_for(url, api_key)
    name = served_model_name(url, bearer=bearer, headers=headers, timeout_s=min(timeout_s, 10.0))
    if name is None:
        return None
    if model and model != name:
        log.info("the endpoint serves %r, not the configured %r: using %r", name, model, name)
    return ChatOpenAI(
        model=name,
        base_url=_v1(url),
        api_key=SecretStr(bearer),
        default_headers=headers or None,
        timeout=timeout_s,
        max_retries=max_retries,
        temperature=temperature,
    )


def diagnosis_endpoint(cfg: Any) -> Any:
    """The endpoint the diagnosis asks (``graph.diagnosis.ModelEndpoint``), or None when none answers.

    Tries ``cfg.model_url`` then ``cfg.fallback_model_url``: the first whose ``/v1/models`` answers
    wins, with its served model name and its bearer (a Cloud Run ID token for ``*.run.app``-style
    https URLs, or ``GEMMA_SRE_MODEL_API_KEY``). ``cfg`` is a ``graph.config.Configuration``.
    """
    from graph.diagnosis import ModelEndpoint
    from mcp_tools.settings import get_settings

    s = get_settings()
    explicit = s.model_api_key.get_secret_value() if s.model_api_key else None
    for url in (cfg.model_url, cfg.fallback_model_url):
        if not url:
            continue
        try:
            bearer, _headers = auth_for(url, explicit)
        except Exception as e:  # bad URL, no credentials: try the next one
            log.warning("model endpoint %s unusable: %s", _root(url), e.__class__.__name__)
            continue
        name = served_model_name(url, bearer=bearer, headers={}, timeout_s=min(s.model_timeout_s, 10.0))
        if name is None:
            continue
        if cfg.model_name and cfg.model_name != name:
            log.info("the endpoint serves %r, not the configured %r: using %r", name, cfg.model_name, name)
        return ModelEndpoint(
            base_url=_v1(url),
            api_key=SecretStr(bearer),
            model=name,
            timeout_s=s.model_timeout_s,
            max_retries=DEFAULT_MAX_RETRIES,
        )
    return None


def build_diagnosis_model(cfg: Any) -> Any:
    """The diagnosis model for a graph ``Configuration`` (primary, then fallback), or None.

    ``cfg`` is ``graph.config.Configuration`` (typed loosely: agent is the face, graph the engine).
    Returns a chat model, or the primary with the fallback behind it, or None when neither answers.
    """
    from mcp_tools.settings import get_settings

    explicit = get_settings().model_api_key
    key = explicit.get_secret_value() if explicit else None
    models = []
    for url in (cfg.model_url, cfg.fallback_model_url):
        if not url:
            continue
        m = chat_model(url, model=cfg.model_name, api_key=key, timeout_s=get_settings().model_timeout_s)
        if m is not None:
            models.append(m)
    if not models:
        return None
    return models[0] if len(models) == 1 else FallbackChat(models)


class FallbackChat:
    """Chat models tried in order: the first that answers wins. Supports ``bind_tools`` (each bound)."""

    def __init__(self, models: list[Any]) -> None:
        self.models = models

    @property
    def model_name(self) -> str:
        return str(getattr(self.models[0], "model_name", "model"))

    def bind_tools(self, tools: Any, **kwargs: Any) -> FallbackChat:
        return FallbackChat([m.bind_tools(tools, **kwargs) for m in self.models])

    def _try(self, method: str, *args: Any, **kwargs: Any) -> Any:
        last: Exception | None = None
        for m in self.models:
            try:
                return getattr(m, method)(*args, **kwargs)
            except Exception as e:  # the next endpoint
                log.warning("model endpoint failed (%s); trying the fallback", e.__class__.__name__)
                last = e
        assert last is not None
        raise last

    def invoke(self, *args: Any, **kwargs: Any) -> Any:
        return self._try("invoke", *args, **kwargs)

    async def ainvoke(self, *args: Any, **kwargs: Any) -> Any:
        last: Exception | None = None
        for m in self.models:
            try:
                return await m.ainvoke(*args, **kwargs)
            except Exception as e:
                log.warning("model endpoint failed (%s); trying the fallback", e.__class__.__name__)
                last = e
        assert last is not None
        raise last
