"""The MCP server over stdio, driven by the official MCP client (one server process for the module).

Model-backed tools talk to a local OpenAI-compatible server over real HTTP (VLLM_BASE_URL).
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.client.stdio import stdio_client

from tests.mcp_client import INITIALIZE, ROOT, SessionThread, server_env, stdio_params, text_of
from tests.scripted_openai import MODEL, REPLY, ScriptedOpenAI

READ_TOOLS = {
    "get_vllm_endpoint",
    "get_endpoint",
    "status_vllm",
    "list_revisions",
    "verify_model_health",
    "get_system_status",
    "get_model_details",
    "query_vllm",
    "query_gemma4",
    "query_gemma4_with_stats",
    "get_vllm_metrics",
    "plan_capacity",
    "get_service_logs",
    "analyze_cloud_logging",
    "suggest_sre_remediation",
    "analyze_gpu_logs",
    "run_benchmark",
    "get_help",
    "get_vllm_deployment_config",
    "get_vllm_gpu_deployment_config",
    "check_gpu_quotas",
    "list_vertex_models",
    "list_bucket_models",
    "get_vertex_ai_model_copy_instructions",
    "get_huggingface_model_copy_instructions",
    "get_huggingfacehub_download_path",
}
MUTATING = {"deploy_vllm", "destroy_vllm", "update_vllm_scaling", "rollback_service", "save_hf_token"}


@pytest.fixture(scope="module")
def model() -> Iterator[tuple[str, ScriptedOpenAI]]:
    with ScriptedOpenAI(ttft_s=0.05, gap_s=0.01) as s:
        yield s.root, s


@pytest.fixture(scope="module")
def client(
    model: tuple[str, ScriptedOpenAI], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SessionThread]:
    url, _ = model
    env = server_env({"VLLM_BASE_URL": url}, tmp_path_factory.mktemp("state"))
    st = SessionThread(lambda: stdio_client(stdio_params(env)))
    yield st
    st.close()


def test_lists_every_tool(client: SessionThread) -> None:
    names = client.tool_names()
    missing = (READ_TOOLS | MUTATING) - names
    assert not missing, f"missing tools: {missing}"
    assert len(READ_TOOLS | MUTATING) == 31  # the 26 existing names and the 5 new ones
    resources = client.run(lambda s: s.list_resources()).resources
    assert [str(r.uri) for r in resources] == ["config://vllm-deployment-template"]
    tools = client.run(lambda s: s.list_tools()).tools
    by_name = {t.name: t for t in tools}
    assert by_name["update_vllm_scaling"].annotations.destructiveHint is True
    assert by_name["get_vllm_metrics"].annotations.readOnlyHint is True
    assert by_name["get_vllm_metrics"].outputSchema is not None  # structured results


def test_every_tool_parameter_is_described(client: SessionThread) -> None:
    """Models pick tools and fill arguments from these: every parameter of every listed tool has a
    description, and no description is kept for a parameter no tool has."""
    from mcp_tools.server.params import PARAMS, TOOL_PARAMS

    tools = client.run(lambda s: s.list_tools()).tools
    params = {(t.name, k): v for t in tools for k, v in (t.inputSchema.get("properties") or {}).items()}
    assert len(params) > 150
    bare = sorted(f"{t}.{name}" for (t, name), schema in params.items() if not schema.get("description"))
    assert not bare, f"parameters without a description: {bare}"
    per_tool = {(t, k) for t, names in TOOL_PARAMS.items() for k in names}
    assert not per_tool - set(params), "descriptions of parameters no tool has"
    assert not set(PARAMS) - {name for _, name in params}
    scaling = {k: v["description"] for (t, k), v in params.items() if t == "update_vllm_scaling"}
    assert "second call" in scaling["confirmation_token"] and "1 to 1000" in scaling["max_instances"]


def test_query_vllm_against_local_model(client: SessionThread, model: tuple[str, ScriptedOpenAI]) -> None:
    _, script = model
    r = client.call("query_vllm", {"prompt": "what is wrong?", "max_tokens": 32})
    assert not r.isError, text_of(r)
    assert r.structuredContent["text"] == REPLY
    assert r.structuredContent["model"] == MODEL
    assert REPLY in text_of(r)
    r2 = client.call("query_gemma4", {"prompt": "hello"})
    assert not r2.isError and r2.structuredContent["completion_tokens"] == len(REPLY.split(" "))


def test_stats_come_from_usage_not_chunks(client: SessionThread, model: tuple[str, ScriptedOpenAI]) -> None:
    _, script = model
    r = client.call("query_gemma4_with_stats", {"prompt": "why is TTFT high?", "max_tokens": 64})
    assert not r.isError, text_of(r)
    sc = r.structuredContent
    n = len(REPLY.split(" "))
    assert sc["usage_reported"] is True and sc["completion_tokens"] == n
    assert sc["chunks"] < n  # the server packs three tokens per chunk
    assert sc["ttft_s"] >= script.ttft_s * 0.9
    assert "TTFT" in text_of(r)


def test_metrics_health_details_endpoint(client: SessionThread, model: tuple[str, ScriptedOpenAI]) -> None:
    url, _ = model
    m = client.call("get_vllm_metrics")
    assert not m.isError, text_of(m)
    assert m.structuredContent["kv_cache_usage"] == pytest.approx(0.5)
    assert m.structuredContent["num_requests_running"] == 2
    h = client.call("verify_model_health")
    assert not h.isError and h.structuredContent["healthy"] is True
    assert h.structuredContent["smoke_test_ok"] is True and h.structuredContent["models"] == [MODEL]
    d = client.call("get_model_details")
    assert not d.isError and d.structuredContent["served_models"] == [MODEL]
    e = client.call("get_vllm_endpoint")
    assert not e.isError and e.structuredContent == {"service": None, "url": url, "source": "VLLM_BASE_URL"}


def test_plan_capacity_tool(client: SessionThread) -> None:
    r = client.call(
        "plan_capacity", {"model": "google/gemma-4-12B-it", "gpu": "nvidia-l4", "max_model_len": 16384}
    )
    assert not r.isError, text_of(r)
    sc = r.structuredContent
    assert sc["gpu"] == "nvidia-l4" and isinstance(sc["fits"], bool) and sc["weights_gib"] > 0
    bad = client.call("plan_capacity", {"model": "no-such/model-xyz"})
    assert bad.isError and "no-such/model-xyz" in text_of(bad)
    # 0 is a value (not "not given", as 0 == False would make it): refused by the flag's own range.
    zero = client.call(
        "plan_capacity", {"model": "google/gemma-4-12B-it", "gpu": "nvidia-l4", "gpu_memory_utilization": 0}
    )
    assert zero.isError and "--gpu-memory-utilization: must be in (0, 1], got 0" in text_of(zero)


@pytest.mark.parametrize(
    "tool, args, message",
    [
        (
            "update_vllm_scaling",
            {"min_instances": -1, "max_instances": 2, "service_name": "gemma"},
            "min_instances",
        ),
        (
            "update_vllm_scaling",
            {"min_instances": 3, "max_instances": 2, "service_name": "gemma"},
            "above max",
        ),
        (
            "update_vllm_scaling",
            {"min_instances": 0, "max_instances": 0, "service_name": "gemma"},
            "max_instances",
        ),
        ("status_vllm", {"service_name": "Bad_Name"}, "invalid Cloud Run service name"),
        ("query_vllm", {"prompt": "x", "max_tokens": 0}, "max_tokens"),
        ("query_vllm", {"prompt": "   "}, "prompt is empty"),
        ("get_service_logs", {"service_name": "gemma", "since": "last tuesday"}, "bad 'since' value"),
        ("update_vllm_scaling", {"min_instances": "lots", "max_instances": 1}, "min_instances"),
        ("analyze_cloud_logging", {"filter_query": 'severity=ERROR OR logName:"x"'}, "not accepted"),
    ],
)
def test_bad_input_is_an_error_result_not_a_traceback(
    client: SessionThread, tool: str, args: dict, message: str
) -> None:
    r = client.call(tool, args)
    assert r.isError
    t = text_of(r)
    assert message in t
    assert "Traceback" not in t and 'File "' not in t


def test_no_service_configured_says_so(client: SessionThread) -> None:
    r = client.call("status_vllm")
    assert r.isError and "GEMMA_SRE_SERVICE" in text_of(r)


def test_stdout_carries_only_protocol(model: tuple[str, ScriptedOpenAI], tmp_path: Path) -> None:
    """Raw stdio: every line the server writes to stdout is a JSON-RPC message."""
    url, _ = model
    env = server_env({"VLLM_BASE_URL": url}, tmp_path)
    msgs = [
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "get_vllm_metrics", "arguments": {}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "status_vllm", "arguments": {}},
        },
    ]
    # stderr (verbose logs) goes to a file: an undrained pipe would fill and stall the server
    log = (tmp_path / "stderr.log").open("w")
    p = subprocess.Popen(
        [sys.executable, "-m", "agent.cli", "--verbose", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert p.stdin is not None and p.stdout is not None
    try:
        for m in msgs:
            p.stdin.write(json.dumps(m) + "\n")
        p.stdin.flush()
        # a reader thread, not select(): select() sees the pipe, not the lines already buffered
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(
            target=lambda: [lines.put(x) for x in iter(p.stdout.readline, "")], daemon=True
        ).start()
        ids: set[object] = set()
        deadline = time.monotonic() + 60
        while not {1, 2, 3, 4} <= ids and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1.0)
            except queue.Empty:
                if p.poll() is not None and lines.empty():
                    break
                continue
            if not line.strip():
                continue
            doc = json.loads(line)  # a non-JSON line on stdout fails here
            assert doc.get("jsonrpc") == "2.0"
            ids.add(doc.get("id"))
        assert {1, 2, 3, 4} <= ids
    finally:
        p.stdin.close()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        p.stdout.close()
        log.close()


def test_run_benchmark_against_local_model(client: SessionThread) -> None:
    r = client.call(
        "run_benchmark",
        {"concurrencies": [1, 2], "context_lengths": [64], "output_tokens": 8, "requests_per_point": 4},
        timeout=120,
    )
    assert not r.isError, text_of(r)
    sc = r.structuredContent
    assert [p["level"] for p in sc["points"]] == [1.0, 2.0]
    assert all(p["ok"] == p["requests"] > 0 for p in sc["points"])
    assert sc["points"][0]["ttft"]["p50"] is not None
    assert sc["run_dir"] and Path(sc["run_dir"]).is_dir()  # the full run, where the result says
    too_big = client.call("run_benchmark", {"concurrencies": list(range(1, 14))})
    assert too_big.isError and "at most 12" in text_of(too_big)


def test_agent_tools_on_pasted_text(client: SessionThread) -> None:
    text = "\n".join(
        [
            "INFO 05-29 19:07:48 [loader.py:447] Loading weights took 41.2 seconds",
            "ERROR 05-29 19:08:02 [core.py:700] EngineCore failed to start.",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total "
            "capacity of 22.03 GiB of which 1.02 GiB is free.",
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`"
            " when initializing the engine.",
        ]
    )
    r = client.call("analyze_gpu_logs", {"log_text": text}, timeout=120)
    assert not r.isError, text_of(r)
    cats = [f["category"] for f in r.structuredContent["findings"]]
    assert cats and set(cats) & {"weights_oom", "kv_cache_oom", "runtime_oom"}
    s = client.call("suggest_sre_remediation", {"error_message": text}, timeout=120)
    assert not s.isError, text_of(s)
    assert s.structuredContent["category"] in {"weights_oom", "kv_cache_oom", "runtime_oom"}
    assert s.structuredContent["plan"]["steps"]
    empty = client.call("suggest_sre_remediation", {})
    assert empty.isError and "GEMMA_SRE_SERVICE" in text_of(empty)


async def test_run_benchmark_reports_progress(model: tuple[str, ScriptedOpenAI], tmp_path: Path) -> None:
    """In-process server, official client over memory streams, with a progress callback."""
    from mcp.shared.memory import create_connected_server_and_client_session

    from mcp_tools.server import build_server
    from mcp_tools.settings import Settings

    url, _ = model
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    settings = Settings(vllm_base_url=url, state_dir=tmp_path)
    async with create_connected_server_and_client_session(build_server(settings)) as session:
        args = {"concurrencies": [1], "context_lengths": [32], "output_tokens": 4, "requests_per_point": 3}
        r = await session.call_tool("run_benchmark", args, progress_callback=on_progress)
        assert not r.isError, text_of(r)
    assert seen and seen[-1][1] == 3 and max(p for p, _ in seen) >= 3
