"""The model client, through the real ChatOpenAI client at the wire (a scripted local server)."""

from __future__ import annotations

from graph_helpers import ScriptedOpenAI

from agent.model import build_diagnosis_model, chat_model, diagnosis_endpoint
from graph.config import Configuration

DOWN = "http://127.0.0.1:9/v1"  # nothing listens on the discard port


def test_chat_model_finds_the_served_name_and_none_when_down() -> None:
    with ScriptedOpenAI([{"content": "hi"}], model="served-gemma") as srv:
        m = chat_model(srv.url, timeout_s=5)
        assert m is not None and m.model_name == "served-gemma"
        assert m.invoke("hello").content == "hi"
    assert chat_model(DOWN, timeout_s=1) is None


def test_fallback_endpoint_is_used_when_the_primary_is_down() -> None:
    with ScriptedOpenAI([{"content": "from fallback"}], model="fallback-gemma") as srv:
        cfg = Configuration(model_url=DOWN, fallback_model_url=srv.url)
        ep = diagnosis_endpoint(cfg)
        assert ep is not None and ep.base_url == srv.url and ep.model == "fallback-gemma"
        m = build_diagnosis_model(cfg)
        assert m is not None and m.invoke("x").content == "from fallback"
    assert diagnosis_endpoint(Configuration(model_url=DOWN)) is None
    assert build_diagnosis_model(Configuration(model_url=DOWN)) is None
