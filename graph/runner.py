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

from graph.checkpoint import DecisionRecord, open_ledger
from graph.config import Configuration
from graph.policy import approval_id_for
from graph.state import ApprovalRequest, RunMeta, now_iso
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
    #: status ``already_decided``: the decision that stands (another process's), as recorded
    decided: dict[str, Any] | None = None

    @property
    def waiting(self) -> bool:
        """True while the thread waits for a person's decision."""
        return self.status == "awaiting_approval"

    @property
    def finished(self) -> bool:
        return self.status not in ("awaiting_approval", "running", "busy")


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
    from mcp_tools.names import validate_service_name

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
        from graph.checkpoint import thread_lease

        s = get_settings()
        state_dir = Path(self._state_dir) if self._state_dir else s.state_dir
        with (
            compiled_graph(state_dir) as g,
            thread_lease(s.checkpoint_url, state_dir, self.thread_id) as leased,
        ):
            if not leased:
                raise UserError(f"thread {self.thread_id!r} is being run by another process")
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


def thread_result(thread_id: str, *, state_dir: str | Path | None = None) -> CycleResult:
    """Where a thread stands now: waiting for a decision, running, or its outcome (UserError: unknown)."""
    with compiled_graph(state_dir) as g:
        thread_configuration(thread_id, g)
        return _result(g, thread_id, {"configurable": {"thread_id": thread_id}})


def record_report(thread_id: str, paths: dict[str, str], *, state_dir: str | Path | None = None) -> None:
    """Put a report written outside the graph (a read-only watch's look, reported once it is known to be
    a new incident) into its thread, as the report node stores it: ``thread_result(...).report`` and
    every reader of the thread (MCP ``get_incident_report``, the REPL) then finds it."""
    from graph.checkpoint import thread_lease

    s = get_settings()
    where = Path(state_dir) if state_dir else s.state_dir
    with compiled_graph(where) as g, thread_lease(s.checkpoint_url, where, thread_id) as leased:
        if not leased:
            raise UserError(f"thread {thread_id!r} is being run by another process")
        config = {"configurable": {"thread_id": thread_id}}
        thread_configuration(thread_id, g)  # UserError: no such thread
        g.update_state(config, {"report": dict(paths)}, as_node="report")


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
    note: str | None = None,
    reason: str | None = None,
    on_update: OnUpdate | None = None,
    live: Configuration | None = None,
    option: int | None = None,
) -> CycleResult:
    """Answer a thread's approval request and run it to the end. ``live`` carries in-process objects.

    ``option`` (1-based, as the request's ranked options show it): approve that option instead of
    the one offered; it must have passed preflight (``UserError`` otherwise, nothing recorded).
    An approval is given only while the service can be reached (``UserError`` otherwise, nothing
    recorded): a change that cannot be sent or verified is not approved into the void.

    ``approver`` is the authenticated identity deciding (the OS user, the MCP token's principal);
    ``note`` a name the person typed, kept beside it. The decision is first recorded in the checkpoint
    store (``graph.checkpoint.Decisions``): when another process decided this plan first, nothing is
    resumed and the result (status ``already_decided``) says which decision stands, by whom and when.
    """
    from langgraph.types import Command

    from graph.checkpoint import thread_lease

    if decision not in ("approve", "reject"):
        raise UserError(f"decision must be approve or reject, not {decision!r}")
    if option is not None and decision != "approve":
        raise UserError("--option: only an approval chooses an option")
    if not approver.strip():
        raise UserError("--approver: a decision must name who made it")
    s = get_settings()
    state_dir = Path(live.state_dir) if live is not None and live.state_dir else s.state_dir
    # The ledger is opened for each read and write, not for the run: the resumed graph waits on Cloud
    # Run (apply, verify) for minutes, and on Postgres a ledger connection held that long is a pool slot.
    with (
        compiled_graph(state_dir) as g,
        thread_lease(s.checkpoint_url, state_dir, thread_id) as leased,
    ):
        cfg = thread_configuration(thread_id, g)
        if live is not None:
            cfg.model, cfg.tools = live.model, live.tools
        config = _runnable_config(thread_id, cfg)
        if not leased:
            # Another live process runs this thread (it decided, or it is still planning).
            return _busy(g, thread_id, config, state_dir, decision)
        snap = g.get_state(config)
        if not snap.interrupts and snap.next:
            # Killed mid-cycle: carry on from the last checkpoint (to the end, or to the approval).
            # The thread was killed before it asked, or after a decision was recorded and resumed:
            # either way the decision given now is not for what happens next. Show the result.
            _stream(g, None, config, on_update)
            return _result(g, thread_id, config)
        if not snap.interrupts:
            done = _result(g, thread_id, config)
            with open_ledger(state_dir) as store:
                recorded = store.for_thread(thread_id)
            if recorded:
                return _lost(done, recorded[-1], decision, running=False)
            raise UserError(f"thread {thread_id!r} is not waiting for a decision (it ended: {done.status})")
        shown = ApprovalRequest.model_validate(snap.interrupts[0].value)
        approved_key = shown.plan_key
        values = dict(snap.values or {})
        if option is not None:
            approved_key = _option_key(values, thread_id, option, cfg)
        if decision == "approve" and _undecided(state_dir, thread_id, shown.plan_key):
            why = unreachable(cfg)
            if why:
                raise UserError(
                    f"thread {thread_id}: not approved, the service {cfg.service} cannot be reached "
                    f"({why}); nothing was recorded"
                )
        mine = DecisionRecord(
            thread_id=thread_id,
            plan_key=shown.plan_key,
            decision=decision,  # type: ignore[arg-type]
            principal=approver.strip()[:200],
            note=(note.strip()[:200] or None) if note else None,
            reason=str(reason)[:500] if reason else None,
            approval_id=approval_id_for(thread_id, approved_key),
            at=now_iso(),
        )
        with open_ledger(state_dir) as store:
            won, standing = store.claim(mine)
        # Not won while holding the lease: the process that decided first died before carrying it
        # out. Its recorded decision stands and is carried out here; the result says whose it is.
        from graph.nodes.approve import DecisionConflict

        try:
            _stream(g, Command(resume=_answer(standing, values, thread_id)), config, on_update)
        except DecisionConflict:
            # The thread was resumed outside this runner with another answer (LangGraph Studio, an
            # old client): the recorded approval belongs to another resume; nothing is applied here.
            return _lost(_result(g, thread_id, config), standing, decision, running=True)
        res = _result(g, thread_id, config)
        if not won:
            other = standing.approval_id != mine.approval_id
            return _lost(res, standing, decision, running=False, carried_on=True, other_option=other)
        return res


