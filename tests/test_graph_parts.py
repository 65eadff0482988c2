"""The loop's parts that need no sandbox: audit log, keys, routes, checkpointer choice, mcpServers files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graph import audit
from graph.checkpoint import open_checkpointer, sqlite_path
from graph.config import Configuration
from graph.nodes.approve import ApprovalInputError, parse_decision
from graph.policy import apply_key, approval_id_for, auto_allowed, route_after_preflight
from graph.tools import connections_from_file
from mcp_tools.errors import UserError
from mcp_tools.remediation import PlanStep, RemediationKind, RemediationPlan
from mcp_tools.settings import Policy


def _plan(*kinds: RemediationKind) -> RemediationPlan:
    return RemediationPlan(steps=[PlanStep(kind=k, change={"x": 1}) for k in kinds])


def test_audit_is_append_only_deduplicated_and_redacted(tmp_path: Path) -> None:
    ev = audit.AuditEvent(
        event="approval",
        thread_id="t1",
        service="svc",
        actor="alice",
        approval_id="apr-1",
        what="set_model",
        diff="+ HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz123456",
    )
    assert audit.append(ev, state_dir=tmp_path) is True
    assert audit.append(ev, state_dir=tmp_path) is False  # a re-run node does not record twice
    audit.append(
        ev.model_copy(update={"event": "mutation", "event_id": "", "revision": "r2"}), state_dir=tmp_path
    )
    lines = audit.audit_path(tmp_path).read_text().splitlines()
    assert len(lines) == 2
    assert "hf_abcdefghijklmnopqrstuvwxyz123456" not in audit.audit_path(tmp_path).read_text()
    assert audit.approved_ids(tmp_path) == {"apr-1"}
    assert [e.event for e in audit.read(tmp_path)] == ["approval", "mutation"]


def test_apply_key_is_deterministic_per_thread_and_plan() -> None:
    p = _plan(RemediationKind.SET_MODEL)
    assert apply_key("t", p) == apply_key("t", _plan(RemediationKind.SET_MODEL))
    assert apply_key("t", p) != apply_key("u", p)
    assert apply_key("t", p) != apply_key("t", _plan(RemediationKind.SET_VLLM_ARGS))
    assert approval_id_for("t", "k").startswith("apr-")


def test_auto_policy_only_for_listed_kinds() -> None:
    cfg = Configuration(policy=Policy.AUTO, auto_kinds=["set_scaling"])
    assert auto_allowed(_plan(RemediationKind.SET_SCALING), cfg)
    assert not auto_allowed(_plan(RemediationKind.SET_SCALING, RemediationKind.SET_MODEL), cfg)
    assert not auto_allowed(_plan(RemediationKind.ESCALATE), cfg)
    assert not auto_allowed(_plan(RemediationKind.SET_SCALING), Configuration(policy=Policy.APPROVE))


@pytest.mark.parametrize(
    ("policy", "ok", "kinds", "route"),
    [
        (Policy.APPROVE, True, [RemediationKind.SET_MODEL], "approve"),
        (Policy.AUTO, True, [RemediationKind.SET_MODEL], "approve"),
        (Policy.SUGGEST, True, [RemediationKind.SET_MODEL], "report"),
        (Policy.READ_ONLY, True, [RemediationKind.SET_MODEL], "report"),
        (Policy.APPROVE, False, [RemediationKind.SET_MODEL], "report"),
        (Policy.APPROVE, True, [RemediationKind.ESCALATE], "report"),
    ],
)
def test_route_after_preflight(policy: Policy, ok: bool, kinds: list[RemediationKind], route: str) -> None:
    state = {"plan": _plan(*kinds).model_dump(mode="json"), "preflight": {"ok": ok}}
    config = {"configurable": {"policy": policy.value}}
    assert route_after_preflight(state, config) == route  # type: ignore[arg-type]


def test_decisions_must_be_typed_and_name_the_approver() -> None:
    assert parse_decision({"decision": "approve", "approver": "bob"})[:2] == ("approve", "bob")
    for bad in ({"decision": "delete the service", "approver": "x"}, {"decision": "approve"}, 42):
        with pytest.raises(ApprovalInputError):
            parse_decision(bad)


def test_a_none_that_is_a_setting_survives_the_thread_and_a_none_override_is_not_given() -> None:
    """``canary_max_ratio=None`` (latency not compared) is a setting: every node reads the thread's
    configuration back through ``from_runnable_config``, and there it must still be None."""
    cfg = Configuration.from_settings(canary_max_ratio=None, service="svc")
    assert cfg.canary_max_ratio is None
    back = Configuration.from_runnable_config({"configurable": cfg.persisted()})
    assert back.canary_max_ratio is None and back.service == "svc"
    assert Configuration.from_settings().canary_max_ratio == 1.5
    # elsewhere None is "not given": the process settings fill it in
    assert Configuration.from_settings(cycle_deadline_s=None).cycle_deadline_s == cfg.cycle_deadline_s


def test_checkpointer_sqlite_default_and_bad_scheme(tmp_path: Path) -> None:
    assert sqlite_path(None, tmp_path) == tmp_path / "checkpoints.sqlite"
    assert sqlite_path("sqlite:////x/y.db", tmp_path) == Path("/x/y.db")
    with pytest.raises(UserError):
        sqlite_path("mysql://h/db", tmp_path)
    with open_checkpointer(None, tmp_path) as saver:
        assert saver is not None
    assert (tmp_path / "checkpoints.sqlite").exists()


def test_mcp_servers_file_becomes_connections(tmp_path: Path) -> None:
    f = tmp_path / "mcp.json"
    f.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "local": {"command": "some-server", "args": ["--stdio"], "env": {"A": "1"}},
                    "remote": {"httpUrl": "http://127.0.0.1:9/mcp", "headers": {"X": "y"}},
                    "old": {"url": "http://127.0.0.1:9/sse"},
                    "off": {"command": "x", "disabled": True},
                }
            }
        )
    )
    conns = connections_from_file(f)
    assert conns["local"] == {
        "transport": "stdio",
        "command": "some-server",
        "args": ["--stdio"],
        "env": {"A": "1"},
    }
    assert conns["remote"]["transport"] == "streamable_http"
    assert conns["old"]["transport"] == "sse"
    assert "off" not in conns
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(UserError):
        connections_from_file(tmp_path / "bad.json")


def test_apply_is_closed_without_a_recorded_approval(tmp_path: Path) -> None:
    from graph.nodes.apply import NotApproved, apply

    plan = _plan(RemediationKind.SET_MODEL).model_dump(mode="json")
    approval = {"decision": "approve", "approver": "mallory", "approval_id": "apr-forged"}
    base = {"configurable": {"thread_id": "t", "service": "svc", "state_dir": str(tmp_path)}}
    # an approval in the state that the audit log never recorded
    with pytest.raises(NotApproved):
        apply({"plan": plan, "approval": approval}, base)  # type: ignore[arg-type]
    with pytest.raises(NotApproved):
        apply({"plan": plan, "approval": {**approval, "decision": "reject"}}, base)  # type: ignore[arg-type]
    with pytest.raises(NotApproved):
        apply({"plan": plan}, base)  # type: ignore[arg-type]
    audit.append(
        audit.AuditEvent(event="approval", thread_id="t", service="svc", actor="x", approval_id="apr-forged"),
        state_dir=tmp_path,
    )
    for policy in (Policy.READ_ONLY, Policy.SUGGEST):
        cfg = {"configurable": {**base["configurable"], "policy": policy.value}}
        with pytest.raises(NotApproved):
            apply({"plan": plan, "approval": approval}, cfg)  # type: ignore[arg-type]
