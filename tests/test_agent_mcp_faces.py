"""The agent as MCP tools, through the official MCP client over stdio and streamable HTTP (``gemma-sre
mcp`` as a process) and over memory streams (the same server built in the test's process), against
the sandbox: investigate -> approve (applied once, with the approval header) or reject, reports,
progress notifications, and the read-only policy hiding approval."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from mcp_tools.endpoint import tls_context
from sandbox.testing import sandbox_env, sandbox_factory  # noqa: F401  (fixture)
from tests.mcp_client import SessionThread, server_env, session_here, stdio_params, text_of
from tests.processes import mcp_http_server

pytestmark = pytest.mark.slow  # whole investigations; two tests start the MCP server as a process

FACES = {"investigate", "approve_remediation", "reject_remediation", "get_incident_report"}
SERVICE = "gemma-4-12b"


def _stdio(env: dict[str, str]) -> SessionThread:
    return SessionThread(lambda: stdio_client(stdio_params(env)))


Faces = Callable[..., tuple[Any, SessionThread]]


@pytest.fixture
def faces(tmp_path: Path, sandbox_factory: Callable[..., Any]) -> Iterator[Faces]:  # noqa: F811
    """``faces(**env)``: the reference weights-OOM sandbox and ``gemma-sre mcp`` over stdio pointed at
    it (``env`` added to its settings), as (sandbox, session); every session is closed at teardown."""
    opened: list[SessionThread] = []

    def start(**env: str) -> tuple[Any, SessionThread]:
        sb = sandbox_factory(scenario="reference-weights-oom")
        opened.append(_stdio(server_env({**sandbox_env(sb), **env}, tmp_path / "state")))
        return sb, opened[-1]

    yield start
    for st in opened:
        st.close()


@pytest.fixture
def faces_here(
    sandbox_factory: Callable[..., Any],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Faces]:
    """``faces`` with the server ``gemma-sre mcp`` builds made in this process (the environment set
    here, as the process would read it), served over memory streams."""
    opened: list[SessionThread] = []

    def start(**env: str) -> tuple[Any, SessionThread]:
        sb = sandbox_factory(scenario="reference-weights-oom")
        for name, value in {**sandbox_env(sb), **env}.items():
            monkeypatch.setenv(name, value)
        opened.append(session_here())
        return sb, opened[-1]

    yield start
    for st in opened:
        st.close()


def _call_with_progress(st: SessionThread, name: str, args: dict[str, Any]) -> tuple[Any, list[Any]]:
    seen: list[Any] = []

    async def cb(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    res = st.run(lambda s: s.call_tool(name, args, progress_callback=cb), timeout=180)
    return res, seen


def test_investigate_then_approve_over_stdio(faces: Faces) -> None:
    sb, st = faces(GEMMA_SRE_MCP_PRINCIPAL="sre-team-token")
    assert st.tool_names() >= FACES
    res, progress = _call_with_progress(st, "investigate", {"service": SERVICE})
    assert not res.isError, text_of(res)
    out = res.structuredContent
    assert out["status"] == "awaiting_approval" and out["service"] == SERVICE
    assert out["diagnosis"]["category"] == "weights_oom"
    assert any("OutOfMemoryError" in e["text"] for e in out["diagnosis"]["evidence"])
    assert out["plan"]["steps"] and out["diff"] and out["prediction"]
    assert out["question"] is None
    tid = out["thread_id"]
    assert f"approve_remediation(thread_id={tid!r}" in out["next"]
    # One progress notification per step, in order, with what the step did.
    messages = [m for _, _, m in progress]
    assert [m.split(":")[0] for m in messages[:4]] == ["observe", "diagnose", "propose", "preflight"]
    assert [p for p, _, _ in progress] == sorted(p for p, _, _ in progress)
    assert sb.journal.entries() == []  # investigating changes nothing

    rep = st.call("get_incident_report", {"thread_id": tid})
    assert rep.structuredContent["status"] == "awaiting_approval"
    assert rep.structuredContent["pending"]["diff"] == out["diff"]

    res, progress = _call_with_progress(st, "approve_remediation", {"thread_id": tid, "approver": "oncall"})
    assert not res.isError, text_of(res)
    done = res.structuredContent
    # Recorded as the server's authenticated principal; the name the client typed is a note.
    assert done["status"] == "fixed" and done["applied_revision"]
    assert done["approver"] == "sre-team-token" and done["approver_note"] == "oncall"
    assert [m.split(":")[0] for _, _, m in progress] == ["approve", "apply", "verify", "report"]
    writes = sb.journal.entries()
    assert len(writes) == 1 and writes[0].approval

    rep = st.call("get_incident_report", {"thread_id": tid}).structuredContent
    assert rep["status"] == "fixed" and rep["report"]
    assert "**sre-team-token** (note: oncall)" in rep["markdown"]

    again = st.call("approve_remediation", {"thread_id": tid, "approver": "someone"})
    assert not again.isError and again.structuredContent["status"] == "already_decided"
    assert "already approved by sre-team-token (note: oncall)" in text_of(again)
    assert again.structuredContent["decided"]["principal"] == "sre-team-token"
    assert len(sb.journal.entries()) == 1  # never applied twice
    missing = st.call("get_incident_report", {"thread_id": "no-such-thread"})
    assert missing.isError and "no such thread" in text_of(missing)


def test_read_only_policy_hides_approval_and_only_diagnoses(faces_here: Faces) -> None:
    sb, st = faces_here(GEMMA_SRE_POLICY="read-only")
    names = st.tool_names()
    assert "approve_remediation" not in names and {"investigate", "get_incident_report"} <= names
    res = st.call("investigate", {"service": SERVICE, "question": "why does it not start?"})
    out = res.structuredContent
    assert out["status"] == "diagnosed" and out["diagnosis"]["category"] == "weights_oom"
    # The plan may be shown, but preflight refuses it under read-only: nothing can be approved.
    assert out["preflight_ok"] is False and any("read-only" in n for n in out["preflight_notes"])
    assert out["answer"].startswith("not answered") and "GEMMA_SRE_MODEL_URL" in out["answer"]
    assert sb.journal.entries() == []
    bad = st.call("investigate", {"service": "Not A Service!"})
    assert bad.isError and "service" in text_of(bad).lower()


@pytest.fixture
def http_server(
    tmp_path: Path,
    sandbox_factory: Callable[..., Any],  # noqa: F811
) -> Iterator[tuple[str, Any]]:
    sb = sandbox_factory(scenario="reference-weights-oom")
    with mcp_http_server(server_env(sandbox_env(sb), tmp_path / "state")) as url:
        yield url, sb


def test_investigate_then_reject_over_http(http_server: tuple[str, Any]) -> None:
    url, sb = http_server

    @asynccontextmanager
    async def opener() -> AsyncIterator[Any]:
        async with (
            httpx.AsyncClient(timeout=httpx.Timeout(30, read=180), verify=tls_context()) as http,
            streamable_http_client(url, http_client=http) as streams,
        ):
            yield streams

    st = SessionThread(opener)
    try:
        assert st.tool_names() >= FACES
        res, progress = _call_with_progress(st, "investigate", {"service": SERVICE})
        out = res.structuredContent
        assert out["status"] == "awaiting_approval" and out["diagnosis"]["category"] == "weights_oom"
        assert len(progress) >= 4
        tid = out["thread_id"]
        no_reason = st.call("reject_remediation", {"thread_id": tid, "reason": ""})
        assert no_reason.isError and "reason" in text_of(no_reason)
        rej = st.call("reject_remediation", {"thread_id": tid, "reason": "change freeze", "approver": "lead"})
        assert rej.structuredContent["status"] == "rejected" and rej.structuredContent["decision"] == "reject"
        rep = st.call("get_incident_report", {"thread_id": tid}).structuredContent
        assert rep["status"] == "rejected" and "change freeze" in rep["markdown"]
        assert sb.journal.entries() == []
    finally:
        st.close()


def test_approve_remediation_takes_another_ranked_option(faces_here: Faces) -> None:
    sb, st = faces_here()
    out = st.call("investigate", {"service": SERVICE}).structuredContent
    options = out["options"]
    failed = next(o for o in options if not o["ok"])
    other = next(o for o in options if o["ok"] and not o["offered"])
    assert "option=N" in out["next"]
    bad = st.call("approve_remediation", {"thread_id": out["thread_id"], "option": failed["rank"]})
    assert bad.isError and "failed preflight" in text_of(bad) and sb.journal.entries() == []
    res = st.run(
        lambda s: s.call_tool(
            "approve_remediation", {"thread_id": out["thread_id"], "option": other["rank"]}
        ),
        timeout=180,
    )
    assert not res.isError, text_of(res)
    done = res.structuredContent
    assert done["status"] == "fixed" and done["option"] == other["rank"]
    assert len(sb.journal.entries()) == 1
