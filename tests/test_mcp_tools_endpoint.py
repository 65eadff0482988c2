"""VllmEndpoint against a local OpenAI-compatible server over real HTTP."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator

import pytest

from mcp_tools import endpoint as ep
from mcp_tools.endpoint import VllmEndpoint, is_loopback
from mcp_tools.errors import ExternalError, UserError
from tests.scripted_openai import MODEL, REPLY, ScriptedOpenAI, free_port


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, ScriptedOpenAI]]:
    with ScriptedOpenAI(ttft_s=0.05, gap_s=0.01) as s:
        yield s.root, s


async def test_health_models_metrics(server: tuple[str, ScriptedOpenAI]) -> None:
    url, script = server
    e = VllmEndpoint(url + "/v1")  # a /v1 suffix is accepted
    assert await e.health() is True
    assert await e.models() == [MODEL]
    assert "vllm:kv_cache_usage_perc" in await e.metrics_text()
    # loopback: no Authorization header is sent
    assert all("authorization" not in r["headers"] for r in script.log)
    script.health_status = 503
    try:
        assert await e.health() is False
    finally:
        script.health_status = 200


async def test_streamed_chat_uses_real_usage_not_chunks(server: tuple[str, ScriptedOpenAI]) -> None:
    url, script = server
    e = VllmEndpoint(url)
    r = await e.chat([{"role": "user", "content": "why is it slow?"}], max_tokens=64)
    assert r.text == REPLY
    assert r.model == MODEL and r.finish_reason == "stop"
    s = r.stats
    n_tokens = len(REPLY.split(" "))
    assert s.usage_reported and s.completion_tokens == n_tokens
    assert s.chunks < n_tokens  # several tokens per chunk: counting chunks would be wrong
    assert s.prompt_tokens == 1000 + len(script.requests)  # as the server reported it
    assert s.ttft_s is not None and s.ttft_s >= script.ttft_s * 0.9
    assert s.itl_mean_s is not None and s.decode_tokens_per_s is not None
    # the server sleeps gap_s between chunks of 3 tokens: the per-token mean is about a third of that
    assert s.itl_mean_s < script.gap_s
    # (a chunk delayed by a busy machine arrives just before the next one: allow for that, not more)
    assert s.chunk_gap_p50_s is not None and s.chunk_gap_p50_s >= script.gap_s * 0.5
    body = script.requests[-1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["model"] == MODEL  # the served name, from /v1/models


async def test_non_streamed_chat(server: tuple[str, ScriptedOpenAI]) -> None:
    url, script = server
    r = await VllmEndpoint(url).chat([{"role": "user", "content": "hi"}], stream=False, max_tokens=8)
    assert r.text == REPLY and r.stats.streamed is False
    assert r.stats.completion_tokens == len(REPLY.split(" "))
    assert r.stats.ttft_s is None


async def test_a_stream_slower_than_its_deadline_is_one_clear_error(
    server: tuple[str, ScriptedOpenAI],
) -> None:
    url, script = server
    script.gap_s = 0.2  # each chunk takes longer than the whole deadline allows
    try:
        with pytest.raises(ExternalError, match="did not answer within"):
            await VllmEndpoint(url).chat([{"role": "user", "content": "x"}], max_tokens=64, timeout=0.3)
    finally:
        script.gap_s = 0.01


async def test_unreachable_endpoint_is_one_clear_error() -> None:
    e = VllmEndpoint(f"http://127.0.0.1:{free_port()}", timeout_s=2)
    with pytest.raises(ExternalError, match="cannot reach"):
        await e.health()
    with pytest.raises(ExternalError, match="cannot reach"):
        await e.chat([{"role": "user", "content": "x"}], model="m")


async def test_bad_input() -> None:
    with pytest.raises(UserError, match="http:// or https://"):
        VllmEndpoint("ftp://example")
    e = VllmEndpoint("http://127.0.0.1:1")
    with pytest.raises(UserError, match="max_tokens"):
        await e.chat([{"role": "user", "content": "x"}], max_tokens=0, model="m")
    with pytest.raises(UserError, match="at least one message"):
        await e.chat([], model="m")


def _jwt(exp: float) -> str:
    def b64(d: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")

    return f"{b64({'alg': 'RS256'})}.{b64({'exp': exp, 'aud': 'x'})}.sig"


def test_id_token_cached_until_expiry_and_sent_for_https(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Google token source is the one thing replaced (no credentials here); caching is ours."""
    calls: list[str] = []
    expiry = [time.time() + 3600]

    def fake_fetch(audience: str) -> str:
        calls.append(audience)
        return _jwt(expiry[0])

    monkeypatch.setattr(ep, "_fetch_id_token", fake_fetch)
    ep.ID_TOKENS.clear()
    e = VllmEndpoint("https://gemma-abc-uc.a.run.app/v1")
    h1 = e.headers()
    h2 = e.headers()
    assert h1 == h2 and h1["Authorization"].startswith("Bearer ")
    assert calls == ["https://gemma-abc-uc.a.run.app"]  # the service URL is the audience; cached
    # a token about to expire is replaced
    ep.ID_TOKENS.clear()
    expiry[0] = time.time() + 30
    e.headers()
    e.headers()
    assert len(calls) == 3
    # with an API key the Cloud Run token moves to X-Serverless-Authorization
    k = VllmEndpoint("https://gemma-abc-uc.a.run.app", api_key="sk-test")
    hk = k.headers()
    assert hk["Authorization"] == "Bearer sk-test" and hk["X-Serverless-Authorization"].startswith("Bearer ")
    assert "sk-test" not in repr(k)
    ep.ID_TOKENS.clear()


def test_loopback_detection() -> None:
    assert is_loopback("http://127.0.0.1:8000") and is_loopback("http://localhost:1")
    assert not is_loopback("https://gemma-abc-uc.a.run.app")
    assert is_loopback("http://[::1]:8000") and is_loopback("127.0.0.2") and is_loopback("::1")
    assert not is_loopback("http://0.0.0.0:8000") and not is_loopback("0.0.0.0")  # every interface
    assert VllmEndpoint("http://127.0.0.1:8000").headers() == {}
