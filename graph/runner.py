"""Running the loop: one way to run a cycle, for the CLI, the demo, watch mode, the REPL
and the MCP agent tools.

Public API:

- ``run_cycle(cfg, *, thread_id=None, since=None, on_update=None) -> CycleResult``: one cycle, to the
  report or to the approval interrupt (``since``: read logs from there, as watch mode does).
- ``stream_cycle(cfg, *, thread_id=None, since=None) -> CycleStream``: the same cycle as an iterator
  of ``StepUpdate`` (one per finished node); ``.result`` holds the ``CycleResult`` afterwards.
- ``resume_cycle``: answer a waiting thread's approval request / carry on a
  thread a crash interrupted; ``thread_result(thread_id)``: where a thread stands now.

The graph is compiled with the configured checkpointer for each call and streamed with
``durability="sync"``: each step's checkpoint is on disk before the next step starts, so a process
killed at any point resumes from the last finished step. A thread that stops at the approval
interrupt can be resumed later, from another process, by its thread id alone: its configuration is
kept in its state (``meta.config``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from graph.config import Configuration
from graph.state import ApprovalRequest, RunMeta
from mcp_tools.errors import UserError
from mcp_tools.settings import get_settings

#: ``on_update(node, update)`` is called after each step with that node's state update.
OnUpdate = Callable[[str, dict[str, Any]], None]


class CycleResult(BaseModel):
    thread_id: str
    status: str  # "awaiting_approval", or the outcome's status ("running": not finished)
    summary: str = ""
    pending: ApprovalRequest | None = None  # the approval request, when awaiting a decision
    report: dict[str, str] = Field(default_factory=dict)  # empty when the cycle found nothing
    values: dict[str, Any] = Field(default_factory=dict)

    @property
    def waiting(self) -> bool:
        """True while the thread waits for a person's decision."""
        return self.status == "awaiting_approval"

    @property
    def finished(self) -> bool:
        return self.status not in ("awaiting_approval", "running")


class StepUpdate(BaseModel):
    """One finished node of a cycle and its state update."""

    node: str
    update: dict[str, Any] = Field(default_factory=dict)


@contextmanager
def compiled_graph(state_dir: str | Path | None = None) -> Iterator[Any]:
    """The graph on the checkpoint store: ``GEMMA_SRE_CHECKPOINT_URL``, else SQLite under ``state_dir``
    (default: the settings' state directory)."""
    from graph.checkpoint import open_checkpointer
    from graph.graph import builder

    s = get_settings()
    with open_checkpointer(s.checkpoint_url, Path(state_dir) if state_dir else s.state_dir) as saver:
        yield builder.compile(checkpointer=saver, name="gemma-sre")


def new_thread_id(service: str) -> str:
    return f"{service}-{uuid.uuid4().hex[:10]}"


def _runnable_config(thread_id: str, cfg: Configuration) -> dict[str, Any]:
    """The run config of one run of the graph: its thread, its configuration, and its deadline (one
    per run, from now: a resumed thread's run gets its own)."""
    configurable: dict[str, Any] = {
        "thread_id": thread_id,
        **cfg.persisted(),
        "deadline_at": time.monotonic() + cfg.cycle_deadline_s,
    }
    if cfg.model is not None:
        configurable["model"] = cfg.model
    if cfg.tools is not None:
        configurable["tools"] = cfg.tools
    return {"configurable": configurable, "recursion_limit": 50}


def _updates(g: Any, payload: Any, config: dict[str, Any]) -> Iterator[StepUpdate]:
    for chunk in g.stream(payload, config, stream_mode="updates", durability="sync"):
        if not isinstance(chunk, dict):
            continue
        for node, update in chunk.items():
            if node == "__interrupt__" or not isinstance(update, dict):
                continue
            yield StepUpdate(node=node, update=update)


def _stream(g: Any, payload: Any, config: dict[str, Any], on_update: OnUpdate | None) -> None:
    for step in _updates(g, payload, config):
        if on_update is not None:
            on_update(step.node, step.update)


def _result(g: Any, thread_id: str, config: dict[str, Any]) -> CycleResult:
    snap = g.get_state(config)
    values = dict(snap.values or {})
    if snap.interrupts:
        return CycleResult(
            thread_id=thread_id,
            status="awaiting_approval",
            summary=f"waiting for a decision on thread {thread_id}",
            pending=ApprovalRequest.model_validate(snap.interrupts[0].value),
            values=values,
        )
    outcome = values.get("outcome") or {}
    return CycleResult(
        thread_id=thread_id,
        status=str(outcome.get("status") or ("running" if snap.next else "unknown")),
        summary=str(outcome.get("summary") or ""),
        report=dict(values.get("report") or {}),
        values=values,
    )


