"""``gemma-sre mcp --transport http``: bearer-token auth, the read-only policy, an unreachable endpoint.

One server process for the module, started as users start it, driven by the official MCP client over
streamable HTTP.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.streamable_http import streamable_http_client

from mcp_tools.endpoint import tls_context
from tests.mcp_client import INITIALIZE, ROOT, SessionThread, server_env, text_of
from tests.processes import announcing, mcp_http_server
from tests.scripted_openai import free_port

TOKEN = "test-token-not-a-secret-123"
MUTATING = {"deploy_vllm", "destroy_vllm", "update_vllm_scaling", "rollback_service", "save_hf_token"}


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    dead = free_port()  # nothing listens here: the "unreachable endpoint"
    env = server_env(
        {
            "GEMMA_SRE_MCP_TOKEN": TOKEN,
            "GEMMA_SRE_POLICY": "read-only",
            "VLLM_BASE_URL": f"http://127.0.0.1:{dead}",
            "GEMMA_SRE_HTTP_TIMEOUT_S": "3",
        },
        tmp_path_factory.mktemp("state"),
    )
    with mcp_http_server(env) as url:
        yield url


def _opener(url: str, token: str | None) -> Any:
    @asynccontextmanager
    async def open_() -> AsyncIterator[Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            httpx.AsyncClient(
                headers=headers, timeout=httpx.Timeout(30, read=120), verify=tls_context()
            ) as http,
            streamable_http_client(url, http_client=http) as streams,
        ):
            yield streams

    return open_


@pytest.fixture(scope="module")
def client(http_server: str) -> Iterator[SessionThread]:
    st = SessionThread(_opener(http_server, TOKEN))
    yield st
    st.close()


def test_requests_without_the_bearer_token_get_401(http_server: str) -> None:
    init = INITIALIZE
    headers = {"Accept": "application/json, text/event-stream"}
    r = httpx.post(http_server, json=init, headers=headers, timeout=10, verify=tls_context())
    assert r.status_code == 401
    assert r.headers["www-authenticate"].startswith("Bearer")
    r = httpx.post(
        http_server,
        json=init,
        headers={**headers, "Authorization": "Bearer wrong"},
        timeout=10,
        verify=tls_context(),
    )
    assert r.status_code == 401
    r = httpx.post(
        http_server,
        json=init,
        headers={**headers, "Authorization": f"Bearer {TOKEN}"},
        timeout=10,
        verify=tls_context(),
    )
    assert r.status_code == 200


def test_official_client_without_token_cannot_connect(http_server: str) -> None:
    with pytest.raises(RuntimeError, match="401 Unauthorized"):  # the client's HTTP error, at start
        SessionThread(_opener(http_server, None), start_timeout=20)


def test_read_only_policy_hides_mutating_tools(client: SessionThread) -> None:
    names = client.tool_names()
    assert not (names & MUTATING)
    assert {"status_vllm", "get_vllm_metrics", "get_service_logs", "plan_capacity"} <= names
    r = client.call("update_vllm_scaling", {"min_instances": 0, "max_instances": 1})
    assert r.isError and "update_vllm_scaling" in text_of(r)  # unknown tool


def test_unreachable_endpoint_is_a_clear_error(client: SessionThread) -> None:
    t0 = time.monotonic()
    r = client.call("query_vllm", {"prompt": "hello"}, timeout=60)
    assert r.isError and "cannot reach" in text_of(r)
    r = client.call("get_vllm_metrics", timeout=60)
    assert r.isError and "cannot reach" in text_of(r)
    assert time.monotonic() - t0 < 30  # no hang
    h = client.call("verify_model_health")
    assert not h.isError and h.structuredContent["healthy"] is False
    assert "cannot reach" in h.structuredContent["problems"][0]


def test_non_loopback_bind_without_token_is_refused(tmp_path: Path) -> None:
    env = server_env({}, tmp_path)
    p = subprocess.run(
        [sys.executable, "-m", "agent.cli", "mcp", "--transport", "http", "--host", "0.0.0.0", "--port", "1"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode == 2
    assert "GEMMA_SRE_MCP_TOKEN" in p.stderr and "Traceback" not in p.stderr


def test_sample_client_configs_start_this_server_without_personal_paths() -> None:
    import json

    for rel in (".agents/mcp_config.json", "docs/gemini-settings.json"):
        text = (Path(ROOT) / rel).read_text()
        server = json.loads(text)["mcpServers"]["gemma-sre"]
        assert server["command"] == "gemma-sre" and server["args"] == ["mcp"]
        assert "/home/" not in text and "/Users/" not in text and "C:\\\\" not in text


def test_it_says_where_it_listens_and_how_to_authenticate(tmp_path: Path) -> None:
    import re

    from tests.scripted_openai import free_port

    port = free_port()
    env = server_env({"GEMMA_SRE_MCP_TOKEN": TOKEN, "GEMMA_SRE_POLICY": "read-only"}, tmp_path)
    cmd = [sys.executable, "-m", "agent.cli", "mcp", "--transport", "http", "--port", str(port)]
    with announcing(cmd, env=env, until="authentication:") as (p, text):
        url = re.search(r"listening on (http://\S+)", text)
        assert url and url.group(1) == f"http://127.0.0.1:{port}/mcp", text
        assert "Authorization: Bearer <token>" in text and "GEMMA_SRE_MCP_TOKEN" in text
        assert TOKEN not in text
        st = SessionThread(_opener(url.group(1), TOKEN))  # the printed URL is the one that works
        try:
            assert "status_vllm" in st.tool_names()
        finally:
            st.close()
    assert p.stdout is not None
    assert p.stdout.read() == ""  # nothing on stdout
