"""The model client and the bounded tool loop, through the real ChatOpenAI client at the wire."""

from __future__ import annotations

import asyncio
import json

from graph_helpers import ScriptedOpenAI
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from agent.model import build_diagnosis_model, chat_model
from graph.config import Configuration
from graph.toolloop import run_tool_loop

CALLS: list[str] = []


@tool
def get_vllm_metrics(service: str) -> str:
    """Parsed vLLM metrics of a service (read-only)."""
    CALLS.append(service)
    return json.dumps({"kv_cache_usage": 0.97, "token": "Authorization: Bearer abcdefghijklmnop"})


def test_chat_model_finds_the_served_name_and_none_when_down() -> None:
    with ScriptedOpenAI([{"content": "hi"}], model="served-gemma") as srv:
        m = chat_model(srv.url, timeout_s=5)
        assert m is not None and m.model_name == "served-gemma"
        assert m.invoke("hello").content == "hi"
    assert chat_model("http://127.0.0.1:9/v1", timeout_s=1) is None


def test_fallback_endpoint_is_used_when_the_primary_is_down() -> None:
    with ScriptedOpenAI([{"content": "from fallback"}]) as srv:
        cfg = Configuration(model_url="http://127.0.0.1:9/v1", fallback_model_url=srv.url)
        m = build_diagnosis_model(cfg)
        assert m is not None
        assert m.invoke("x").content == "from fallback"
    assert build_diagnosis_model(Configuration(model_url="http://127.0.0.1:9/v1")) is None


def test_tool_loop_runs_only_bound_tools_and_is_bounded() -> None:
    CALLS.clear()
    script = [
        {"tool_calls": [{"name": "get_vllm_metrics", "arguments": {"service": "svc"}}]},
        {"tool_calls": [{"name": "destroy_vllm", "arguments": {"service": "svc"}}]},
        {"tool_calls": [{"name": "get_vllm_metrics", "arguments": {"service": "again"}}]},
        {"content": '{"category": "overload"}'},
    ]
    with ScriptedOpenAI(script) as srv:
        model = chat_model(srv.url, timeout_s=5)
        final = asyncio.run(
            run_tool_loop(model, [get_vllm_metrics], [HumanMessage("diagnose")], max_steps=2)
        )
        # two tool rounds were allowed, then the model was asked to answer without tools
        assert len(srv.requests) == 3
        assert "tools" not in srv.requests[-1]
        offered = [t["function"]["name"] for t in srv.requests[0]["tools"]]
        assert offered == ["get_vllm_metrics"]
        second = json.dumps(srv.requests[1]["messages"])
        third = json.dumps(srv.requests[2]["messages"])
    assert CALLS == ["svc"]  # destroy_vllm was never run; the third call was past the budget
    assert "abcdefghijklmnop" not in second  # tool output is redacted before the model sees it
    assert "not an available tool" in third
    # the model asked for yet another tool in its final answer: returned as is, never executed
    assert final.tool_calls and final.tool_calls[0]["args"] == {"service": "again"}