def _start(cfg: Configuration, thread_id: str | None, since: str | None) -> tuple[str, dict[str, Any], Any]:
    if not cfg.service:
        raise UserError("no service named: pass --service NAME or set GEMMA_SRE_SERVICE")
    from mcp_tools.cloudrun import validate_service_name

    validate_service_name(cfg.service)
    tid = thread_id or new_thread_id(cfg.service)
    payload: dict[str, Any] = {"meta": RunMeta(thread_id=tid, config=cfg.persisted()).model_dump(mode="json")}
    if since:
        payload["since"] = since
    return tid, _runnable_config(tid, cfg), payload


class CycleStream:
    """One cycle as an iterator of ``StepUpdate``; ``result`` is set once the iteration ends."""

    def __init__(self, cfg: Configuration, *, thread_id: str | None = None, since: str | None = None) -> None:
        self.thread_id, self._config, self._payload = _start(cfg, thread_id, since)
        self._state_dir = cfg.state_dir
        self.result: CycleResult | None = None

    def __iter__(self) -> Iterator[StepUpdate]:
        with compiled_graph(self._state_dir) as g:
            yield from _updates(g, self._payload, self._config)
            self.result = _result(g, self.thread_id, self._config)


def stream_cycle(
    cfg: Configuration, *, thread_id: str | None = None, since: str | None = None
) -> CycleStream:
    """One cycle for ``cfg.service``, step by step (see ``CycleStream``)."""
    return CycleStream(cfg, thread_id=thread_id, since=since)


def run_cycle(
    cfg: Configuration,
    *,
    thread_id: str | None = None,
    since: str | None = None,
    on_update: OnUpdate | None = None,
) -> CycleResult:
    """One cycle for ``cfg.service``: to the report, or to the approval interrupt.

    ``since`` (an RFC 3339 time): observe the logs from there (watch mode passes the end of the
    previous cycle's window); default: the configured log window.
    """
    run = stream_cycle(cfg, thread_id=thread_id, since=since)
    for step in run:
        if on_update is not None:
            on_update(step.node, step.update)
    assert run.result is not None
    return run.result


def thread_result(thread_id: str) -> CycleResult:
    """Where a thread stands now: waiting for a decision, running, or its outcome (UserError: unknown)."""
    with compiled_graph() as g:
        thread_configuration(thread_id, g)
        return _result(g, thread_id, {"configurable": {"thread_id": thread_id}})


def thread_configuration(thread_id: str, g: Any) -> Configuration:
    snap = g.get_state({"configurable": {"thread_id": thread_id}})
    if not snap.values:
        raise UserError(f"thread {thread_id!r}: no such thread in the checkpoint store")
    meta = (snap.values or {}).get("meta") or {}
    return Configuration.model_validate(meta.get("config") or {})


def resume_cycle(
    thread_id: str,
    *,
    decision: str,
    approver: str,
    reason: str | None = None,
    on_update: OnUpdate | None = None,
    live: Configuration | None = None,
) -> CycleResult:
    """Answer a thread's approval request and run it to the end. ``live`` carries in-process objects."""
    from langgraph.types import Command

    from graph.state import now_iso

    if decision not in ("approve", "reject"):
        raise UserError(f"decision must be approve or reject, not {decision!r}")
    if not approver.strip():
        raise UserError("--approver: a decision must name who made it")
    with compiled_graph(live.state_dir if live is not None else None) as g:
        cfg = thread_configuration(thread_id, g)
        if live is not None:
            cfg.model, cfg.tools = live.model, live.tools
        config = _runnable_config(thread_id, cfg)
        snap = g.get_state(config)
        carried_on = False
        if not snap.interrupts and snap.next:
            # Killed mid-cycle: carry on from the last checkpoint (to the end, or to the approval).
            _stream(g, None, config, on_update)
            snap = g.get_state(config)
            carried_on = True
        if carried_on:
            # The thread was killed before it asked: the person has not seen this plan yet, so the
            # decision given now is not for it. Show the request (or the outcome); decide after.
            return _result(g, thread_id, config)
        if not snap.interrupts:
            done = _result(g, thread_id, config)
            raise UserError(f"thread {thread_id!r} is not waiting for a decision (it ended: {done.status})")
        shown = ApprovalRequest.model_validate(snap.interrupts[0].value)
        answer = {
            "decision": decision,
            "approver": approver.strip(),
            "reason": reason,
            "at": now_iso(),
            "plan_key": shown.plan_key,  # the decision is for the plan that was shown
        }
        _stream(g, Command(resume=answer), config, on_update)
        return _result(g, thread_id, config)
