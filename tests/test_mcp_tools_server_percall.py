"""The MCP server driven the way the MCP Inspector's CLI drives it: a new ``gemma-sre mcp`` process for
every call (official MCP client over stdio), all sharing one state dir. The two-step mutation works
across processes with the token read from the readable text; a replay, or a token planned before the
service changed, is refused in yet another process; the sandbox's journal shows exactly what ran.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult

from mcp_tools.incident import ServiceSpec
from sandbox.server import Sandbox, start_sandbox
from sandbox.testing import TEST_TIME_SCALE, sandbox_env
from tests.mcp_client import server_env, stdio_params, text_of

SERVICE = "gemma-ok"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Sandbox, dict[str, str]]]:
    sb = start_sandbox(time_scale=TEST_TIME_SCALE, zero_latency=True)
    try:
        sb.deploy(
            ServiceSpec(
                name=SERVICE,
                gpu_type="nvidia-l4",
                cpu=8,
                memory="32Gi",
                image="vllm/vllm-openai:v0.11.0",
                args=["--model=/mnt/models/gemma-4-12B-it-qat-w4a16-ct", "--max-model-len=8192"],
                max_instances=1,
                concurrency=4,
            ),
            wait=True,
        )
        yield sb, server_env(sandbox_env(sb), tmp_path_factory.mktemp("state"))
    finally:
        sb.stop()


def calls_in_a_new_process(env: dict[str, str], *calls: tuple[str, dict[str, Any]]) -> list[CallToolResult]:
    """Spawn the server, initialize, make the calls, let the process go: what ``inspector --cli`` does
    (one call a process)."""

    async def session() -> list[CallToolResult]:
        async with stdio_client(stdio_params(env)) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return [await s.call_tool(name, args) for name, args in calls]

    return anyio.run(session)


def call_in_a_new_process(env: dict[str, str], name: str, args: dict[str, Any]) -> CallToolResult:
    return calls_in_a_new_process(env, (name, args))[0]


def token_in_text(r: CallToolResult) -> str:
    """The token as a model reading the text content sees it."""
    assert not r.isError, text_of(r)
    m = re.search(r"confirmation_token='([^']+)'", text_of(r))
    assert m, text_of(r)
    return m.group(1)


def mutations(sb: Sandbox) -> list[Any]:
    return [e for e in sb.journal.entries() if e.method in ("POST", "PATCH", "DELETE", "PUT")]


@pytest.mark.slow
def test_two_step_mutation_across_processes_and_a_replay_refused(
    world: tuple[Sandbox, dict[str, str]],
) -> None:
    sb, env = world
    n0 = len(mutations(sb))
    scale = {"service_name": SERVICE, "min_instances": 0, "max_instances": 3}
    plan = call_in_a_new_process(env, "update_vllm_scaling", scale)
    token = token_in_text(plan)
    assert plan.structuredContent and plan.structuredContent["confirmation_token"] == token
    assert "[REDACTED]" not in text_of(plan)
    assert len(mutations(sb)) == n0

    applied = call_in_a_new_process(env, "update_vllm_scaling", {**scale, "confirmation_token": token})
    assert not applied.isError, text_of(applied)
    assert applied.structuredContent and applied.structuredContent["status"] == "applied"
    done = mutations(sb)[n0:]
    assert len(done) == 1 and done[0].method == "PATCH"
    assert done[0].approval == applied.structuredContent["approval_id"]

    replay = call_in_a_new_process(env, "update_vllm_scaling", {**scale, "confirmation_token": token})
    assert replay.isError and "already used" in text_of(replay)
    assert len(mutations(sb)) == n0 + 1
    key = Path(env["GEMMA_SRE_STATE_DIR"]) / "mcp" / "confirm.key"
    assert key.stat().st_mode & 0o777 == 0o600
    assert key.read_bytes().hex() not in text_of(plan) + text_of(applied)


@pytest.mark.slow
def test_a_plan_made_before_the_service_changed_is_refused(world: tuple[Sandbox, dict[str, str]]) -> None:
    sb, env = world
    four = {"service_name": SERVICE, "min_instances": 0, "max_instances": 4}
    five = {**four, "max_instances": 5}
    # Both plans in one process, every redemption in the next one.
    old, other = map(
        token_in_text,
        calls_in_a_new_process(env, ("update_vllm_scaling", four), ("update_vllm_scaling", five)),
    )
    n0 = len(mutations(sb))
    moved, stale, wrong = calls_in_a_new_process(
        env,
        ("update_vllm_scaling", {**five, "confirmation_token": other}),
        ("update_vllm_scaling", {**four, "confirmation_token": old}),
        ("update_vllm_scaling", {**five, "confirmation_token": old}),
    )
    assert not moved.isError, text_of(moved)
    assert stale.isError and "changed since this plan" in text_of(stale)
    assert wrong.isError and "already used" in text_of(wrong)  # the refusal spent it
    assert len(mutations(sb)) == n0 + 1  # the move, and nothing for the stale plan
