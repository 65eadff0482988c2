"""The graph under LangGraph Server: ``langgraph dev`` (langgraph-cli[inmem]) serving this repository's
``langgraph.json`` on 127.0.0.1, driven through ``langgraph-sdk`` against a sandbox.

The server's checkpointer is its own (in memory here), so what must outlive it is in our ledger
(``graph.checkpoint.open_ledger``: here the state directory the server shares with the test): one
decision per plan, one apply per plan. A cycle runs to the approval interrupt, is resumed with
``Command(resume=...)`` and applies the fix once; a replayed run (a fork of the thread from before
apply) sends nothing again, and a second, conflicting decision (a fork from the interrupt) is refused.
Skipped when the ``server`` extra is not installed."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from graph import audit
from graph.checkpoint import open_decisions
from graph.state import ApprovalRequest
from mcp_tools.endpoint import tls_context
from mcp_tools.settings import get_settings
from sandbox.testing import sandbox_factory  # noqa: F401  (fixture)
from tests.scripted_openai import free_port
from tests.waiting import wait_until

# Checked, not imported: importing the in-memory runtime starts its flush thread in this process, writing
# ``.langgraph_api/`` under the working directory that every pytest worker shares (they raced on its file).
if not all(importlib.util.find_spec(m) for m in ("langgraph_api", "langgraph_runtime_inmem")):
    pytest.skip("LangGraph Server is not installed (pip install -e '.[server]')", allow_module_level=True)
sdk = pytest.importorskip("langgraph_sdk")

ROOT = Path(__file__).resolve().parent.parent
LANGGRAPH = Path(sys.executable).parent / "langgraph"
GRAPH_ID = "gemma-sre"
SERVICE = "llama-3-8b"


def served_config(where: Path, *, auth: bool = False) -> Path:
    """The repository's ``langgraph.json``, its local paths made absolute, in a directory of its own
    (the in-memory server keeps its files in ``.langgraph_api/`` under the directory it runs in)."""
    cfg = json.loads((ROOT / "langgraph.json").read_text())
    assert cfg["graphs"] == {GRAPH_ID: "./graph/graph.py:graph"}
    assert "." in cfg["dependencies"]
    cfg["dependencies"] = [str(ROOT) if d == "." else d for d in cfg["dependencies"]]
    cfg["graphs"] = {GRAPH_ID: str(ROOT / "graph" / "graph.py") + ":graph"}
    cfg["env"] = str(ROOT / ".env.example")  # what a newcomer copies to .env: no secrets, nothing required
    if auth:
        cfg["auth"] = {"path": str(ROOT / "tests" / "server_auth.py") + ":auth"}
    path = where / "langgraph.json"
    path.write_text(json.dumps(cfg))
    return path


@contextmanager
def langgraph_dev(home: Path, *, auth: bool = False, **env: str) -> Iterator[str]:
    """``langgraph dev`` serving the repository's graph on a free port of 127.0.0.1 (no browser, no
    reload), run from ``home`` with ``env`` added to this process's environment; its URL. ``auth``:
    with ``tests/server_auth.py`` as the server's auth handler."""
    if not LANGGRAPH.exists():
        pytest.skip("langgraph-cli is not installed (pip install 'gemma-sre[server]')")
    home.mkdir(parents=True, exist_ok=True)
    config = served_config(home, auth=auth)
    port = free_port()
    log = (home / "server.log").open("w")
    full = {**os.environ, "LANGSMITH_TRACING": "false", "LANGGRAPH_NO_ANALYTICS": "1", **env}
    proc = subprocess.Popen(
        [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port)]
        + ["--config", str(config)],
        cwd=home,
        env=full,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: stopped with everything it started
    )
    url = f"http://127.0.0.1:{port}"
    try:

        def answers_or_ended() -> bool:
            try:
                return (
                    proc.poll() is not None
                    or httpx.get(f"{url}/ok", timeout=1, verify=tls_context()).status_code == 200
                )
            except httpx.HTTPError:
                return False

        def log_tail() -> str:
            return "langgraph dev did not start:\n" + (home / "server.log").read_text()[-3000:]

        wait_until(answers_or_ended, log_tail, timeout_s=90, every_s=0.25)
        assert proc.poll() is None, log_tail()
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        log.close()


def mutations(sb: Any) -> list[Any]:
    return [
        e
        for e in sb.journal.entries()
        if e.method in ("POST", "PATCH", "PUT", "DELETE") and e.resource.endswith(f"/services/{SERVICE}")
    ]


def interrupt_of(state: dict[str, Any]) -> ApprovalRequest:
    values = [i["value"] for i in state.get("interrupts") or []]
    values += [i["value"] for t in state.get("tasks") or [] for i in t.get("interrupts") or []]
    assert values, state
    return ApprovalRequest.model_validate(values[0])


def checkpoint_before(history: list[dict[str, Any]], node: str) -> str:
    """The id of the (latest) checkpoint whose next step is ``node``."""
    for st in history:  # newest first
        if list(st.get("next") or []) == [node]:
            return str(st["checkpoint"]["checkpoint_id"])
    raise AssertionError(f"no checkpoint before {node}: {[s.get('next') for s in history]}")