def _answer(rec: DecisionRecord, values: dict[str, Any], thread_id: str) -> dict[str, Any]:
    return {
        "decision": rec.decision,
        "approver": rec.principal,
        "note": rec.note,
        "reason": rec.reason,
        "at": rec.at,
        "plan_key": rec.plan_key,  # the decision is for the plan that was shown
        "claim": rec.claim,  # the apply node checks the recorded decision carries this claim
        "option": _option_of(rec, values, thread_id),  # the option it approves (None: the offered)
    }


def _option_of(rec: DecisionRecord, values: dict[str, Any], thread_id: str) -> int | None:
    """The ranked option a recorded decision approves, by its approval id (None: the offered plan)."""
    from graph.policy import apply_key
    from mcp_tools.remediation import RemediationPlan

    if rec.decision != "approve" or rec.approval_id == approval_id_for(thread_id, rec.plan_key):
        return None
    for i, raw in enumerate(values.get("ranked") or [], start=1):
        if (
            approval_id_for(thread_id, apply_key(thread_id, RemediationPlan.model_validate(raw)))
            == rec.approval_id
        ):
            return i
    return None


def _option_key(values: dict[str, Any], thread_id: str, option: int, cfg: Configuration) -> str:
    """The apply key of ranked option ``option`` (1-based), which must have passed preflight."""
    from graph.policy import apply_key
    from graph.preflight import why_not
    from mcp_tools.remediation import RemediationPlan

    ranked = [RemediationPlan.model_validate(r) for r in values.get("ranked") or []]
    if not ranked:
        raise UserError(f"--option {option}: thread {thread_id} has no ranked options to choose from")
    if not 1 <= option <= len(ranked):
        raise UserError(
            f"--option {option}: there is no such option (thread {thread_id} has options 1 to {len(ranked)})"
        )
    chosen = ranked[option - 1]
    if not chosen.preflight.ok:
        why = "; ".join(why_not(chosen)) or "no reason recorded"
        raise UserError(f"--option {option} failed preflight ({why}); it cannot be approved")
    if not chosen.mutates:
        raise UserError(f"--option {option} changes nothing (a person must act); there is nothing to approve")
    return apply_key(thread_id, chosen)


#: How long ``approve`` waits to learn whether the service can be reached (one attempt).
REACH_TIMEOUT_S = 10.0


def unreachable(cfg: Configuration) -> str | None:
    """Why the thread's service cannot be reached now (one read of it through the Cloud Run API, no
    retries); None: it can."""
    from graph.world import World
    from mcp_tools.errors import short_error
    from mcp_tools.google_api import Deadline

    probe = cfg.model_copy(update={"retries": 1})
    try:
        World(probe, deadline=Deadline(REACH_TIMEOUT_S)).get_service(cfg.service)
    except Exception as e:  # noqa: BLE001 - any failure means the change could not be made now
        return short_error(e)
    return None


def _undecided(state_dir: Path, thread_id: str, plan_key: str) -> bool:
    with open_ledger(state_dir) as store:
        return store.get(thread_id, plan_key) is None


def _busy(g: Any, thread_id: str, config: dict[str, Any], state_dir: Path, decision: str) -> CycleResult:
    with open_ledger(state_dir) as store:
        recorded = store.for_thread(thread_id)
    res = _result(g, thread_id, config)
    if recorded:
        return _lost(res, recorded[-1], decision, running=True)
    return CycleResult(
        thread_id=thread_id,
        status="busy",
        summary=f"thread {thread_id} is being run by another process right now; nothing was done here "
        "(try again when it is waiting for a decision)",
        values=res.values,
    )


def _lost(
    res: CycleResult,
    rec: DecisionRecord,
    decision: str,
    *,
    running: bool,
    carried_on: bool = False,
    other_option: bool = False,
) -> CycleResult:
    """The result for a process whose decision was not the one recorded (or came second)."""
    yours = "approval" if decision == "approve" else "rejection"
    head = f"your {yours} was not recorded: this plan was already {rec.verb()} by {rec.who} at {rec.at}"
    if other_option and rec.decision == decision:
        head += " (another of its options)"
    elif rec.decision == decision:
        head = f"already {rec.verb()} by {rec.who} at {rec.at}; nothing more was recorded for you"
    if carried_on:
        tail = f"that process stopped before carrying it out, so this one did: {res.status}: {res.summary}"
    elif running:
        tail = (
            "the process that decided is carrying it out now (it applies the fix)"
            if rec.decision == "approve"
            else "the process that decided is finishing the thread; nothing is applied"
        )
    else:
        tail = f"the thread's outcome: {res.status}: {res.summary}"
    return CycleResult(
        thread_id=res.thread_id,
        status="already_decided",
        summary=f"{head}; {tail}",
        report=res.report,
        values=res.values,
        decided=rec.model_dump(mode="json"),
    )
