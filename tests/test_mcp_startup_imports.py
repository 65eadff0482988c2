"""What ``gemma-sre mcp`` imports before it answers ``tools/list``: the tools' schemas need their
signatures and result models, not the clients a tool call uses (issue 13's start-up goal). Run in a
fresh interpreter: this process has imported everything already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_START = """
import json, sys
import anyio
from agent.commands.mcp import build
from mcp_tools.settings import get_settings

server = build(get_settings())
tools = anyio.run(server.list_tools)
print(json.dumps({"tools": len(tools), "modules": sorted(sys.modules)}))
"""

#: Modules only a tool call (or another command) needs.
NOT_AT_START = (
    "mcp_tools.cloudrun",  # the Cloud Run client (its result models are mcp_tools.service_models)
    "mcp_tools.incident",  # the incident file reader
    "mcp_tools.cloudlogging",
    "mcp_tools.endpoint",
    "graph.state",  # the loop's state (investigate's schema needs graph.approval_request only)
    "graph.runner",
    "langgraph",
    "langchain_core",
    "typer",
    "google.api_core",  # (the google.cloud namespace itself comes with the interpreter: a .pth file)
    "google.cloud.run_v2",
    "google.cloud.logging_v2",
    "tomllib",  # no config file here
)


def test_the_server_lists_its_tools_without_the_clients_a_call_uses(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEMMA_SRE_")}
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path))  # no config file: no profile to read
    out = subprocess.run(
        [sys.executable, "-c", _START], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["tools"] >= 30
    loaded = [m for m in NOT_AT_START if any(x == m or x.startswith(m + ".") for x in doc["modules"])]
    assert loaded == []
    assert "mcp_tools.service_models" in doc["modules"]  # the check sees the server's own modules
