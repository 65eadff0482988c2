"""The one model-endpoint resolver, through the real ChatOpenAI client at the wire (a scripted server)."""

from __future__ import annotations

from graph.diagnosis import chat_model
from mcp_tools.model_endpoint import configured_endpoints, model_urls, resolve_model_endpoint
from mcp_tools.settings import Settings
from tests.scripted_openai import ScriptedOpenAI

DOWN = "http://127.0.0.1:9/v1"  # nothing listens on the discard port


def test_the_served_name_is_found_and_none_when_down() -> None:
    with ScriptedOpenAI([{"content": "hi"}], model="served-gemma") as srv:
        ep = resolve_model_endpoint([srv.url], model_name="configured-name", timeout_s=5)
        assert ep is not None and ep.model == "served-gemma"  # the served name wins
        assert chat_model(ep).invoke("hello").content == "hi"
    assert resolve_model_endpoint([DOWN], timeout_s=1) is None


def test_the_fallback_answers_when_the_primary_is_down() -> None:
    with ScriptedOpenAI([{"content": "from fallback"}], model="fallback-gemma") as srv:
        ep = resolve_model_endpoint([DOWN, srv.url], timeout_s=5)
        assert ep is not None and ep.base_url == srv.url and ep.model == "fallback-gemma"
        assert chat_model(ep).invoke("x").content == "from fallback"


def test_an_api_key_is_the_bearer_and_never_a_header_in_the_clear() -> None:
    with ScriptedOpenAI([{"content": "ok"}], model="m") as srv:
        ep = resolve_model_endpoint([srv.url], api_key="sk-test-123", timeout_s=5)
        assert ep is not None and ep.api_key is not None
        assert ep.api_key.get_secret_value() == "sk-test-123"
        assert "sk-test-123" not in repr(ep) and "Authorization" not in ep.headers


def test_which_urls_are_tried_and_in_what_order() -> None:
    s = Settings(vllm_base_url="http://vllm:8000", fallback_model_url="http://backup:8000")
    assert model_urls(s) == ["http://vllm:8000", "http://backup:8000"]
    assert model_urls(s, monitored=False) == ["http://backup:8000"]  # a recorded incident: not the live one
    assert model_urls(s, primary="http://other:1") == ["http://other:1", "http://backup:8000"]
    assert [e.base_url for e in configured_endpoints(s)] == ["http://vllm:8000/v1", "http://backup:8000/v1"]