@pytest.mark.slow
def test_a_cycle_under_langgraph_server(tmp_path: Path, sandbox_factory: Any) -> None:  # noqa: F811
    """The ledger in the state directory the server shares with this test (one local ``langgraph dev``),
    and the server's auth: the engineer it authenticated is the approver recorded."""
    from tests.server_auth import TOKENS

    sb = sandbox_factory(scenario="kv-starvation")
    with langgraph_dev(tmp_path / "server", auth=True) as url:
        # 401 or 403 by the langgraph-api release: refused either way
        with pytest.raises((sdk.errors.AuthenticationError, sdk.errors.PermissionDeniedError)):
            sdk.get_sync_client(url=url).threads.create()  # no token: no thread, no run
        tokens = {who.split("@")[0]: tok for tok, who in TOKENS.items()}
        one_cycle(url, sb, ledger_url=None, state_dir=get_settings().state_dir, tokens=tokens)


def one_cycle(
    url: str, sb: Any, *, ledger_url: str | None, state_dir: Path, tokens: dict[str, str] | None = None
) -> None:
    """One cycle through the server to the interrupt, approved with ``Command(resume=...)``, applied
    once; then a replayed run that sends nothing and a second decision that is refused. The ledger
    (``open_decisions(ledger_url, state_dir)``) and the sandbox's journal say what happened.
    ``tokens``: each engineer's bearer token (the server authenticates them); None: no auth."""

    def as_(name: str) -> Any:
        headers = {"Authorization": f"Bearer {tokens[name]}"} if tokens else None
        return sdk.get_sync_client(url=url, headers=headers)

    def principal(name: str) -> str:
        return f"langgraph:{name}@example.com" if tokens else name

    client = as_("dana")
    # An assistant per watched service: the graph with its configuration (the graph's context schema).
    context = {"service": SERVICE, **sb.settings_fields(), "use_model": False, "verify_poll_s": 0.05}
    assistant = client.assistants.create(GRAPH_ID, context=context, name=SERVICE)
    aid = assistant["assistant_id"]
    schemas = client.assistants.get_schemas(aid)
    assert "service" in (schemas.get("context_schema") or {}).get("properties", {}), schemas
    thread = client.threads.create()
    tid = thread["thread_id"]

    client.runs.wait(tid, aid, input={})
    state = client.threads.get_state(tid)
    assert list(state["next"]) == ["approve"], state["next"]
    asked = interrupt_of(state)
    assert asked.thread_id == tid and asked.service == SERVICE and asked.plan_key
    assert mutations(sb) == []  # nothing is sent before a person decides

    answer = {"decision": "approve", "approver": "dana", "plan_key": asked.plan_key}
    client.runs.wait(tid, aid, command={"resume": answer})
    values = client.threads.get_state(tid)["values"]
    assert values["outcome"]["status"] == "fixed", values["outcome"]
    with open_decisions(ledger_url, state_dir) as store:
        recorded = store.for_thread(tid)
        assert [(r.decision, r.principal) for r in recorded] == [("approve", principal("dana"))]
        assert recorded[0].note == ("dana" if tokens else None)  # the name typed, kept beside
        made = store.applied(tid, values["applied"]["key"])
        if ledger_url is not None:  # the audit's copy, for another replica's apply to find
            assert recorded[0].approval_id in store.audit_approved_ids()
    if ledger_url is None:
        events = [(e.event, e.actor) for e in audit.read(state_dir) if e.thread_id == tid]
        assert ("approval", principal("dana")) in events and ("mutation", "gemma-sre") in events, events
    assert made is not None and made.approval_id == recorded[0].approval_id
    sent = mutations(sb)
    assert len(sent) == 1 and sent[0].approval == recorded[0].approval_id, [m.model_dump() for m in sent]
    assert made.revision == values["applied"]["revision"]

    history = client.threads.get_history(tid, limit=100)
    # A replayed run: the thread forked from just before apply runs apply, verify and report again.
    client.runs.wait(tid, aid, input=None, checkpoint_id=checkpoint_before(history, "apply"))
    replayed = client.threads.get_state(tid)["values"]
    assert replayed["applied"]["already_applied"] is True, replayed["applied"]
    assert replayed["applied"]["revision"] == made.revision
    assert len(mutations(sb)) == 1  # sent once, not twice

    # A second, conflicting decision on the same plan: the thread forked from before preflight asks
    # again (a new interrupt), and another engineer answers it with a rejection. The approval stands.
    client.runs.wait(tid, aid, input=None, checkpoint_id=checkpoint_before(history, "preflight"))
    again = client.threads.get_state(tid)
    assert interrupt_of(again).plan_key == asked.plan_key  # the same plan, asked a second time
    other = {"decision": "reject", "approver": "eve", "reason": "second opinion"}
    with pytest.raises(Exception, match=f"already approved by {principal('dana')}") as refused:
        as_("eve").runs.wait(tid, aid, command={"resume": other})
    assert f"the reject by {principal('eve')} is not carried out" in str(refused.value)
    with open_decisions(ledger_url, state_dir) as store:
        assert [(r.decision, r.principal) for r in store.for_thread(tid)] == [("approve", principal("dana"))]
    assert len(mutations(sb)) == 1
    if ledger_url is None:
        assert [e for e in audit.read(state_dir) if e.thread_id == tid and e.event == "rejection"] == []
